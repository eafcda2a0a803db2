"""The memory of unreachable nodes, the query deadline, and the RPC client
obeying both against a real socket that accepts connections but never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.rpc import reachability as R
from corral.rpc.calls_node import version
from corral.rpc.client import CONNECT_TIMEOUT
from corral.rpc.https import https_client
from corral.rpc.reachability import Reachability, current_deadline, query_deadline
from corral.rpc.result import NodeAddress
from tests.helpers.noded import make_node_root


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_failure_is_remembered_for_a_while_after_the_last_one() -> None:
    clock = Clock()
    memory = Reachability(30.0, clock)
    memory.failed("node3", "127.0.0.3", "Connection refused")
    down = memory.down("127.0.0.3")
    assert down is not None and down.reason == "Connection refused"
    assert "unreachable since" in down.describe()
    clock.now += 20
    memory.failed("node3", "127.0.0.3", "timed out")  # renews the memory
    clock.now += 20
    down = memory.down("127.0.0.3")
    assert down is not None and down.reason == "timed out"
    clock.now += 10
    assert memory.down("127.0.0.3") is None
    assert memory.down("127.0.0.4") is None


def test_an_answer_forgets_the_failure() -> None:
    memory = Reachability(30.0, Clock())
    memory.failed("node3", "127.0.0.3", "Connection refused")
    memory.answered("127.0.0.3")
    assert memory.down("127.0.0.3") is None
    memory.answered("127.0.0.3")  # nothing remembered: nothing to do


def test_a_probe_is_due_only_a_while_after_the_last_failure() -> None:
    clock = Clock()
    memory = Reachability(30.0, clock)
    assert not memory.probe_due("127.0.0.3")
    memory.failed("node3", "127.0.0.3", "Connection refused")
    assert not memory.probe_due("127.0.0.3")
    clock.now += R.PROBE_INTERVAL
    assert memory.probe_due("127.0.0.3")


def test_query_deadline_is_scoped_and_an_earlier_one_stays() -> None:
    assert current_deadline() is None
    with query_deadline(5.0) as outer:
        assert current_deadline() == outer
        with query_deadline(60.0) as inner:
            assert inner == outer
        with query_deadline(0.5) as inner:
            assert inner < outer and current_deadline() == inner
        assert current_deadline() == outer
    assert current_deadline() is None


class SilentNode:
    """A TCP listener that accepts connections and never says a word (as a
    stopped noded: the kernel completes the handshake, nobody speaks TLS)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentNode]:
    node = SilentNode()
    try:
        yield node
    finally:
        node.close()


async def test_client_skips_a_remembered_node_in_queries_only(
    tmp_path: Path, silent: SilentNode
) -> None:
    paths = make_node_root(tmp_path / "root")
    target = NodeAddress("node3", "127.0.0.1")
    async with https_client(paths, silent.port, query_deadline=0.3) as rpc:
        with query_deadline(0.3):
            first = await rpc.result(target, version())
        assert first.failed
        assert len(silent.accepted) == 1
        down = rpc.reachability.down("127.0.0.1")
        assert down is not None and down.node == "node3"

        # A query does not ask it again (no new connection) and says why.
        with query_deadline(0.3):
            skipped = await rpc.results([target], version())
        assert skipped["node3"].offline
        assert "not asked: unreachable since" in str(skipped["node3"].fail_msg)
        assert len(silent.accepted) == 1

        # A logical unit still tries it.
        tried = await rpc.result(target, version(), timeout=0.3)
        assert tried.failed and len(silent.accepted) == 2


async def test_query_calls_end_at_the_deadline_not_at_their_timeout(
    tmp_path: Path, silent: SilentNode
) -> None:
    paths = make_node_root(tmp_path / "root")
    async with https_client(paths, silent.port) as rpc:
        with query_deadline(0.2):
            start = time.monotonic()
            result = await rpc.result(NodeAddress("node3", "127.0.0.1"), version())
            elapsed = time.monotonic() - start
            late = await rpc.result(NodeAddress("node4", "127.0.0.2"), version())
    # The bound the issue asks for, generously: without the deadline the call
    # would wait for the connect timeout (10 s), version's own timeout is 60 s.
    assert result.failed and elapsed < CONNECT_TIMEOUT / 2
    # The deadline has passed: the next node is not even tried.
    assert late.failed and "deadline passed" in str(late.fail_msg)


def test_masterd_takes_the_deadline_and_memory_as_options() -> None:
    from corral.daemons.masterd import parse_args

    defaults = parse_args([])
    assert (defaults.query_deadline, defaults.unreachable_memory) == (
        R.DEFAULT_QUERY_DEADLINE,
        R.DEFAULT_MEMORY,
    )
    opts = parse_args(["--query-deadline", "0.5", "--unreachable-memory", "10"])
    assert (opts.query_deadline, opts.unreachable_memory) == (0.5, 10.0)
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit) as exc:
            parse_args(["--query-deadline", bad])
        assert exc.value.code == 2
