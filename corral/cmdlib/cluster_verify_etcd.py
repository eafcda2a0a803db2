"""``gnt-cluster verify`` of the etcd members, while the cluster runs them
(Corral's own checks and codes: ECLUSTERETCD for the cluster's store,
ENODEETCD for one node's member).

The store's health comes as one snapshot (:mod:`corral.state.etcd.health`):
the members, the learners and the leader are noted; errors are a store
without a leader or without any member answering, an even number of
voters, a master candidate without a member, a member on no candidate, a
member that does not answer or raises an alarm, and the membership
service's last failed step (a warning: it tries again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from corral.objects import Node
from corral.state.etcd.health import EtcdHealth
from corral.state.etcd.members import Candidate, EtcdMemberInfo

# report(ecode, item type, item, text, warning)
Report = Callable[[str, str, str | None, str, bool], None]
CLUSTER, NODE = "ECLUSTERETCD", "ENODEETCD"


def verify_etcd(
    report: Report,
    feedback: Callable[[str], None],
    nodes: Sequence[Node],
    health: EtcdHealth,
    service_failure: str | None = None,
) -> None:
    """Judge ``health`` against the master candidates among ``nodes``."""
    if service_failure is not None:
        text = f"the etcd membership service's last step failed (it tries again): {service_failure}"
        report(CLUSTER, "cluster", None, text, True)
    if health.error is not None:
        report(CLUSTER, "cluster", None, f"no etcd member answers: {health.error}", False)
        return
    by_peer = {Candidate(n.name, n.uuid, n.primary_ip).peer_url: n for n in nodes}

    def node_of(member: EtcdMemberInfo) -> Node | None:
        return next((by_peer[u] for u in member.peer_urls if u in by_peer), None)

    def label(member: EtcdMemberInfo) -> str:
        node = node_of(member)
        return node.name if node is not None else member.name or ", ".join(member.peer_urls)

    names = {h.member.id: label(h.member) for h in health.members}
    leaders = health.leaders()
    leader = names.get(next(iter(leaders)), "unknown") if len(leaders) == 1 else "none"
    voters = ", ".join(label(m) for m in health.voters) or "none"
    learners = ", ".join(label(m) for m in health.learners) or "none"
    feedback(f"  - NOTICE: etcd voters: {voters}; learners: {learners}; leader: {leader}")
    for one in health.members:
        node = node_of(one.member)
        if node is None or not node.master_candidate or node.offline:
            text = f"etcd member {label(one.member)} is on no master candidate"
            report(CLUSTER, "cluster", None, text, False)
        item = node.name if node is not None else label(one.member)
        if one.error is not None:
            report(NODE, "node", item, f"etcd member does not answer: {one.error}", False)
        for alarm in one.alarms:
            report(NODE, "node", item, f"etcd member reports: {alarm}", False)
    with_member = {n.uuid for h in health.members if (n := node_of(h.member)) is not None}
    for node in nodes:
        if node.master_candidate and not node.offline and node.uuid not in with_member:
            report(NODE, "node", node.name, "master candidate without an etcd member", False)
    if not leaders:
        report(CLUSTER, "cluster", None, "etcd has no leader", False)
    elif len(leaders) > 1:
        named = ", ".join(sorted(names.get(x, x) for x in leaders))
        report(CLUSTER, "cluster", None, f"etcd members name different leaders: {named}", False)
    if len(health.voters) % 2 == 0:
        text = (
            f"etcd has {len(health.voters)} voters, an even number: it survives no more"
            " failures than one voter fewer"
        )
        report(CLUSTER, "cluster", None, text, False)
