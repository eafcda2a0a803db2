"""Fenced node calls on a real cluster: once a new master has called a node,
the deposed masterd's calls that change it are refused (its reads still
answer), and the node keeps the newest token across a restart, kill -9
included (corral.rpc.fencing, corral.node.fencing)."""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.cli import noded_client
from corral.process.daemons import start_daemon, stop_daemon
from corral.rpc.calls_instance import all_instances_info, instance_shutdown, instance_start
from corral.rpc.calls_membership import write_ssconf_files
from corral.rpc.fencing import FENCE_HEADER
from corral.rpc.https import https_client
from corral.rpc.result import MasterDeposed, NodeAddress
from corral.rpc.wire import InstanceWire
from corral.state.ports import NO_FENCE
from tests.helpers.cluster import TestCluster, new_root
from tests.helpers.crash import kill_9
from tests.helpers.fencing import master_token, take_over, token_changes
from tests.helpers.instances import add, fake_state, ok, rows
from tests.helpers.noded import daemon_env, noded_cmd
from tests.helpers.osdef import make_os

NODED = "corral-noded"
# The deposed masterd must not find out by itself during the test (a renewal
# would fail and stop it): its lease is long.
MASTERD_ARGS = 'MASTERD_ARGS="--lease-ttl 3600"\n'
DEPOSED = "this node has taken calls of a newer master"

pytestmark = pytest.mark.slow


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[TestCluster]:
    cluster = new_root(tmp_path)
    cluster.paths.daemon_defaults.parent.mkdir(parents=True, exist_ok=True)
    cluster.paths.daemon_defaults.write_text(MASTERD_ARGS)
    try:
        ok(cluster.init())
        make_os(cluster.paths, "plain", variants=None)
        yield cluster
    finally:
        cluster.stop()


def node_token(cl: TestCluster) -> int:
    return int(cl.paths.fence_token.read_text())


def noded_log(cl: TestCluster) -> str:
    return cl.paths.daemon_log(NODED).read_text()


async def new_master_calls(cl: TestCluster, token: int) -> None:
    """What a new master does first on a node: a call that changes it, with its token."""
    async with https_client(cl.paths, cl.port) as rpc:
        rpc.fence = token
        await rpc.run(NodeAddress("node1", cl.node_ip), write_ssconf_files({}))


def test_a_deposed_master_changes_nothing_on_a_node(cl: TestCluster) -> None:
    ok(add(cl, "inst1", "-t", "diskless", "-o", "plain", "--no-start"))
    ok(cl.gnt("instance", "startup", "inst1"))
    ok(cl.gnt("instance", "shutdown", "inst1"))
    old = master_token(cl.paths)
    assert node_token(cl) == old  # masterd's calls carried its lease's token
    new = asyncio.run(take_over(cl.paths)).token
    assert new == old + 1
    asyncio.run(new_master_calls(cl, new))
    assert node_token(cl) == new

    # The deposed masterd still answers queries from the node...
    assert rows(cl, ["status", "oper_state"], "inst1") == [["ADMIN_down", "N"]]
    # ...but changes nothing there: its job fails saying so.
    result = cl.gnt("instance", "startup", "inst1")
    assert result.rc != 0 and DEPOSED in result.stderr, result.stderr
    assert f"carries fence token {old}" in result.stderr
    assert fake_state(cl, "inst1") is None
    assert rows(cl, ["status", "oper_state"], "inst1") == [["ADMIN_down", "N"]]
    # gnt-cluster command acts for the masterd that names the nodes: refused too.
    command = cl.gnt("cluster", "command", "touch", str(cl.paths.root / "touched"))
    assert DEPOSED in command.stdout and "return code = 255" in command.stdout
    assert not (cl.paths.root / "touched").exists()
    assert node_token(cl) == new
    # The node's log: one line per token change, the windows one after the other.
    changes = token_changes(noded_log(cl))
    assert changes[-1] == (old, new)
    assert all(was < token for was, token in changes)
    assert [token for _, token in changes] == sorted({token for _, token in changes})


async def old_and_new_calls(cl: TestCluster, old: int, new: int) -> None:
    """The old master's start is refused, its query answers; the new master's start runs."""
    target = NodeAddress("node1", cl.node_ip)
    inst: InstanceWire = {"name": "inst2", "hypervisor": "fake", "memory": 1, "vcpus": 1}
    async with https_client(cl.paths, cl.port) as rpc:
        rpc.fence = old
        with pytest.raises(MasterDeposed):
            await rpc.run(target, instance_start(inst, False))
        assert await rpc.run(target, all_instances_info(["fake"])) == {}
        rpc.fence = new
        await rpc.run(target, instance_start(inst, False))
        running = await rpc.run(target, all_instances_info(["fake"]))
        assert list(running) == ["inst2"]
        await rpc.run(target, instance_shutdown("fake", "inst2", 10))


def test_the_newest_token_survives_a_noded_restart_and_kill_9(cl: TestCluster) -> None:
    old = master_token(cl.paths)
    new = asyncio.run(take_over(cl.paths)).token
    asyncio.run(new_master_calls(cl, new))
    for kill in (False, True):
        if kill:
            kill_9(cl.paths.pid_file(NODED))
        else:
            assert stop_daemon(cl.paths, NODED)
        start_daemon(noded_cmd(cl.node_ip, cl.port), daemon_env(cl.paths), timeout=30)
        asyncio.run(old_and_new_calls(cl, old, new))
    # Read again at each start, written once and never left (the running
    # masterd may have called the node first: it brings the master IP up).
    log = noded_log(cl)
    assert log.count(f"Fence token {new} in force (kept in {cl.paths.fence_token})") == 2
    changes = token_changes(log)
    assert [change for change in changes if new in change] == [(changes[-1][0], new)]
    assert changes[-1][0] in (NO_FENCE, old)


def raw_call(cl: TestCluster, token: str) -> tuple[int, str]:
    """A call that changes the node with ``token`` as its header, as it is."""
    conn = http.client.HTTPSConnection(
        cl.node_ip, cl.port, timeout=30, context=noded_client.tls_context(str(cl.paths.root))
    )
    try:
        conn.request("POST", "/write_ssconf_files", body=b"[{}]", headers={FENCE_HEADER: token})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_a_malformed_token_is_refused(cl: TestCluster) -> None:
    token = master_token(cl.paths)
    assert raw_call(cl, str(token)) == (200, "[true, null]")
    for bad in ("-1", "1.5", "x", str(1 << 63)):
        status, body = raw_call(cl, bad)
        assert status == 400 and f"Invalid {FENCE_HEADER} header" in body, (bad, body)
    assert node_token(cl) == token
