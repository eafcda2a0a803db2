"""Queries on a 3-node cluster: only the needed nodes asked, one node unreachable.

Real daemons: masterd and three nodeds (each its own root and loopback
address).  The nodeds of node2 and node3 log every request (``-d``: aiohttp's
access log), which is how the tests count the calls a query made.  A node
whose noded is SIGSTOPped accepts connections (the kernel does) but never
answers: it is unreachable without being marked offline.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.fanout import FanoutBed
from tests.helpers.noded import Noded
from tests.helpers.waiting import wait_until

NODE2, NODE3 = "node2.example.com", "node3.example.com"
PLACEMENT = {"a1": "node1.example.com", "b1": NODE2, "b2": NODE2, "c1": NODE3}
# The calls that report running instances (all of a node's, or named ones).
LIVE_CALL = re.compile(r"POST /(all_)?instances_info ")


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[FanoutBed]:
    with running_cluster(tmp_path) as cl:
        bed = FanoutBed(cl)
        try:
            bed.add_nodes(tmp_path / "nodes", [NODE2, NODE3], "-d")
            bed.place(PLACEMENT)
            yield bed
        finally:
            bed.stop()


def live_calls(noded: Noded) -> int:
    """How many calls about running instances the node has served."""
    log = noded.paths.daemon_log("corral-noded")
    return len(LIVE_CALL.findall(log.read_text())) if log.exists() else 0


def statuses(cl: TestCluster, *args: str) -> dict[str, list[str]]:
    """instance → [status, memory] from ``gnt-instance list``."""
    out = cl.gnt("instance", "list", "--no-headers", "-o", "name,status,oper_ram", *args)
    assert out.rc == 0, out.stderr
    return {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}


def masterd_log(cl: TestCluster) -> str:
    return cl.paths.daemon_log("corral-masterd").read_text()


def test_queries_ask_only_the_nodes_they_need(bed: FanoutBed) -> None:
    cl, node2, node3 = bed.cl, bed.nodes[NODE2], bed.nodes[NODE3]

    def calls_become(expected: tuple[int, int]) -> None:
        # noded writes its access-log line once the answer is sent: poll for it.
        wait_until(lambda: (live_calls(node2), live_calls(node3)) == expected, what="calls")

    assert statuses(cl) == {name: ["running", "128M"] for name in PLACEMENT}
    wait_until(lambda: live_calls(node2) >= 1 and live_calls(node3) >= 1, what="first calls")
    before = live_calls(node2), live_calls(node3)

    # Named instances: only their primary node.
    assert statuses(cl, "b1", "b2") == {"b1": ["running", "128M"], "b2": ["running", "128M"]}
    calls_become((before[0] + 1, before[1]))
    # A filter on configuration fields: only the nodes of the instances it selects.
    assert statuses(cl, "-F", f'pnode == "{NODE3}"') == {"c1": ["running", "128M"]}
    calls_become((before[0] + 1, before[1] + 1))
    # Fields without live data: nobody.
    out = cl.gnt("instance", "list", "-o", "name,pnode,admin_state")
    assert out.rc == 0 and "c1" in out.stdout
    # A call it made would be logged by the time a further listing is answered.
    assert statuses(cl, "b1") == {"b1": ["running", "128M"]}
    calls_become((before[0] + 2, before[1] + 1))


@pytest.mark.slow
def test_unreachable_node_costs_one_deadline_then_is_skipped(bed: FanoutBed) -> None:
    cl, node3 = bed.cl, bed.nodes[NODE3]
    assert statuses(cl)["c1"] == ["running", "128M"]
    pid = node3.pid
    assert pid is not None
    skipped = re.compile(rf"Query did not ask node \S+ \({re.escape(node3.address)}\)")
    os.kill(pid, signal.SIGSTOP)
    try:
        # The first listing waits for node3 until the query's deadline, then
        # answers without its data; it is not marked offline.
        first = statuses(cl)
        assert first["c1"] == ["ERROR_nodedown", "?"]
        assert {first[n][0] for n in ("a1", "b1", "b2")} == {"running"}
        assert not skipped.search(masterd_log(cl))
        # The next one does not wait on it: masterd says it did not ask.
        assert statuses(cl) == first
        assert skipped.search(masterd_log(cl))
        nodes = cl.gnt("node", "list", "--no-headers", "-o", "name,mfree,offline")
        assert nodes.rc == 0, nodes.stderr
        row = next(line.split() for line in nodes.stdout.splitlines() if NODE3 in line)
        assert row[1:] == ["?", "N"]
    finally:
        os.kill(pid, signal.SIGCONT)
    # Back: a background probe (made while queries skip it) gets an answer, and
    # the next listings ask it again.
    wait_until(lambda: statuses(cl)["c1"] == ["running", "128M"], timeout=60, what="node3 back")
    assert f"({node3.address}) reachable again" in masterd_log(cl)
