"""``gnt-cluster verify``'s judgement of the etcd members' health
(:mod:`corral.cmdlib.cluster_verify_etcd`), on snapshots as
:mod:`corral.state.etcd.health` gathers them from etcd's answers."""

from __future__ import annotations

from typing import Any

from corral.cmdlib.cluster_verify_etcd import verify_etcd
from corral.objects import Node
from corral.state.etcd.health import EtcdHealth, MemberHealth
from corral.state.etcd.members import Candidate, EtcdMemberInfo

IPS = {"n1": "127.0.98.1", "n2": "127.0.98.2", "n3": "127.0.98.3", "n4": "127.0.98.4"}


def nodes(candidates: str = "n1 n2 n3", offline: str = "") -> list[Node]:
    return [
        Node(
            name=name,
            uuid=f"uuid-{name}",
            primary_ip=ip,
            secondary_ip=ip,
            group="g",
            master_candidate=name in candidates.split(),
            offline=name in offline.split(),
        )
        for name, ip in IPS.items()
    ]


def member(name: str, learner: bool = False) -> EtcdMemberInfo:
    url = Candidate(name, "", IPS[name])
    return EtcdMemberInfo(f"id-{name}", name, (url.peer_url,), (url.client_url,), learner)


def up(name: str, leader: str | None = "n1", learner: bool = False, **status: Any) -> MemberHealth:
    """A member that answers, following ``leader`` (None: etcd's 0, none)."""
    info = member(name, learner)
    leader_id = "0" if leader is None else f"id-{leader}"
    return MemberHealth(info, {"header": {"member_id": info.id}, "leader": leader_id, **status})


def down(name: str, learner: bool = False) -> MemberHealth:
    return MemberHealth(member(name, learner), None, "connection refused")


def judge(
    health: EtcdHealth, cluster: list[Node] | None = None, failure: str | None = None
) -> tuple[list[str], list[str]]:
    """(findings as ``LEVEL:CODE:type:item:text``, feedback lines)."""
    findings: list[str] = []
    feedback: list[str] = []

    def report(code: str, itype: str, item: str | None, text: str, warning: bool) -> None:
        findings.append(f"{'WARNING' if warning else 'ERROR'}:{code}:{itype}:{item}:{text}")

    verify_etcd(report, feedback.append, cluster or nodes(), health, failure)
    return findings, feedback


def test_three_voters_with_a_leader_are_healthy() -> None:
    findings, feedback = judge(EtcdHealth([up("n1"), up("n2"), up("n3")]))
    assert findings == []
    assert feedback == ["  - NOTICE: etcd voters: n1, n2, n3; learners: none; leader: n1"]


def test_a_learner_of_a_fourth_candidate_is_healthy() -> None:
    health = EtcdHealth([up("n1"), up("n2"), up("n3"), up("n4", learner=True)])
    findings, feedback = judge(health, nodes("n1 n2 n3 n4"))
    assert findings == []
    assert feedback == ["  - NOTICE: etcd voters: n1, n2, n3; learners: n4; leader: n1"]


def test_a_member_that_does_not_answer() -> None:
    findings, _ = judge(EtcdHealth([up("n1"), up("n2"), down("n3")]))
    assert findings == ["ERROR:ENODEETCD:node:n3:etcd member does not answer: connection refused"]


def test_an_even_number_of_voters() -> None:
    findings, _ = judge(EtcdHealth([up("n1"), up("n2")]), nodes("n1 n2"))
    assert findings == [
        "ERROR:ECLUSTERETCD:cluster:None:etcd has 2 voters, an even number: it survives"
        " no more failures than one voter fewer"
    ]


def test_candidates_and_members_that_do_not_match() -> None:
    # n3 is a candidate without a member; n4's member is on no candidate.
    findings, _ = judge(EtcdHealth([up("n1"), up("n2"), up("n4")]))
    assert findings == [
        "ERROR:ECLUSTERETCD:cluster:None:etcd member n4 is on no master candidate",
        "ERROR:ENODEETCD:node:n3:master candidate without an etcd member",
    ]


def test_an_offline_candidate_needs_no_member() -> None:
    findings, _ = judge(EtcdHealth([up("n1")]), nodes("n1 n2", offline="n2"))
    assert findings == []


def test_no_leader_and_alarms() -> None:
    health = EtcdHealth([up("n1", leader=None, errors=["NOSPACE"]), down("n2"), down("n3")])
    findings, feedback = judge(health)
    assert findings == [
        "ERROR:ENODEETCD:node:n1:etcd member reports: NOSPACE",
        "ERROR:ENODEETCD:node:n2:etcd member does not answer: connection refused",
        "ERROR:ENODEETCD:node:n3:etcd member does not answer: connection refused",
        "ERROR:ECLUSTERETCD:cluster:None:etcd has no leader",
    ]
    assert feedback[0].endswith("leader: none")


def test_members_that_name_different_leaders() -> None:
    findings, _ = judge(EtcdHealth([up("n1"), up("n2", leader="n2"), up("n3")]))
    assert findings == [
        "ERROR:ECLUSTERETCD:cluster:None:etcd members name different leaders: n1, n2"
    ]


def test_no_member_answers() -> None:
    findings, feedback = judge(EtcdHealth([], "No etcd member answered"))
    assert findings == [
        "ERROR:ECLUSTERETCD:cluster:None:no etcd member answers: No etcd member answered"
    ]
    assert feedback == []


def test_the_service_failure_is_a_warning() -> None:
    findings, _ = judge(EtcdHealth([up("n1"), up("n2"), up("n3")]), failure="etcd refused")
    assert findings == [
        "WARNING:ECLUSTERETCD:cluster:None:the etcd membership service's last step failed"
        " (it tries again): etcd refused"
    ]
