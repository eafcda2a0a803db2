"""gnt-instance modify --new-primary, as Ganeti's: the configuration's change
alone, for an operator who moved the disks; refused while the instance runs,
and for a node the cluster does not know."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from corral.paths import Paths
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, disk_dir, failed, ok, rows
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded

pytestmark = pytest.mark.slow

NODE1, NODE2 = "node1.example.com", "node2.example.com"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestCluster, Noded]]:
    with cluster_with_nodes(tmp_path_factory.mktemp("newprimary"), (NODE2,)) as (cl, nodes):
        yield cl, nodes[0]


def running_on(root: Paths, name: str) -> bool:
    return (root.run_dir / "fake-hypervisor" / name).exists()


def test_new_primary_and_back(bed: tuple[TestCluster, Noded]) -> None:
    cl, node2 = bed
    ok(add(cl, "np1", "-t", "file", "--disk", "0:size=8m", "-o", "plain", "-n", NODE1))
    source = disk_dir(cl, "np1")
    contents = [p.read_bytes() for p in sorted(source.iterdir())]

    failed(cl.gnt("instance", "modify", f"--new-primary={NODE2}", "np1"),
           f"Instance is still running on {NODE1}")  # fmt: skip
    failed(cl.gnt("instance", "modify", "--new-primary=nosuch.example.com", "np1"), "nosuch")
    assert rows(cl, ["pnode"], "np1") == [[NODE1]]

    ok(cl.gnt("instance", "shutdown", "np1"))
    target = node2.paths.file_storage_dir / "np1"
    shutil.copytree(source, target)  # what the operator does (Ganeti's QA: scp -r)
    ok(cl.gnt("instance", "modify", f"--new-primary={NODE2}", "np1"))
    assert rows(cl, ["pnode"], "np1") == [[NODE2]]
    ok(cl.gnt("instance", "startup", "np1"))
    assert running_on(node2.paths, "np1") and not running_on(cl.paths, "np1")

    # And back: the copy on node2 goes, node1's disks are used again.
    ok(cl.gnt("instance", "shutdown", "np1"))
    shutil.rmtree(target)
    ok(cl.gnt("instance", "modify", f"--new-primary={NODE1}", "np1"))
    ok(cl.gnt("instance", "startup", "np1"))
    assert running_on(cl.paths, "np1")
    assert [p.read_bytes() for p in sorted(source.iterdir())] == contents
    ok(cl.gnt("instance", "remove", "-f", "np1"))


def test_diskless_instance(bed: tuple[TestCluster, Noded]) -> None:
    cl, _node2 = bed
    ok(add(cl, "np2", "-t", "diskless", "-o", "plain", "-n", NODE1, "--no-start"))
    ok(cl.gnt("instance", "modify", f"--new-primary={NODE1}", "np2"))
    assert rows(cl, ["pnode", "status"], "np2") == [[NODE1, "ADMIN_down"]]
    ok(cl.gnt("instance", "modify", f"--new-primary={NODE2}", "np2"))
    assert rows(cl, ["pnode"], "np2") == [[NODE2]]
    ok(cl.gnt("instance", "remove", "-f", "np2"))
