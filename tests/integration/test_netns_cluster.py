"""A cluster whose nodes each have a network stack of their own (network
namespaces joined by a bridge, addresses that exist only inside them):
nodes join, instances fail over and migrate, and disks move between them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import testbed
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.netns import NetnsBed
from tests.helpers.osdef import make_os

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    root: Path = tmp_path_factory.mktemp("netns")
    with NetnsBed(3) as network:
        running = testbed.up(root, nodes=3, network=network, init_args=PERMISSIVE_IPOLICY)
        try:
            for node in running.nodes:
                make_os(node.paths, "plain", variants=None)
            yield running
        finally:
            running.down()


def _ok(result: object) -> str:
    assert getattr(result, "returncode", None) == 0, result
    return str(getattr(result, "stdout", ""))


def _placement(bed: testbed.Testbed, name: str) -> tuple[str, str]:
    out = _ok(bed.gnt("instance", "list", "--no-headers", "-o", "pnode,status", name))
    pnode, status = out.split()
    return pnode, status


def test_nodes_joined_over_their_own_network(bed: testbed.Testbed) -> None:
    out = _ok(bed.gnt("node", "list", "--no-headers", "-o", "name,pip,offline"))
    listed = {tuple(line.split()) for line in out.splitlines()}
    assert listed == {(n.name, n.address, "N") for n in bed.nodes}
    # The addresses are the namespaces' own, not loopback ones.
    assert all(n.address.startswith("10.213.0.") for n in bed.nodes)
    verify = bed.gnt("cluster", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_failover_and_migrate_between_namespaces(bed: testbed.Testbed) -> None:
    node1, node2, node3 = (n.name for n in bed.nodes)
    _ok(
        bed.gnt(
            "instance", "add", "-t", "diskless", "-o", "plain", "--no-install",
            "--no-name-check", "--no-ip-check", "-n", node2, "nsinst",
        )
    )  # fmt: skip
    assert _placement(bed, "nsinst") == (node2, "running")
    _ok(bed.gnt("instance", "failover", "-f", "-n", node3, "nsinst"))
    assert _placement(bed, "nsinst") == (node3, "running")
    _ok(bed.gnt("instance", "migrate", "-f", "-n", node1, "nsinst"))
    assert _placement(bed, "nsinst") == (node1, "running")
    # The fake hypervisor's state moved with it: only node 1 runs it.
    states = [(n.paths.run_dir / "fake-hypervisor" / "nsinst").exists() for n in bed.nodes]
    assert states == [True, False, False]


def test_move_streams_a_disk_between_namespaces(bed: testbed.Testbed) -> None:
    _, node2, node3 = bed.nodes
    _ok(
        bed.gnt(
            "instance", "add", "-t", "file", "--disk", "0:size=8m", "-o", "plain",
            "--no-install", "--no-start", "--no-name-check", "--no-ip-check",
            "-n", node2.name, "nsfile",
        )
    )  # fmt: skip
    (disk,) = (node2.paths.file_storage_dir / "nsfile").iterdir()
    content = bytes(range(256)) * 4096  # 1 MiB that is not zeros
    with disk.open("r+b") as out:
        out.write(content)
    _ok(bed.gnt("instance", "move", "-f", "-n", node3.name, "nsfile"))
    assert _placement(bed, "nsfile") == (node3.name, "ADMIN_down")
    (moved,) = (node3.paths.file_storage_dir / "nsfile").iterdir()
    assert moved.read_bytes()[: len(content)] == content
    assert not (node2.paths.file_storage_dir / "nsfile").exists()
