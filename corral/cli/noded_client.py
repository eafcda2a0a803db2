"""Node calls made by a gnt-* command itself: ``POST /<call>`` to noded under
the cluster's mutual TLS, with the standard library alone (the commands import
no heavy library).

The command presents the cluster's client certificate (``client.pem``), which
only root on the master can read: as Ganeti's commands reach a node's sshd
with root's key, ``gnt-cluster command`` and ``copyfile`` reach noded with it,
and ``gnt-instance console`` its console relay.  Nodes are called by address;
the chain to the cluster CA authenticates them.
"""

from __future__ import annotations

import http.client
import json
import ssl

from corral import paths as P
from corral.rpc import versions
from corral.rpc.fencing import FENCE_HEADER, header_value
from corral.rpc.transport import failure_reason, parse_reply

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

CONNECT_TIMEOUT = 10.0  # seconds, as Ganeti's ssh -oConnectTimeout=10
_HEADERS = {"Content-Type": "application/json", **versions.headers()}


class NodeCallError(Exception):
    """The node could not be reached, or refused or failed the call (the
    message says which, in one line)."""


def tls_context(root: str) -> ssl.SSLContext:
    """The client side of the cluster's mutual TLS, for the cluster under ``root``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(P.below(root, f"{P.DATA_DIR}/client.pem"))
        ctx.load_verify_locations(P.below(root, f"{P.DATA_DIR}/cluster-ca.pem"))
    except (OSError, ssl.SSLError) as err:
        raise NodeCallError(f"Cannot load the cluster's client certificate: {err}") from None
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def call(
    ctx: ssl.SSLContext,
    address: str,
    port: int,
    name: str,
    args: list[Any],
    timeout: float,
    fence: int | None = None,
) -> Any:
    """The payload of the node call ``name(*args)`` on the node at ``address``,
    answered within ``timeout`` seconds; NodeCallError if none came.  A call
    that changes the node carries ``fence``, the token of the master the
    command acts for (see :mod:`corral.rpc.fencing`)."""
    where = f"{address}:{port}"
    conn = http.client.HTTPSConnection(address, port, timeout=CONNECT_TIMEOUT, context=ctx)
    try:
        try:
            conn.connect()
        except TimeoutError:
            raise NodeCallError(f"Cannot connect to {where}: timed out") from None
        except ssl.SSLError as err:
            raise NodeCallError(f"TLS error with {where}: {failure_reason(err)}") from None
        except OSError as err:
            raise NodeCallError(f"Cannot connect to {where}: {failure_reason(err)}") from None
        assert conn.sock is not None
        conn.sock.settimeout(timeout)
        try:
            headers = _HEADERS if fence is None else {**_HEADERS, FENCE_HEADER: header_value(fence)}
            conn.request("POST", f"/{name}", body=json.dumps(args).encode(), headers=headers)
            response = conn.getresponse()
            status, body = response.status, response.read()
            node = versions.of_headers(response.headers.get)
        except TimeoutError:
            raise NodeCallError(
                f"RPC call {name} to {address} timed out after {timeout:g} s"
            ) from None
        except (OSError, http.client.HTTPException) as err:
            raise NodeCallError(f"Error talking to {where}: {failure_reason(err)}") from None
    finally:
        conn.close()
    payload, fail_msg = parse_reply(status, body)
    if fail_msg is not None:
        raise NodeCallError(versions.failure(name, node, address, fail_msg, status))
    return payload
