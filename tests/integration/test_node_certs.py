"""gnt-cluster renew-crypto --new-node-certificates and --new-cluster-certificate
on a three-node cluster of real nodeds: every node serves with a new key and
certificate, a new CA replaces the old one everywhere (the old masterd
certificate then opens no node), and a node that cannot be reached keeps a
certificate that stays trusted until a later renewal reaches it."""

from __future__ import annotations

import hashlib
import shutil
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from corral.cli import noded_client
from corral.crypto.certs import cert_info, pem_certificates, verify_signed_by
from corral.paths import Paths
from tests.helpers.cluster import Result, TestCluster
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded, start_noded
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

DONE = (
    "All requested certificates and keys have been replaced."
    ' Running "gnt-cluster verify" now is recommended.'
)


def renew(cl: TestCluster, *args: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "corral.cli.gnt_cluster", "renew-crypto", "--force", *args],
        env=cl.env, capture_output=True, text=True, timeout=300, check=False,
        start_new_session=True,
    )  # fmt: skip
    return Result(proc.returncode, proc.stdout, proc.stderr)


def context(client_pem: Path, ca: Path) -> ssl.SSLContext:
    """A TLS client context presenting ``client_pem`` and trusting ``ca``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_cert_chain(client_pem)
    ctx.load_verify_locations(ca)
    return ctx


def served(address: str, port: int, ctx: ssl.SSLContext) -> str:
    """The SHA-256 of the certificate the noded at ``address`` serves."""
    with (
        socket.create_connection((address, port), timeout=30) as raw,
        ctx.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def fingerprint(pem: bytes) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return hashlib.sha256(
        x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    ).hexdigest()


def version(ctx: ssl.SSLContext, node: Noded) -> object:
    return noded_client.call(ctx, node.address, node.port, "version", [], 30)


def keep(paths: Paths, into: Path) -> tuple[Path, Path]:
    """Copies of masterd's client certificate and the CA file as they are now."""
    into.mkdir()
    client, ca = into / "client.pem", into / "ca.pem"
    shutil.copy(paths.client_pem, client)
    shutil.copy(paths.ca_cert, ca)
    return client, ca


def verify(cl: TestCluster, nodes: list[Noded]) -> None:
    """gnt-cluster verify passes (the fixture's OS is on the master alone)."""
    for node in nodes:
        make_os(node.paths, "plain", variants=None)
    ok(cl.gnt("cluster", "verify"))


def ok(result: Result) -> Result:
    assert result.rc == 0, result.stdout + result.stderr
    return result


def test_new_node_certificates(tmp_path: Path) -> None:
    with cluster_with_nodes(tmp_path) as (cl, nodes):
        master = Noded(cl.paths, cl.node_ip, cl.port)
        everyone = [master, *nodes]
        before = {n.address: n.paths.server_pem.read_bytes() for n in everyone}
        ca = cl.paths.ca_cert.read_bytes()
        old_client, _ = keep(cl.paths, tmp_path / "old")

        result = ok(renew(cl, "--new-node-certificates"))
        assert "Renewing Node SSL certificates" in result.stdout
        assert result.stdout.splitlines()[-1] == DONE

        ctx = context(cl.paths.client_pem, cl.paths.ca_cert)
        for node in everyone:
            pem = node.paths.server_pem.read_bytes()
            assert pem != before[node.address]
            assert node.paths.ca_cert.read_bytes() == ca
            assert verify_signed_by(pem, ca)
            assert cert_info(pem)["subject"] == node.name
            # The node serves the new certificate at once.
            assert served(node.address, node.port, ctx) == fingerprint(pem)
        for node in nodes:  # a node calls the others with its own certificate
            assert node.paths.client_pem.read_bytes() == node.paths.server_pem.read_bytes()
        assert cert_info(cl.paths.client_pem)["subject"] == "corral-masterd"
        assert cl.paths.client_pem.read_bytes() != old_client.read_bytes()
        # Same CA: the old masterd certificate is still a cluster certificate.
        assert version(context(old_client, cl.paths.ca_cert), nodes[0])
        verify(cl, nodes)
        assert "return code = 0" in ok(cl.gnt("cluster", "command", "true")).stdout


def test_new_cluster_certificate(tmp_path: Path) -> None:
    with cluster_with_nodes(tmp_path) as (cl, nodes):
        master = Noded(cl.paths, cl.node_ip, cl.port)
        everyone = [master, *nodes]
        old_client, old_ca = keep(cl.paths, tmp_path / "old")
        old_key = cl.paths.ca_key.read_bytes()

        result = ok(renew(cl, "--new-cluster-certificate"))
        assert "Updating the cluster SSL certificate." in result.stdout

        ca = cl.paths.ca_cert.read_bytes()
        assert len(pem_certificates(ca)) == 1 and ca != old_ca.read_bytes()
        assert cl.paths.ca_key.read_bytes() != old_key
        ctx = context(cl.paths.client_pem, cl.paths.ca_cert)
        for node in everyone:
            assert node.paths.ca_cert.read_bytes() == ca
            pem = node.paths.server_pem.read_bytes()
            assert verify_signed_by(pem, ca) and not verify_signed_by(pem, old_ca.read_bytes())
            assert served(node.address, node.port, ctx) == fingerprint(pem)
        # Who holds the old CA's masterd certificate opens no node any more.
        for node in everyone:
            with pytest.raises(noded_client.NodeCallError):
                version(context(old_client, old_ca), node)
        verify(cl, nodes)
        assert ok(cl.gnt("cluster", "command", "true")).stdout.count("return code = 0") == 3


def test_unreachable_node(tmp_path: Path) -> None:
    with cluster_with_nodes(tmp_path) as (cl, nodes):
        node2, node3 = nodes
        old_ca, old_pems = (
            cl.paths.ca_cert.read_bytes(),
            [n.paths.server_pem.read_bytes() for n in nodes],
        )
        assert node3.stop()
        result = renew(cl, "--new-cluster-certificate")
        assert result.rc != 0
        assert (
            "Node(s) node3.example.com could not be told to trust the new cluster CA, so nothing"
            " was signed by it"
        ) in result.stdout + result.stderr
        # Nothing signed by the new CA; where the change reached, both are trusted.
        assert [n.paths.server_pem.read_bytes() for n in nodes] == old_pems
        trusted = pem_certificates(cl.paths.ca_cert.read_bytes())
        assert len(trusted) == 2 and pem_certificates(old_ca)[0] in trusted
        assert pem_certificates(node2.paths.ca_cert.read_bytes()) == trusted
        nodes[1] = node3 = start_noded(node3.paths, node3.address, node3.port)
        node3.name = "node3.example.com"
        assert node3.paths.ca_cert.read_bytes() == old_ca
        # node3 is still a member: the cluster reaches every node.
        assert ok(cl.gnt("cluster", "command", "true")).stdout.count("return code = 0") == 3

        # A renewal that reaches every node finishes the change.
        ok(renew(cl, "--new-node-certificates"))
        ca = cl.paths.ca_cert.read_bytes()
        assert pem_certificates(ca) == [trusted[0]]
        for node in nodes:
            assert node.paths.ca_cert.read_bytes() == ca
            assert verify_signed_by(node.paths.server_pem.read_bytes(), ca)
        assert ok(cl.gnt("cluster", "command", "true")).stdout.count("return code = 0") == 3
        # node3 was stopped before config.data reached it; the master sends it again.
        wait_until(node3.paths.config_data.exists, timeout=60, what="config.data on node3")
        verify(cl, nodes)
