"""Everything masterd exposes in Prometheus's text format (``CorralMetrics``).

Every number is kept as its events happen: the job counts and durations by
the queue's list index, commit times by the journal and the config
manager, node calls by the RPC client (through the hooks set here).  A
scrape renders them; what comes from the configuration (instances, disks,
nodes) is counted from the commits since the last scrape.

Metrics (labels in braces):

- ``corral_jobs{op_id,status}``, ``corral_jobs_by_status{status}``: unarchived jobs
- ``corral_job_queue_depth``: queued and waiting jobs
- ``corral_job_duration_seconds{op_id}``: histogram, submission to end
- ``corral_store_commit_seconds{store}``: histogram, store ``config`` or ``jobs``
- ``corral_node_call_seconds{node}``: histogram of node calls made
- ``corral_node_call_failures_total{node,reason}``: ``error`` (the node answered
  a failure) or ``unreachable`` (no answer)
- ``corral_node_reachable{node}``: 0 for a node marked offline or remembered as
  unreachable (a call failed lately), else 1
- ``corral_instances{admin_state}``, ``corral_mirrored_disks{sync_state}``
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from corral.metrics.instances import ConfigView, InstanceStates
from corral.metrics.jobs import JobStats
from corral.metrics.registry import LATENCY_BUCKETS, Counter, Gauge, Histogram, Metric, render
from corral.objects import Node


class Config(ConfigView, Protocol):
    """The config manager, with its commit hook."""

    commit_timer: Callable[[float], None]


class Reachability(Protocol):
    """The RPC client's memory of unreachable nodes."""

    def down(self, address: str) -> object:
        """Something (not None) if the node at ``address`` failed lately."""
        ...


class Rpc(Protocol):
    """The RPC client (``corral.rpc.client``), with its call hook."""

    call_timer: Callable[[str, float, str], None]

    @property
    def reachability(self) -> Reachability: ...


class MasterMetrics:
    """masterd's metrics, over its config manager, job queue and RPC client."""

    def __init__(self, cfg: Config, jobs: JobStats, rpc: Rpc) -> None:
        self._cfg, self._jobs, self._rpc = cfg, jobs, rpc
        self.node_calls = Histogram(
            "corral_node_call_seconds",
            "Time of a call to a node's daemon, answered or not",
            ("node",),
            LATENCY_BUCKETS,
        )
        self.node_failures = Counter(
            "corral_node_call_failures_total",
            "Node calls that failed: error (the node answered a failure) or"
            " unreachable (no answer)",
            ("node", "reason"),
        )
        self._instances = InstanceStates()
        cfg.commit_timer = lambda seconds: jobs.commits.observe(seconds, "config")
        rpc.call_timer = self._call_made

    def _call_made(self, node: str, seconds: float, outcome: str) -> None:
        self.node_calls.observe(seconds, node)
        if outcome != "ok":
            self.node_failures.inc(1, node, outcome)

    def render(self) -> str:
        """The exposition text of every metric, as of now."""
        nodes = self._cfg.nodes()
        names = {node.uuid: node.name for node in nodes}
        metrics: list[Metric] = [
            *self._jobs.metrics(),
            _by_name(self.node_calls, names),
            _by_name(self.node_failures, names),
            self._reachable(nodes),
            *self._instances.metrics(self._cfg),
        ]
        return render(metrics)

    def _reachable(self, nodes: list[Node]) -> Gauge:
        reachable = Gauge(
            "corral_node_reachable",
            "1 if the node is not marked offline and did not fail a call lately, else 0",
            ("node",),
        )
        memory = self._rpc.reachability
        for node in nodes:
            down = node.offline or memory.down(node.primary_ip) is not None
            reachable.set(0 if down else 1, node.name)
        return reachable


def _by_name(metric: Histogram | Counter, names: dict[str, str]) -> Metric:
    """``metric`` with its first label (a node uuid) as the node's name
    (a node no longer in the configuration keeps its uuid)."""
    if isinstance(metric, Histogram):
        named = Histogram(metric.name, metric.help, metric.labels, metric.bounds)
        for labels, series in metric.series.items():
            named.series[(names.get(labels[0], labels[0]), *labels[1:])] = series
        return named
    counter = Counter(metric.name, metric.help, metric.labels)
    for labels, value in metric.values.items():
        counter.values[(names.get(labels[0], labels[0]), *labels[1:])] = value
    return counter
