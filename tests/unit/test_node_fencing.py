"""The node's fence token keeper (corral.node.fencing) and the door of noded
that applies it to every call that changes the node (corral.node.dispatch),
through the real handlers in-process (corral.node.local)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path

import pytest

from corral import errors
from corral.node.fencing import FenceKeeper, StaleToken
from corral.node.local import LocalTransport
from corral.paths import Paths
from corral.rpc import calls
from corral.rpc.calls_instance import all_instances_info, instance_start
from corral.rpc.calls_membership import node_leave_cluster
from corral.rpc.calls_node import version
from corral.rpc.calls_storage import file_storage_list
from corral.rpc.client import RpcClient
from corral.rpc.declare import CHANGES, READS, RESCUES, Request
from corral.rpc.fencing import parse_until, until_value
from corral.rpc.result import MasterDeposed, NodeAddress
from corral.rpc.wire import InstanceWire
from tests.helpers.fence_windows import parse
from tests.helpers.noded import make_node_root

ADDRESS = "127.0.99.1"
NODE = NodeAddress("node1", ADDRESS)
INSTANCE: InstanceWire = {"name": "i1", "hypervisor": "fake", "memory": 1, "vcpus": 1}
CHANGE_LINE = "Fence token {} in force"


def stored(path: Path) -> int:
    return int(path.read_text())


# The keeper alone
async def test_an_older_token_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    keeper = FenceKeeper(path)
    await keeper.admit("instance_start", 5)
    before = path.stat()
    with pytest.raises(StaleToken) as refused:
        await keeper.admit("instance_start", 4)
    assert "carries fence token 4" in refused.value.message
    assert "newer master (token 5)" in refused.value.message
    assert stored(path) == 5 and path.stat().st_ino == before.st_ino


async def test_a_newer_token_is_written_before_its_call_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    keeper = FenceKeeper(path)
    await keeper.admit("blockdev_create", 5)
    assert stored(path) == 5
    await keeper.admit("blockdev_create", 7)
    assert stored(path) == 7 and keeper.newest == 7
    assert path.stat().st_mode & 0o777 == 0o600


async def test_the_token_in_force_costs_no_write(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    keeper = FenceKeeper(path)
    await keeper.admit("upload_file", 3)
    written = path.stat()
    for _ in range(100):
        await keeper.admit("upload_file", 3)
    # Every write is a new file renamed over the old one: the same inode, no write.
    assert path.stat().st_ino == written.st_ino and path.stat().st_mtime_ns == written.st_mtime_ns


async def test_the_token_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    await FenceKeeper(path).admit("instance_start", 9)
    restarted = FenceKeeper(path)  # a new noded on the same root
    assert restarted.newest is None  # read at the first call that needs it
    with pytest.raises(StaleToken):
        await restarted.admit("instance_start", 8)
    assert restarted.newest == 9
    await restarted.admit("instance_start", 9)


async def test_without_a_file_any_token_is_taken(tmp_path: Path) -> None:
    keeper = FenceKeeper(tmp_path / "fence-token")
    await keeper.admit("hooks_runner", 0)  # NO_FENCE: what a call without a token carries
    assert keeper.newest == 0 and not (tmp_path / "fence-token").exists()
    await keeper.admit("hooks_runner", 1)
    with pytest.raises(StaleToken):
        await keeper.admit("hooks_runner", 0)


async def test_concurrent_calls_are_taken_only_with_the_newest_token(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    keeper = FenceKeeper(path)
    tokens = [token for token in range(1, 41) for _ in range(5)]
    random.Random(25).shuffle(tokens)
    # In order: ("came", token) when a call reaches the keeper, ("taken", token,
    # the file's token then) when it may act, ("refused", token).
    events: list[tuple[str, int, int]] = []

    async def call(token: int, delay: int) -> None:
        for _ in range(delay):  # calls come while others wait and write
            await asyncio.sleep(0)
        events.append(("came", token, 0))
        try:
            await keeper.admit("instance_start", token)
        except StaleToken:
            events.append(("refused", token, 0))
        else:
            events.append(("taken", token, stored(path)))

    await asyncio.gather(*(call(token, i % 7) for i, token in enumerate(tokens)))
    newest_came = 0
    for kind, token, on_disk in events:
        if kind == "came":
            newest_came = max(newest_came, token)
        elif kind == "taken":
            # Written before it acts, and no newer token had come by then.
            assert token == on_disk == newest_came, (token, on_disk, newest_came)
    taken = [token for kind, token, _ in events if kind == "taken"]
    assert len(taken) + sum(kind == "refused" for kind, _, _ in events) == len(tokens)
    assert taken.count(40) == 5 and stored(path) == 40


async def test_one_log_line_per_token_change_and_one_per_window(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keeper = FenceKeeper(tmp_path / "fence-token")
    with caplog.at_level(logging.INFO, logger="corral.node.fencing"):
        before = time.time()
        for token in (4, 4, 4, 6, 6, 6, 6):
            await keeper.admit("upload_file", token)
        after = time.time()
        keeper.close_window()  # noded stops
        await FenceKeeper(tmp_path / "fence-token").admit("upload_file", 6)
    lines = [record.getMessage() for record in caplog.records]
    windows = parse("node1", lines).windows
    assert [line.split(" from ")[0] if "window" in line else line for line in lines] == [
        "Fence token 4 in force (was 0), first carried by upload_file: calls with an older"
        " one are refused from now on",
        "Fence token 4 window: 3 calls let in",
        "Fence token 6 in force (was 4), first carried by upload_file: calls with an older"
        " one are refused from now on",
        "Fence token 6 window: 4 calls let in",
        f"Fence token 6 in force (kept in {tmp_path / 'fence-token'})",
    ]
    assert [(w.token, w.calls) for w in windows] == [(4, 3), (6, 4)]
    first, second = windows
    assert before <= first.first <= first.last <= second.first <= second.last <= after


async def test_refusals_and_forgetting_close_no_window_twice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keeper = FenceKeeper(tmp_path / "fence-token")
    with caplog.at_level(logging.INFO, logger="corral.node.fencing"):
        await keeper.admit("instance_start", 5)
        with pytest.raises(StaleToken):
            await keeper.admit("instance_start", 3)
        keeper.forget()
        keeper.close_window()  # nothing let in since: no line
    found = parse("node1", [record.getMessage() for record in caplog.records])
    assert [(w.token, w.calls) for w in found.windows] == [(5, 1)]
    assert found.refused == {3: 1}


async def test_an_unreadable_token_refuses_every_change(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    path.write_text("garbage\n")
    keeper = FenceKeeper(path)
    with pytest.raises(errors.OpExecError, match="holds 'garbage\\\\n', not a number"):
        await keeper.admit("instance_start", 100)
    assert path.read_text() == "garbage\n"


async def test_forgetting_lets_a_new_cluster_count_anew(tmp_path: Path) -> None:
    path = tmp_path / "fence-token"
    keeper = FenceKeeper(path)
    await keeper.admit("instance_start", 12)
    keeper.forget()
    assert not path.exists()
    await keeper.admit("instance_start", 1)
    assert stored(path) == 1


# Every call is classified
def test_every_call_says_what_it_does_to_the_node() -> None:
    assert {call.effect for call in calls.CALLS.values()} == {READS, CHANGES, RESCUES}
    reads = {name for name, call in calls.CALLS.items() if call.effect is READS}
    # Queries answer a deposed master; what changes a node never does.
    assert {"version", "node_info", "all_instances_info", "node_verify"} <= reads
    # The one unfenced change: a masterless cluster's rescue, masterd's only.
    unfenced = {name for name, call in calls.CALLS.items() if not call.fenced}
    assert unfenced - reads == {"etcd_member_force_new"}
    assert calls.CALLS["etcd_member_force_new"].cluster_client_only
    assert not reads & {"instance_start", "blockdev_create", "upload_file", "run_command"}


# The door: noded's answer and the client's error
def node_with_transport(tmp_path: Path) -> tuple[LocalTransport, Paths]:
    transport = LocalTransport()
    paths = make_node_root(tmp_path / "node1")
    transport.add(paths, ADDRESS)
    return transport, paths


def client(transport: LocalTransport, fence: int) -> RpcClient:
    rpc = RpcClient(transport)
    rpc.fence = fence
    return rpc


def running(paths: Paths) -> list[str]:
    return sorted(p.name for p in (paths.run_dir / "fake-hypervisor").glob("*") if p.is_file())


async def test_a_deposed_master_changes_nothing_and_still_reads(tmp_path: Path) -> None:
    transport, paths = node_with_transport(tmp_path)
    new, old = client(transport, 8), client(transport, 7)
    await old.run(NODE, file_storage_list("file"))  # READS: carries no token
    await new.run(NODE, instance_start({**INSTANCE, "name": "i0"}, False))
    assert stored(paths.fence_token) == 8
    with pytest.raises(MasterDeposed) as refused:
        await old.run(NODE, instance_start(INSTANCE, False), "Could not start instance i1")
    assert refused.value.message.startswith(
        "Could not start instance i1: Refused instance_start: it carries fence token 7"
    )
    assert refused.value.node == "node1" and refused.value.call == "instance_start"
    # A refusal is no precondition that failed: an ecode does not turn it into one.
    with pytest.raises(MasterDeposed):
        await old.run(NODE, instance_start(INSTANCE, False), ecode="wrong_state")
    assert running(paths) == ["i0"]
    assert stored(paths.fence_token) == 8
    # Queries still answer the deposed master.
    assert await old.run(NODE, version()) > 0
    running_now = await old.run(NODE, all_instances_info(["fake"]))
    assert list(running_now) == ["i0"]


async def test_a_master_whose_lease_ended_sends_no_fenced_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A node its successor has not called yet would take the call: it is not sent.
    transport, paths = node_with_transport(tmp_path)
    rpc = client(transport, 7)
    rpc.fence_until = lambda: time.time() - 0.5
    with (
        caplog.at_level(logging.ERROR, logger="corral.rpc.client"),
        pytest.raises(MasterDeposed) as refused,
    ):
        await rpc.run(NODE, instance_start(INSTANCE, False), "Could not start instance i1")
    assert refused.value.message == (
        f"Could not start instance i1: RPC call instance_start to {ADDRESS} not made:"
        " this master daemon's lease (fence token 7) may have run out"
    )
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["Fenced call refused"]
    assert running(paths) == [] and not paths.fence_token.exists()
    # Queries carry no token: they are still made.
    assert await rpc.run(NODE, version()) > 0
    # Within the lease, the call goes, the lease's end with it.
    rpc.fence_until = lambda: time.time() + 30
    await rpc.run(NODE, instance_start(INSTANCE, False))
    assert running(paths) == ["i1"] and stored(paths.fence_token) == 7


async def test_a_call_that_comes_after_its_lease_ended_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Sent in time, held up in the network: its master may be deposed by now.
    path = tmp_path / "fence-token"
    keeper = FenceKeeper(path)
    with caplog.at_level(logging.INFO, logger="corral.node.fencing"):
        with pytest.raises(StaleToken) as refused:
            await keeper.admit("instance_start", 5, until=time.time() - 2)
        await keeper.admit("instance_start", 5, until=time.time() + 30)
        keeper.close_window()
    assert refused.value.message.startswith(
        "Refused instance_start: it carries fence token 5, whose lease ended 2.0"
    )
    assert stored(path) == 5  # written by the call in time only
    found = parse("node1", [record.getMessage() for record in caplog.records])
    assert found.refused == {5: 1} and [(w.token, w.calls) for w in found.windows] == [(5, 1)]


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf", ""])
def test_a_bad_until_header_is_refused(value: str) -> None:
    with pytest.raises(
        ValueError, match=r"Invalid X-Corral-Fence-Until header .*: a time expected"
    ):
        parse_until(value)


def test_the_until_header_round_trips() -> None:
    assert parse_until(None) is None
    assert parse_until(until_value(1795841712.4713581)) == 1795841712.471358


async def test_a_call_without_a_token_counts_as_no_master(tmp_path: Path) -> None:
    transport, paths = node_with_transport(tmp_path)
    unfenced = RpcClient(transport)  # fence NO_FENCE: a node no master called takes it
    await unfenced.run(NODE, instance_start(INSTANCE, False))
    await client(transport, 1).run(NODE, instance_start({**INSTANCE, "name": "i2"}, False))
    result = await unfenced.result(NODE, instance_start({**INSTANCE, "name": "i3"}, False))
    assert result.deposed and isinstance(result.error(), MasterDeposed)
    assert running(paths) == ["i1", "i2"]


async def test_a_malformed_call_records_no_token(tmp_path: Path) -> None:
    transport, paths = node_with_transport(tmp_path)
    await client(transport, 3).run(NODE, instance_start(INSTANCE, False))
    bad = Request(instance_start, [{"name": "i2"}, False])
    result = await client(transport, 30).result(NODE, bad)
    assert result.fail_msg is not None and "Invalid argument inst" in result.fail_msg
    assert not result.deposed and stored(paths.fence_token) == 3


async def test_leaving_the_cluster_forgets_the_token(tmp_path: Path) -> None:
    transport, paths = node_with_transport(tmp_path)
    node = transport.nodes[ADDRESS]
    await client(transport, 6).run(NODE, instance_start(INSTANCE, False))
    assert node.membership.fence.newest == 6
    await client(transport, 6).run(NODE, node_leave_cluster())
    assert not paths.fence_token.exists() and node.membership.fence.newest == 0
