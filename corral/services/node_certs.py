"""New certificates for every node and for masterd, signed by the cluster CA
(``gnt-cluster renew-crypto --new-node-certificates``); and the end of a
change of the CA itself (``--new-cluster-certificate``).

A new CA is put in place on the master first (:func:`stage_new_ca`): its key
becomes the signing key and its certificate joins the CA file, ahead of the
old one.  Then, under all node locks:

1. every online node trusts every CA of the master's CA file, so that a
   certificate signed by either is good everywhere while they change;
2. each node makes a new key and a certificate request; the master signs it
   with the signing CA and the node serves with it from its next connection
   (the key never leaves the node);
3. masterd gets a new client certificate and reconnects;
4. once every online node has its new certificate, the other CAs are
   forgotten: nodes and master trust the signing CA alone.

While the CA changes, a node that cannot be told to trust the new one stops
the job before anything is signed by it (that node would lose the cluster);
a node that fails later keeps its certificate, still trusted, since step 4
is then skipped.  A later renewal that reaches every node finishes the
change.  Offline nodes are skipped, as Ganeti does; one that comes back
after its CA was forgotten must join again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors
from corral.objects import Node
from corral.rpc.calls_crypto import node_cert_install, node_cert_request

if TYPE_CHECKING:
    from corral.paths import Paths
    from corral.services.context import Master


def stage_new_ca(paths: Paths, cluster_name: str) -> None:
    """A new cluster CA, signing from now on; the old one stays trusted until
    every node has a certificate of the new one (on the master, as root)."""
    from corral.crypto import certs

    old = certs.pem_certificates(paths.ca_cert.read_bytes())
    ca_cert, ca_key = certs.make_ca(cluster_name, C.CERT_VALIDITY_DAYS)
    # The certificate first, then the key: a crash between leaves a CA file
    # whose extra certificate nothing is signed by yet.
    certs.write_pem(paths.ca_cert, ca_cert, *old, private=False)
    certs.write_pem(paths.ca_key, ca_key)


class _Signer:
    """The master's CA material, read once."""

    def __init__(self, paths: Paths) -> None:
        from corral.crypto import certs

        self.key = paths.ca_key.read_bytes()
        cas = certs.pem_certificates(paths.ca_cert.read_bytes())
        self.ca = certs.signing_ca(b"".join(cas), self.key)
        self.trusted = [self.ca, *(ca for ca in cas if ca != self.ca)]

    def bundle(self) -> str:
        return b"".join(self.trusted).decode("ascii")

    def sign(self, csr: str, node: Node) -> str:
        from corral.crypto import certs

        cert = certs.sign_csr(
            self.ca, self.key, csr.encode("ascii"), node.name,
            ips=certs.node_cert_ips(node.primary_ip), dns=[node.name],
        )  # fmt: skip
        return cert.decode("ascii")

    def masterd_client(self, paths: Paths) -> None:
        from corral.crypto import certs

        cert, key = certs.make_signed_cert(
            self.ca, self.key, certs.MASTERD_CLIENT_CN, C.CERT_VALIDITY_DAYS,
            server=False, client=True,
        )  # fmt: skip
        certs.write_pem(paths.client_pem, cert, key)


async def renew(
    master: Master, feedback: Callable[[str], None], warn: Callable[[str], None]
) -> None:
    """Steps 1 to 4 of the module's description, on every online node."""
    cfg, rpc, paths = master.cfg, master.rpc, master.paths
    signer = await asyncio.to_thread(_Signer, paths)
    master_uuid = cfg.cluster.master_node
    nodes = []
    for node in cfg.nodes():
        if node.offline:
            feedback(f"* Skipping offline node {node.name}")
        else:
            nodes.append(node)
    bundle = signer.bundle()
    trusting = await rpc.results(nodes, node_cert_install(bundle, None, False, True))
    failed = [n for n in nodes if not trusting[n.uuid].report(warn, _what(n, "trust the CAs"))]
    if failed and len(signer.trusted) > 1:
        # A node that does not trust the new CA would lose the cluster.
        raise errors.OpExecError(
            f"Node(s) {_names(failed)} could not be told to trust the new cluster CA, so"
            " nothing was signed by it; bring them back (or mark them offline) and run"
            " 'gnt-cluster renew-crypto --new-node-certificates' to finish the change"
        )
    await rpc.transport.close()  # masterd's connections, too, trust them all now

    async def one(node: Node) -> bool:
        result = await rpc.attempt(node, node_cert_request(), warn, _what(node, "make a key"))
        if result.failed:
            return False
        cert = await asyncio.to_thread(signer.sign, result.get(), node)
        install = node_cert_install(bundle, cert, node.uuid != master_uuid, True)
        return not (
            await rpc.attempt(node, install, warn, _what(node, "take its certificate"))
        ).failed

    reached = [n for n in nodes if n not in failed]
    outcomes = await asyncio.gather(*(one(n) for n in reached))
    failed += [n for n, ok in zip(reached, outcomes, strict=True) if not ok]
    await asyncio.to_thread(signer.masterd_client, paths)
    await rpc.transport.close()
    if failed:
        warn(
            f"Node(s) {_names(failed)} kept their certificates; every node trusts the"
            " cluster's CAs until 'gnt-cluster renew-crypto --new-node-certificates'"
            " reaches them all"
        )
        return
    if len(signer.trusted) > 1:
        await _forget_old_cas(master, nodes, signer.ca.decode("ascii"), warn)


async def _forget_old_cas(
    master: Master, nodes: list[Node], ca: str, warn: Callable[[str], None]
) -> None:
    """Step 4: the signing CA alone is trusted, by the nodes and by masterd."""
    results = await master.rpc.results(nodes, node_cert_install(ca, None, False, False))
    for node in nodes:
        results[node.uuid].report(warn, _what(node, "forget the old CA"))
    await master.rpc.transport.close()


def _names(nodes: list[Node]) -> str:
    return ", ".join(sorted(n.name for n in nodes))


def _what(node: Node, step: str) -> str:
    return f"Node {node.name} could not {step}"
