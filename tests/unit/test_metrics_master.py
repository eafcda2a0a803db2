"""masterd's node and store metrics: the RPC client's and the config manager's
hooks feed them, nodes are named by the configuration, reachability comes
from the client's memory of failed nodes and the offline flag."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from corral.metrics.jobs import JobStats
from corral.metrics.master import MasterMetrics
from corral.objects import Instance, Node
from corral.objects.base import ConfigObject
from corral.rpc.reachability import Reachability


class _Config:
    serial = 1

    def __init__(self, nodes: list[Node]) -> None:
        self._nodes = nodes
        self.commit_timer: Callable[[float], None] = lambda seconds: None

    def changes_since(
        self, serial: int
    ) -> Sequence[tuple[Sequence[ConfigObject], Sequence[ConfigObject]]] | None:
        return []

    def instances(self) -> list[Instance]:
        return []

    def nodes(self) -> list[Node]:
        return self._nodes


class _Rpc:
    def __init__(self) -> None:
        self.call_timer: Callable[[str, float, str], None] = lambda node, seconds, outcome: None
        self.reachability = Reachability()


def _node(index: int) -> Node:
    ip = f"127.0.0.{index + 1}"
    return Node(name=f"node{index}", primary_ip=ip, secondary_ip=ip, group="g")


def test_node_calls_commits_and_reachability() -> None:
    n1, n2, n3 = (_node(k) for k in (1, 2, 3))
    n3.offline = True
    cfg, rpc = _Config([n1, n2, n3]), _Rpc()
    metrics = MasterMetrics(cfg, JobStats(), rpc)
    rpc.call_timer(n1.uuid, 0.002, "ok")
    rpc.call_timer(n2.uuid, 0.3, "unreachable")
    rpc.call_timer(n2.uuid, 0.01, "error")
    rpc.call_timer("gone-uuid", 0.01, "ok")  # a node no longer configured keeps its key
    rpc.reachability.failed(n2.uuid, n2.primary_ip, "refused")
    cfg.commit_timer(0.004)
    text = metrics.render()
    assert 'corral_node_call_seconds_count{node="node1"} 1' in text
    assert 'corral_node_call_seconds_bucket{node="node1",le="0.0025"} 1' in text
    assert 'corral_node_call_seconds_count{node="node2"} 2' in text
    assert 'corral_node_call_seconds_count{node="gone-uuid"} 1' in text
    assert 'corral_node_call_failures_total{node="node2",reason="unreachable"} 1' in text
    assert 'corral_node_call_failures_total{node="node2",reason="error"} 1' in text
    assert 'node="node1",reason=' not in text
    assert 'corral_node_reachable{node="node1"} 1' in text
    assert 'corral_node_reachable{node="node2"} 0' in text
    assert 'corral_node_reachable{node="node3"} 0' in text  # marked offline
    assert 'corral_store_commit_seconds_count{store="config"} 1' in text
    rpc.reachability.answered(n2.primary_ip)
    assert 'corral_node_reachable{node="node2"} 1' in metrics.render()
