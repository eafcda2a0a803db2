"""A node's side of ``gnt-cluster renew-crypto --new-node-certificates`` and
``--new-cluster-certificate``: a new key whose request the master signs, and
the certificates and trusted CAs it sends back.

The new key never leaves the node: :func:`make_request` makes it and its
certificate request (noded keeps the key in memory until the certificate
comes); :func:`install` checks that the certificate the master signed is for
that key and issued by a CA the node is told to trust, then replaces
``node-key.pem``, ``server.pem`` and (but on the master, where it is masterd's
own) ``client.pem``, and ``cluster-ca.pem``.
"""

from __future__ import annotations

from corral import errors
from corral.node.join_server import join_cert_file, node_key_file
from corral.paths import Paths


def make_request(paths: Paths) -> tuple[bytes, str]:
    """A new key and a certificate request (PEM) for it, in the node's name."""
    from corral.crypto import certs

    name = certs.cert_info(paths.server_pem)["subject"]
    if not name:
        raise errors.OpExecError(f"The node certificate {paths.server_pem} names no node")
    key = certs.make_key_pem()
    return key, certs.make_csr(key, str(name)).decode("ascii")


def install(
    paths: Paths, key: bytes | None, ca_bundle: str, cert: str | None, with_client: bool
) -> None:
    """Trust the CAs of ``ca_bundle``; with ``cert``, serve (and, ``with_client``,
    call other nodes) with it and ``key``, the pending request's.  Nothing is
    written unless everything given checks."""
    from corral.crypto import certs

    cas = certs.pem_certificates(ca_bundle.encode("ascii"))
    if not cas:
        raise errors.OpExecError("The master sent no CA certificate to trust")
    if cert is not None:
        if key is None:
            raise errors.OpExecError(
                "No certificate request is pending on this node: ask for one first"
            )
        leaf = cert.encode("ascii")
        if not certs.same_public_key(leaf, key):
            raise errors.OpExecError("The certificate the master sent is not for this node's key")
        if not any(certs.verify_signed_by(leaf, ca) for ca in cas):
            raise errors.OpExecError("The certificate the master sent is not issued by its CAs")
    certs.write_pem(paths.ca_cert, *cas, private=False)
    if key is not None and cert is not None:
        certs.write_pem(node_key_file(paths), key)
        certs.write_pem(paths.server_pem, cert.encode("ascii"), key)
        if with_client:
            certs.write_pem(paths.client_pem, cert.encode("ascii"), key)
        # The join identity was the old key's; a new one is made if ever needed.
        join_cert_file(paths).unlink(missing_ok=True)
