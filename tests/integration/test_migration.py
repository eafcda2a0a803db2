"""gnt-instance migrate and failover between real nodes (three nodeds on
loopback addresses, the fake hypervisor's state moving between their roots):
the moves, their job logs and hooks, and the refusals that change nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.paths import Paths
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, failed, ok, rows
from tests.helpers.jobs import cluster_state
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded

NODE1, NODE2, NODE3 = "node1.example.com", "node2.example.com", "node3.example.com"


class Bed:
    """The cluster and its extra nodes, with each node's root by name."""

    def __init__(self, cl: TestCluster, extra: list[Noded]) -> None:
        self.cl = cl
        self.extra = extra
        self.roots: dict[str, Paths] = {NODE1: cl.paths, **{n.name: n.paths for n in extra}}


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("moves"), (NODE2, NODE3)) as (cl, extra):
        yield Bed(cl, extra)


def hv_state(paths: Paths, name: str) -> dict[str, Any] | None:
    """The fake hypervisor's state of ``name`` on the node rooted at ``paths``."""
    path = paths.run_dir / "fake-hypervisor" / name
    return json.loads(path.read_text()) if path.exists() else None


def where(bed: Bed, name: str) -> dict[str, str]:
    """node name → the instance's fake-hypervisor state there."""
    out = {}
    for node, paths in bed.roots.items():
        state = hv_state(paths, name)
        if state is not None:
            out[node] = state["state"]
    return out


def pnode(bed: Bed, name: str) -> str:
    return rows(bed.cl, ["pnode"], name)[0][0]


def new_instance(bed: Bed, name: str, *args: str, node: str = NODE1) -> None:
    ok(add(bed.cl, name, "-t", "diskless", "-o", "plain", "--no-install", "-n", node, *args))


def test_migrate_there_and_back(bed: Bed) -> None:
    new_instance(bed, "mig1")
    started = hv_state(bed.cl.paths, "mig1")
    assert started is not None and where(bed, "mig1") == {NODE1: "running"}
    out = ok(bed.cl.gnt("instance", "migrate", "-f", "-n", NODE2, "mig1"))
    for line in (
        "Migrating instance mig1",
        f"* preparing {NODE2} to accept the instance",
        f"* migrating instance to {NODE2}",
        "* memory transfer complete",
        "* done",
    ):
        assert line in out, out
    assert pnode(bed, "mig1") == NODE2
    assert where(bed, "mig1") == {NODE2: "running"}
    # Live: the same instance, still up since its start.
    moved = hv_state(bed.roots[NODE2], "mig1")
    assert moved is not None and moved["started"] == started["started"]
    assert rows(bed.cl, ["status"], "mig1") == [["running"]]
    ok(bed.cl.gnt("instance", "migrate", "-f", "--non-live", "-n", NODE1, "mig1"))
    assert pnode(bed, "mig1") == NODE1
    assert where(bed, "mig1") == {NODE1: "running"}
    ok(bed.cl.gnt("instance", "remove", "-f", "mig1"))


def test_migrate_without_target_asks_the_allocator(bed: Bed) -> None:
    new_instance(bed, "mig2")
    out = ok(bed.cl.gnt("instance", "migrate", "-f", "mig2"))
    assert "Selected nodes for instance mig2 via iallocator hail" in out, out
    target = pnode(bed, "mig2")
    assert target in (NODE2, NODE3)
    assert where(bed, "mig2") == {target: "running"}
    ok(bed.cl.gnt("instance", "remove", "-f", "mig2"))


def test_failover_running_and_stopped(bed: Bed) -> None:
    new_instance(bed, "fo1")
    out = ok(bed.cl.gnt("instance", "failover", "-f", "-n", NODE3, "fo1"))
    for line in (
        "Failover instance fo1",
        "* shutting down instance on source node",
        f"* starting the instance on the target node {NODE3}",
    ):
        assert line in out, out
    assert pnode(bed, "fo1") == NODE3
    assert where(bed, "fo1") == {NODE3: "running"}
    ok(bed.cl.gnt("instance", "shutdown", "fo1"))
    # Stopped: only the primary node changes; nothing is started.
    out = ok(bed.cl.gnt("instance", "failover", "-f", "-n", NODE2, "fo1"))
    assert "* not checking disk consistency as instance is not running" in out, out
    assert "starting the instance" not in out
    assert pnode(bed, "fo1") == NODE2
    assert where(bed, "fo1") == {}
    assert rows(bed.cl, ["admin_state"], "fo1") == [["down"]]
    ok(bed.cl.gnt("instance", "remove", "-f", "fo1"))


def test_migrate_stopped_instance(bed: Bed) -> None:
    new_instance(bed, "down1", "--no-start")
    before = cluster_state(bed.cl)
    failed(
        bed.cl.gnt("instance", "migrate", "-f", "-n", NODE2, "down1"),
        "Can't migrate, please use failover",
        "is not running",
    )
    assert cluster_state(bed.cl)["serial"] == before["serial"]
    # --allow-failover: a stopped instance fails over instead.
    out = ok(bed.cl.gnt("instance", "migrate", "-f", "--allow-failover", "-n", NODE2, "down1"))
    assert "switching to failover" in out, out
    assert pnode(bed, "down1") == NODE2
    ok(bed.cl.gnt("instance", "remove", "-f", "down1"))


def _refused(bed: Bed, args: tuple[str, ...], *texts: str) -> None:
    """The command fails with ``texts`` and the configuration stays as it was."""
    before = cluster_state(bed.cl)["serial"]
    failed(bed.cl.gnt("instance", *args), *texts)
    assert cluster_state(bed.cl)["serial"] == before


def test_refusals_change_nothing(bed: Bed, tmp_path: Path) -> None:
    new_instance(bed, "ref1")
    ok(bed.cl.gnt("instance", "add", "--no-name-check", "--no-ip-check", "-t", "file",
                  "--disk", "0:size=4m", "-o", "plain", "--no-install", "-n", NODE1,
                  "reffile"))  # fmt: skip
    _refused(bed, ("migrate", "-f", "-n", NODE2, "reffile"),
             "Instance's disk layout 'file' does not allow migrations")  # fmt: skip
    _refused(bed, ("failover", "-f", "-n", NODE2, "reffile"),
             "Instance's disk layout 'file' does not allow failovers")  # fmt: skip
    _refused(bed, ("migrate", "-f", "-n", NODE1, "ref1"), "to its primary")
    _refused(bed, ("migrate", "-f", "-n", "nosuch.example.com", "ref1"), "not known")
    _refused(bed, ("migrate", "-f", "-n", NODE2, "-I", "hail", "ref1"), "not both")
    for flag, text in (("--drained", "Can't use drained node"),
                       ("--offline", "Can't use offline node")):  # fmt: skip
        ok(bed.cl.gnt("node", "modify", "--force", flag, "yes", NODE2))
        try:
            _refused(bed, ("migrate", "-f", "-n", NODE2, "ref1"), text)
            _refused(bed, ("failover", "-f", "-n", NODE2, "ref1"), text)
        finally:
            ok(bed.cl.gnt("node", "modify", "--force", flag, "no", NODE2))
    assert where(bed, "ref1") == {NODE1: "running"}
    for name in ("ref1", "reffile"):
        ok(bed.cl.gnt("instance", "remove", "-f", name))


def test_target_without_memory_or_hypervisor(bed: Bed) -> None:
    new_instance(bed, "room1")
    target = bed.roots[NODE3]
    state_dir = target.run_dir / "fake-hypervisor"
    state_dir.mkdir(parents=True, exist_ok=True)
    hog = state_dir / "hog"
    hog.write_text(json.dumps({"name": "hog", "memory": 10**9, "vcpus": 1,
                               "state": "running", "started": 0.0}))  # fmt: skip
    try:
        _refused(bed, ("migrate", "-f", "-n", NODE3, "room1"), "Not enough memory on node")
        _refused(bed, ("failover", "-f", "-n", NODE3, "room1"), "Not enough memory on node")
    finally:
        hog.unlink()
    # The node cannot read the fake hypervisor's state: it cannot run it.
    moved = state_dir.with_name("fake-hypervisor.away")
    state_dir.rename(moved)
    state_dir.write_text("not a directory")
    try:
        _refused(bed, ("migrate", "-f", "-n", NODE3, "room1"),
                 f"Target node {NODE3} cannot run hypervisor 'fake'")  # fmt: skip
    finally:
        state_dir.unlink()
        moved.rename(state_dir)
    assert where(bed, "room1") == {NODE1: "running"}
    ok(bed.cl.gnt("instance", "remove", "-f", "room1"))


def _env_hook(bed: Bed, hpath: str, out: Path) -> None:
    for phase in ("pre", "post"):
        bed.cl.hook(hpath, phase, "50dump", f"#!/bin/sh\nenv > {out}.$GANETI_HOOKS_PHASE\n")


def _read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_hooks_environments(bed: Bed, tmp_path: Path) -> None:
    new_instance(bed, "hk1")
    _env_hook(bed, "instance-migrate", tmp_path / "migrate")
    _env_hook(bed, "instance-failover", tmp_path / "failover")
    try:
        ok(bed.cl.gnt("instance", "migrate", "-f", "-n", NODE2, "hk1"))
        ok(bed.cl.gnt("instance", "failover", "-f", "-n", NODE1, "hk1"))
    finally:
        for hpath in ("instance-migrate", "instance-failover"):
            for phase in ("pre", "post"):
                (bed.cl.paths.hooks_dir / f"{hpath}-{phase}.d" / "50dump").unlink()
    pre = _read_env(tmp_path / "migrate.pre")
    assert pre["GANETI_OP_CODE"] == "OP_INSTANCE_MIGRATE"
    assert pre["GANETI_OLD_PRIMARY"] == NODE1 and pre["GANETI_NEW_PRIMARY"] == NODE2
    assert pre["GANETI_MIGRATE_LIVE"] == "True" and pre["GANETI_MIGRATE_CLEANUP"] == "False"
    assert pre["GANETI_ALLOW_RUNTIME_CHANGES"] == "True"
    assert pre["GANETI_OLD_SECONDARY"] == "" and pre["GANETI_NEW_SECONDARY"] == ""
    assert pre["GANETI_INSTANCE_PRIMARY"] == NODE1
    post = _read_env(tmp_path / "migrate.post")
    # As Ganeti, the post phase rebuilds the variables from the moved instance.
    assert post["GANETI_POST_INSTANCE_PRIMARY"] == NODE2
    assert post["GANETI_OLD_PRIMARY"] == NODE1
    pre = _read_env(tmp_path / "failover.pre")
    assert pre["GANETI_OP_CODE"] == "OP_INSTANCE_FAILOVER"
    assert pre["GANETI_OLD_PRIMARY"] == NODE2 and pre["GANETI_NEW_PRIMARY"] == NODE1
    assert pre["GANETI_IGNORE_CONSISTENCY"] == "False"
    assert pre["GANETI_SHUTDOWN_TIMEOUT"] == "120"
    assert pre["GANETI_FAILOVER_CLEANUP"] == "False"
    ok(bed.cl.gnt("instance", "remove", "-f", "hk1"))
