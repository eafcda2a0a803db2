"""Mixed versions on node calls (corral.rpc.versions), with a real noded
started at another version: a node one step older or newer works with the
master, a call an older node lacks fails naming both versions, and versions
further apart are refused, by the node before the call runs, and by the
master for a node too old to refuse."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral.paths import Paths
from corral.process.daemons import start_daemon
from corral.rpc import versions
from corral.rpc.calls_node import node_info, upload_file, version
from corral.rpc.declare import Request
from tests.helpers.noded import Noded, daemon_env, free_port, make_node_root

MASTER = versions.Version("5.0.0", 5)
Start = Callable[..., Noded]

# Run noded with another version; ``drop`` names calls it does not have;
# ``blind``: it does not look at its callers' versions (as one from before them).
_NODED_AT = """
import runpy, sys
from corral.rpc import versions
release, calls, drop, blind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
versions.NODE_CALLS = calls
versions.OWN = versions.Version(release, calls)
if blind:
    versions.too_far = lambda master, node, name: None
from corral.node.handlers import HANDLERS
for name in filter(None, drop.split(",")):
    del HANDLERS[name]
sys.argv = [sys.argv[0], *sys.argv[5:]]
runpy.run_module("corral.daemons.noded", run_name="__main__")
"""


@pytest.fixture(autouse=True)
def master_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process (the master's side) at node calls 5."""
    monkeypatch.setattr(versions, "NODE_CALLS", MASTER.calls)
    monkeypatch.setattr(versions, "OWN", MASTER)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    started: list[Noded] = []

    def noded_at(at: versions.Version, drop: str = "", blind: bool = False) -> Noded:
        paths = make_node_root(tmp_path / f"node{len(started)}")
        port = free_port()
        argv = [sys.executable, "-c", _NODED_AT, at.release, str(at.calls), drop]
        argv += ["1" if blind else "0", "-b", "127.0.0.1", "-p", str(port)]
        start_daemon(argv, daemon_env(paths), timeout=30)
        started.append(Noded(paths, "127.0.0.1", port))
        return started[-1]

    try:
        yield noded_at
    finally:
        for node in started:
            node.stop()


def _upload(paths: Paths) -> tuple[Path, Request[None]]:
    data = base64.b64encode(b"node1\n").decode()
    name = "/var/lib/ganeti/ssconf_node_list"
    return paths.ssconf_file("node_list"), upload_file(name, data, 0o644, None, None, None, None)


async def test_a_node_one_step_older_answers_and_names_what_it_lacks(start: Start) -> None:
    node = start(versions.Version("4.2.0", 4), drop="node_info")
    async with node.client() as rpc:
        answered = await rpc.result(node.target, version())
        lacking = await rpc.result(node.target, node_info([]))
    assert not answered.failed, answered.fail_msg
    assert lacking.fail_msg == (
        "Node 127.0.0.1 runs Corral 4.2.0 (node calls 4), which cannot do node_info as the"
        " master running Corral 5.0.0 (node calls 5) asks (Unknown RPC call 'node_info');"
        " upgrade node 127.0.0.1"
    )


async def test_a_node_one_step_newer_answers(start: Start) -> None:
    node = start(versions.Version("6.0.0", 6))
    target, call = _upload(node.paths)
    async with node.client() as rpc:
        done = await rpc.result(node.target, call)
    assert not done.failed, done.fail_msg
    assert target.read_bytes() == b"node1\n"


async def test_a_node_two_steps_newer_refuses_before_the_call_runs(start: Start) -> None:
    node = start(versions.Version("7.0.0", 7))
    target, call = _upload(node.paths)
    async with node.client() as rpc:
        refused = await rpc.result(node.target, call)
    assert refused.fail_msg == (
        "Node 127.0.0.1 runs Corral 7.0.0 (node calls 7) and the master runs Corral 5.0.0"
        " (node calls 5): versions more than 1 apart do not work together; upgrade the"
        " master first"
    )
    assert not target.exists()
    log = (node.paths.log_dir / "corral-noded.log").read_text()
    assert "Refused upload_file from" in log


async def test_the_master_refuses_the_answer_of_a_node_too_old_to_refuse(
    start: Start,
) -> None:
    node = start(versions.Version("3.0.0", 3), blind=True)
    async with node.client() as rpc:
        refused = await rpc.result(node.target, version())
    assert refused.failed
    assert refused.fail_msg == (
        "Node 127.0.0.1 runs Corral 3.0.0 (node calls 3) and the master runs Corral 5.0.0"
        " (node calls 5): versions more than 1 apart do not work together; upgrade node"
        " 127.0.0.1 first"
    )
