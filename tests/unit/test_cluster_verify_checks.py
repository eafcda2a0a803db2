"""The node's side of gnt-cluster verify (corral.node.verify_checks), run
in-process on a temporary node root, and the certificate judgement both
sides share (corral.crypto.cert_check)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from corral import storage_names as N
from corral.crypto import cert_check
from corral.crypto.certs import (
    create_cluster_crypto,
    make_ca,
    make_signed_cert,
    write_node_cert,
    write_pem,
)
from corral.disk_description import DiskDescription
from corral.node import verify_checks
from corral.node.context import NodeContext
from corral.node.handlers.info import node_verify
from corral.paths import Paths
from corral.rpc import node_verify as NV
from corral.rpc.wire import DiskWire

DAY = 24 * 3600


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    paths = Paths(tmp_path / "node")
    for directory in paths.cluster_dirs():
        directory.mkdir(parents=True, exist_ok=True)
    create_cluster_crypto(paths, "cluster.example.com", "node1.example.com", "127.0.0.1")
    return paths


@pytest.mark.parametrize(
    ("days_left", "level", "text"),
    [
        (-1, cert_check.ERROR, "Certificate is expired (valid from "),
        (3, cert_check.ERROR, "Certificate expires in about 2 days"),
        (20, cert_check.WARNING, "Certificate expires in about 19 days"),
    ],
)
def test_certificate_validity_as_ganeti_words_it(days_left: int, level: str, text: str) -> None:
    now = time.time()
    found = cert_check.validity_problem(now - 10 * DAY, now + days_left * DAY, now)
    assert found is not None and found[0] == level and found[1].startswith(text), found


def test_certificate_far_from_expiry_and_not_yet_valid() -> None:
    now = time.time()
    assert cert_check.validity_problem(now - DAY, now + 365 * DAY, now) is None
    found = cert_check.validity_problem(now + DAY, now + 365 * DAY, now)
    assert found is not None and found[0] == cert_check.WARNING
    assert found[1].startswith("Certificate not yet valid (valid from ")


def test_file_checksums_of_cluster_files_only(paths: Paths) -> None:
    paths.ssconf_file("cluster_name").write_text("c\n")
    sums = verify_checks.file_checksums(
        paths, ["/var/lib/ganeti/ssconf_cluster_name", "/var/lib/ganeti/ssconf_node_list"]
    )
    # An absent file has no checksum: the master reports it missing.
    assert sums == {"/var/lib/ganeti/ssconf_cluster_name": hashlib.sha1(b"c\n").hexdigest()}
    (paths.root / "etc").mkdir(exist_ok=True)
    (paths.root / "etc" / "shadow").write_text("secret")
    answer = verify_checks.run_checks(paths, {NV.FILELIST: ["/etc/shadow"]})
    assert NV.FILELIST not in answer
    assert answer[NV.FAILURES] == {NV.FILELIST: "/etc/shadow is not a cluster file"}


def test_node_setup_finds_a_certificate_of_another_ca(paths: Paths, tmp_path: Path) -> None:
    assert verify_checks.node_setup(paths, None) == []
    other = Paths(tmp_path / "other")
    other.data_dir.mkdir(parents=True)
    ca_cert, ca_key = make_ca("other.example.com", 30)
    write_node_cert(other, ca_cert, ca_key, "node1.example.com", "127.0.0.1")
    paths.server_pem.write_bytes(other.server_pem.read_bytes())
    assert verify_checks.node_setup(paths, None) == [
        [cert_check.ERROR, "Certificate /var/lib/ganeti/server.pem is not signed by the cluster CA"]
    ]


def test_node_setup_warns_of_a_certificate_expiring_soon(paths: Paths) -> None:
    ca_cert, ca_key = paths.ca_cert.read_bytes(), paths.ca_key.read_bytes()
    cert, key = make_signed_cert(ca_cert, ca_key, "node1.example.com", 20, server=True, client=True)
    write_pem(paths.server_pem, cert, key)
    found = verify_checks.node_setup(paths, None)
    assert found == [
        [
            cert_check.WARNING,
            "While verifying /var/lib/ganeti/server.pem: Certificate expires in about 19 days",
        ]
    ]


def disk(paths: Paths, name: str, size: int) -> DiskWire:
    path = f"/srv/ganeti/file-storage/inst1/{name}"
    return DiskDescription(N.DT_FILE, (N.FILE_DRIVERS[0], path), size, name).to_wire()


def test_disk_states(paths: Paths) -> None:
    directory = paths.file_storage_dir / "inst1"
    directory.mkdir(parents=True)
    (directory / "good").write_bytes(b"\0" * 1024 * 1024)
    (directory / "small").write_bytes(b"\0" * 1024)
    outside = DiskDescription(N.DT_FILE, (N.FILE_DRIVERS[0], "/etc/passwd"), 1, "x").to_wire()
    states = verify_checks.disk_status(
        paths, [disk(paths, "good", 1), disk(paths, "small", 1), disk(paths, "gone", 1), outside]
    )
    assert states[:3] == [
        [NV.DISK_OK, None],
        [NV.DISK_FAULTY, "disk small has 0 MiB, not 1 MiB"],
        [NV.DISK_MISSING, None],
    ]
    # A description naming a path outside the storage directories is refused.
    assert states[3][0] == NV.DISK_FAULTY
    assert "outside the file storage directory" in str(states[3][1])


async def test_node_verify_answers_what_is_asked(paths: Paths) -> None:
    ctx = NodeContext(paths=paths, address="127.0.0.1", port=0)
    answer = await node_verify(
        ctx, {NV.HYPERVISOR: ["fake"], NV.INSTANCELIST: ["fake"], "future": 1}, "node1"
    )
    assert answer[NV.HYPERVISOR] == {"fake": None}
    assert answer[NV.INSTANCELIST] == {"fake": [True, []]}
    assert answer[NV.FAILURES] == {} and "future" not in answer
