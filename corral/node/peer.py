"""Who calls noded: the verified TLS client certificate of a request.

Every node holds a certificate signed by the cluster CA (its ``server.pem``,
also good for client authentication), so that nodes can open connections to
each other (disk streams, migrations).  What amounts to root on the node for
anyone who asks (the console relay, ``gnt-cluster command`` and
``copyfile``) is for the cluster's client certificate alone: masterd's
``client.pem`` (common name ``corral-masterd``), which only root on the
master can read, as Ganeti gives root ssh to the master's root.
"""

from __future__ import annotations

from aiohttp import web


def client_name(request: web.Request) -> str | None:
    """The common name of the TLS client's verified certificate, if any."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    peer = ssl_object.getpeercert() if ssl_object is not None else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def is_cluster_client(request: web.Request) -> bool:
    """Whether the request comes with the cluster's client certificate."""
    # Here, not at the top: noded loads cryptography only when it needs it.
    from corral.crypto.certs import MASTERD_CLIENT_CN

    return client_name(request) == MASTERD_CLIENT_CN


def describe(request: web.Request) -> str:
    """The caller, for the log: its certificate's name and its address."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    address = peer[0] if isinstance(peer, tuple) and peer else "unknown address"
    return f"{client_name(request) or 'no certificate'} at {address}"
