"""Placement on a 5-node cluster: the built-in allocator (hail), external
iallocator scripts with Ganeti's protocol, and the primary node's checks.

Each node's fake hypervisor is given its own memory size (a file in the
node's root), so that the nodes, all on this machine, differ.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.config.manager import ConfigManager, ConfigTransaction
from corral.objects import Node
from corral.paths import Paths
from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import add, rows
from tests.helpers.multinode import add_node
from tests.helpers.noded import daemon_env
from tests.helpers.offline_config import change_offline

pytestmark = pytest.mark.slow

NAMES = [f"node{i}.example.com" for i in range(1, 6)]
# MiB of memory per node: only node5 can take a 4 GiB instance.
MEMORY = {"node1": 2048, "node2": 2048, "node3": 2048, "node4": 2048, "node5": 8192}
SMALL = ("-t", "diskless", "--no-install", "-B", "memory=1024")


def _set_memory(paths: Paths, mib: int) -> None:
    target = paths.conf_dir / "fake-hypervisor-memory"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(str(mib))


def _set_drained(cl: TestCluster, name: str) -> None:
    """Mark a node drained in the configuration (masterd restarted)."""
    stop_daemon(cl.paths, "corral-masterd")

    def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
        node = cfg.lookup(Node, name).copy_for_update()
        assert isinstance(node, Node)
        node.drained = True
        tx.update(node)

    change_offline(cl.paths, edit)
    start_daemon([sys.executable, "-m", "corral.daemons.masterd"], daemon_env(cl.paths))


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    tmp = tmp_path_factory.mktemp("alloc")
    with running_cluster(tmp) as cluster:
        _set_memory(cluster.paths, MEMORY["node1"])
        others = []
        try:
            for name in NAMES[1:]:
                noded = add_node(cluster, tmp / name.split(".")[0], name)
                others.append(noded)
                _set_memory(noded.paths, MEMORY[name.split(".")[0]])
            yield cluster
        finally:
            for noded in others:
                noded.stop()


def _primary(cl: TestCluster, name: str) -> str:
    [[pnode]] = rows(cl, ["pnode"], name)
    return pnode


def _failed(result: Result, *texts: str) -> None:
    assert result.rc != 0, result.stdout
    for text in texts:
        assert text in result.stderr + result.stdout, result.stderr


def _ok(result: Result) -> str:
    assert result.rc == 0, result.stderr
    return result.stdout + result.stderr


def _script(cl: TestCluster, name: str, body: str) -> Path:
    directory = cl.paths.iallocator_search_path[-1]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport json, shutil, sys\n{body}\n")
    path.chmod(0o755)
    return path


def test_hail_places_by_free_memory_and_refuses_when_nothing_fits(cl: TestCluster) -> None:
    out = _ok(add(cl, "big", "-t", "diskless", "--no-install", "-B", "memory=4096"))
    assert "Selected nodes for instance big via iallocator hail: node5.example.com" in out
    assert _primary(cl, "big") == "node5.example.com"
    before = rows(cl, ["name"])
    _failed(
        add(cl, "huge", "-t", "diskless", "--no-install", "-B", "memory=6000"),
        "Can't compute nodes using iallocator 'hail'",
        "Not enough memory (needed 6000 MiB, free 4096 MiB)",
    )
    assert rows(cl, ["name"]) == before
    # Four small ones: node5 is the fullest by share of memory, so one each on node1-4.
    for idx in range(4):
        _ok(add(cl, f"small{idx}", *SMALL))
    assert sorted(_primary(cl, f"small{idx}") for idx in range(4)) == NAMES[:4]


def test_drained_nodes_are_never_chosen_nor_accepted(cl: TestCluster) -> None:
    _set_drained(cl, "node5.example.com")
    # node5 alone has 2 GiB free; drained, nothing else fits.
    _failed(
        add(cl, "mid", "-t", "diskless", "--no-install", "-B", "memory=2048"),
        "Can't compute nodes using iallocator 'hail'",
        "node5.example.com: drained",
    )
    _failed(
        add(cl, "pinned", *SMALL, "-n", "node5.example.com"),
        "Cannot use drained primary node 'node5.example.com'",
    )
    _failed(add(cl, "both", *SMALL, "-n", "node1.example.com", "-I", "hail"), "Do not specify both")
    _failed(
        add(cl, "two", *SMALL, "-n", "node1.example.com:node2.example.com"),
        "give no secondary node",
    )


def test_external_script_gets_ganeti_input_and_its_answer_is_used(cl: TestCluster) -> None:
    record = cl.paths.root / "ialloc-input.json"
    _script(
        cl,
        "recorder",
        f"shutil.copy(sys.argv[1], {str(record)!r})\n"
        'print(json.dumps({"success": True, "info": "ok", "result": ["node3.example.com"]}))',
    )
    out = _ok(add(cl, "scripted", *SMALL, "--no-start", "-I", "recorder"))
    assert "via iallocator recorder: node3.example.com" in out
    assert _primary(cl, "scripted") == "node3.example.com"
    data = json.loads(record.read_text())
    assert data["version"] == 2 and data["cluster_name"] == cl.cluster_name
    request = data["request"]
    assert request["type"] == "allocate" and request["name"] == "scripted"
    assert request["memory"] == 1024 and request["required_nodes"] == 1
    assert sorted(data["nodes"]) == NAMES
    node5 = data["nodes"]["node5.example.com"]
    assert node5["drained"] is True and node5["total_memory"] == 8192
    assert data["nodes"]["node1.example.com"]["free_memory"] == 1024
    assert data["instances"]["big"]["nodes"] == ["node5.example.com"]
    group = data["nodes"]["node1.example.com"]["group"]
    assert data["nodegroups"][group]["alloc_policy"] == "preferred"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ('print("not json")', "Can't parse iallocator results"),
        ('print(json.dumps({"success": True, "info": ""}))', "missing key 'result'"),
        (
            'print(json.dumps({"success": True, "info": "", "result": "node3"}))',
            "iallocator returned invalid result",
        ),
        ('print(json.dumps({"success": False, "info": "full", "result": []}))', "'bad': full"),
        ("sys.exit(3)", "exited with status 3"),
        (
            'print(json.dumps({"success": True, "info": "", "result": ["nowhere"]}))',
            "chose node 'nowhere'",
        ),
    ],
)
def test_bad_script_answers_are_refused(cl: TestCluster, answer: str, message: str) -> None:
    _script(cl, "bad", answer)
    before = rows(cl, ["name"])
    _failed(add(cl, "badly", *SMALL, "--no-start", "-I", "bad"), message)
    assert rows(cl, ["name"]) == before


def test_cluster_default_iallocator(cl: TestCluster) -> None:
    _failed(
        cl.gnt("cluster", "modify", "--default-iallocator", "nosuch"),
        "Invalid default iallocator script 'nosuch' specified",
    )
    _script(
        cl,
        "to-node2",
        'print(json.dumps({"success": True, "info": "", "result": ["node2.example.com"]}))',
    )
    _ok(cl.gnt("cluster", "modify", "--default-iallocator", "to-node2"))
    try:
        out = _ok(add(cl, "defaulted", *SMALL, "--no-start"))
        assert "via iallocator to-node2: node2.example.com" in out
    finally:
        _ok(cl.gnt("cluster", "modify", "--default-iallocator", ""))
    _failed(
        add(cl, "unknown", *SMALL, "-I", "nosuch"),
        "iallocator module 'nosuch' not found in the search path",
    )
