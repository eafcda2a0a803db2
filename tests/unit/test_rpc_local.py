"""The in-process transport: the real node handlers on per-node roots, the
client's failure handling (unreachable nodes, timeouts) as over HTTPS."""

from __future__ import annotations

from pathlib import Path

from corral import constants as C
from corral.disk_description import DiskDescription
from corral.node import join_protocol as J
from corral.node.local import LocalTransport
from corral.paths import Paths
from corral.rpc import calls_node
from corral.rpc.calls_node import node_info, version
from corral.rpc.calls_storage import blockdev_create, file_storage_list
from corral.rpc.client import RpcClient
from corral.rpc.reachability import query_deadline
from corral.rpc.result import NodeAddress
from corral.rpc.wire import DiskWire
from tests.helpers.noded import make_node_root

ADDRESS = "127.0.99.1"
NODE = NodeAddress("node1", ADDRESS)


def transport_with_node(tmp_path: Path) -> tuple[LocalTransport, Paths]:
    transport = LocalTransport()
    paths = make_node_root(tmp_path / "node1")
    transport.add(paths, ADDRESS)
    return transport, paths


async def test_calls_run_the_node_handlers_on_the_nodes_root(tmp_path: Path) -> None:
    transport, paths = transport_with_node(tmp_path)
    async with RpcClient(transport) as rpc:
        answer = await rpc.result(NODE, version())
        info = await rpc.result(NODE, node_info([["file", "/srv/ganeti/file-storage"]]))
        unknown = await rpc.result(NODE, file_storage_list("diskless"))
    assert answer.payload == C.PROTOCOL_VERSION
    assert info.payload["storage"][0]["path"] == "/srv/ganeti/file-storage"
    # The handler's own refusal, as noded sends it.
    assert unknown.fail_msg == "Disk template 'diskless' keeps no files"
    assert paths.file_storage_dir.is_dir()


async def test_an_unreachable_node_fails_as_a_refused_connection(tmp_path: Path) -> None:
    transport, _ = transport_with_node(tmp_path)
    transport.nodes[ADDRESS].reachable = False
    async with RpcClient(transport) as rpc:
        result = await rpc.result(NODE, version())
        assert result.offline
        assert result.fail_msg == f"Cannot connect to {ADDRESS}: Connection refused"
        # Remembered: a query does not ask it again.
        assert rpc.reachability.down(ADDRESS) is not None
        with query_deadline(1.0):
            skipped = await rpc.result(NODE, version())
        assert skipped.offline and "not asked: unreachable since" in str(skipped.fail_msg)
        # Back: a logical unit's call reaches it and forgets the failure.
        transport.nodes[ADDRESS].reachable = True
        assert (await rpc.result(NODE, version())).payload
        assert rpc.reachability.down(ADDRESS) is None


async def test_the_calls_timeout_holds(tmp_path: Path) -> None:
    transport, _ = transport_with_node(tmp_path)
    async with RpcClient(transport) as rpc:
        late = await rpc.result(NODE, calls_node.test_delay(5), timeout=0.05)
    assert late.failed and not late.offline
    assert late.fail_msg == f"RPC call test_delay to {ADDRESS} timed out after 0.05 s"


async def test_a_node_waiting_to_join_answers_only_that(tmp_path: Path) -> None:
    transport = LocalTransport()
    transport.add(Paths(tmp_path / "joining"), ADDRESS)
    async with RpcClient(transport) as rpc:
        result = await rpc.result(NODE, version())
    assert result.fail_msg == J.NOT_IN_CLUSTER and not result.offline


def _disk(name: str) -> DiskWire:
    return DiskDescription(
        "file", ("loop", f"/srv/ganeti/file-storage/i1/{name}"), 1, name
    ).to_wire()


async def test_a_node_goes_down_at_the_call_it_is_told(tmp_path: Path) -> None:
    transport, paths = transport_with_node(tmp_path)
    node = transport.nodes[ADDRESS]
    first, second = _disk("d0"), _disk("d1")
    made = [paths.from_wire(disk["logical_id"][1]).exists for disk in (first, second)]
    refused = f"Cannot connect to {ADDRESS}: Connection refused"
    async with RpcClient(transport) as rpc:
        # Before the call: the node did nothing, and answers nothing after.
        node.go_down_at(blockdev_create)
        assert (await rpc.result(NODE, blockdev_create(first))).fail_msg == refused
        assert (await rpc.result(NODE, version())).fail_msg == refused
        assert not made[0]()
        # After the call (the 2nd from now): the node did it, its answer is lost.
        node.reachable = True
        node.go_down_at(blockdev_create, nth=2, ran=True)
        assert not (await rpc.result(NODE, blockdev_create(first))).failed
        assert (await rpc.result(NODE, blockdev_create(second))).fail_msg == refused
        assert made[0]() and made[1]()
        assert (await rpc.result(NODE, version())).fail_msg == refused
