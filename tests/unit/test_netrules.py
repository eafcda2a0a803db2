"""The network rules for QEMU's users without the kernel: the policy's
order and the script it renders, which uid a guest's QEMU is ruled under,
and how verify reports what a node says is missing (the rules themselves
run in namespaces: tests/integration/test_netrules*.py)."""

from __future__ import annotations

import ipaddress
import pwd
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.cmdlib.cluster_verify_nodes import NodeImage, verify_netrules
from corral.node.hypervisor.kvm.security import ruled_uid
from corral.node.netrules.policy import (
    ACCEPT,
    REJECT,
    RULES,
    Link,
    State,
    render,
    static_blocked,
)
from corral.node.verify_checks import run_checks
from corral.objects import Node
from corral.paths import Paths
from corral.rpc import node_verify as NV

NOBODY = pwd.getpwnam("nobody").pw_uid


def test_what_is_allowed_comes_before_what_is_refused() -> None:
    verdicts = [rule.verdict for rule in RULES]
    assert verdicts == sorted(verdicts, key=lambda v: v != ACCEPT)
    assert set(verdicts) == {ACCEPT, REJECT}
    assert RULES[0].match == "ct state established"  # answers, never new connections


def test_an_empty_state_removes_the_table() -> None:
    empty = State(frozenset(), frozenset(), tuple(static_blocked()))
    assert render("corral", empty) == "table inet corral\ndelete table inet corral\n"


def test_the_script_replaces_the_table_with_collapsed_sets() -> None:
    nets = (*static_blocked(), ipaddress.ip_network("10.213.0.0/24"),
            ipaddress.ip_network("10.213.0.7/32"), ipaddress.ip_network("fd00::/64"))  # fmt: skip
    links = frozenset(
        {
            Link(47001, ipaddress.ip_address("10.213.0.7"), 8102),
            Link(47001, ipaddress.ip_address("fd00::7"), 40000),
        }
    )
    script = render("corral_x", State(frozenset({47002, 47001}), links, nets))
    lines = [line.strip() for line in script.splitlines()]
    # Declared then deleted first: one transaction replaces whatever was there.
    assert lines[:3] == [
        "table inet corral_x",
        "delete table inet corral_x",
        "table inet corral_x {",
    ]
    assert "elements = { 47001, 47002 }" in lines
    assert "elements = { 47001 . 10.213.0.7 . 8102 }" in lines
    assert "elements = { 47001 . fd00::7 . 40000 }" in lines
    # Overlapping networks are merged (nft refuses overlapping interval elements).
    assert "elements = { 10.213.0.0/24, 127.0.0.0/8, 169.254.169.254/32 }" in lines
    assert "elements = { ::1/128, fd00::/64 }" in lines
    assert "meta skuid @uids jump guest" in lines
    assert [f"{r.match} {r.verdict}" for r in RULES] == lines[-2 - len(RULES) : -2]


@pytest.mark.parametrize(
    ("hvp", "pool_uid", "expected"),
    [
        ({}, None, None),  # Ganeti's default security_model=none: QEMU is root
        ({"security_model": "none"}, None, None),
        ({"security_model": "pool"}, 47005, 47005),
        ({"security_model": "user", "security_domain": "nobody"}, None, NOBODY),
        ({"security_model": "user", "security_domain": "root"}, None, None),
        ({"security_model": "pool", "use_network_rules": False}, 47005, None),
        ({"security_model": "user", "security_domain": "nobody", "use_network_rules": False},
         None, None),
    ],
)  # fmt: skip
def test_the_uid_a_guest_is_ruled_under(
    hvp: dict[str, Any], pool_uid: int | None, expected: int | None
) -> None:
    assert ruled_uid(hvp, pool_uid) == expected


def test_an_unknown_security_user_is_refused() -> None:
    with pytest.raises(errors.OpExecError, match="Unknown user 'no-such-user'"):
        ruled_uid({"security_model": "user", "security_domain": "no-such-user"}, None)


def _reports(answer: dict[str, Any]) -> list[tuple[str, str, bool]]:
    seen: list[tuple[str, str, bool]] = []

    def report(ecode: str, itype: str, item: str | None, text: str, warning: bool = False) -> None:
        seen.append((ecode, text, warning))

    node = Node(name="node1", primary_ip="10.213.0.2", secondary_ip="10.213.0.2", group="g")
    verify_netrules(report, NodeImage(node, answer))
    return seen


def test_verify_reports_each_missing_rule_as_enodenet() -> None:
    assert _reports({NV.NETRULES: [], NV.FAILURES: {}}) == []
    missing = "the network rules for instance i1's QEMU user (uid 47001) are missing"
    assert _reports({NV.NETRULES: [missing], NV.FAILURES: {}}) == [
        ("ENODENET", f"{missing}; restart corral-noded to restore them", False)
    ]
    assert _reports({NV.FAILURES: {NV.NETRULES: "nft: boom"}}) == [
        ("ENODENET", "cannot check the network rules: nft: boom", False)
    ]


def test_a_node_without_ruled_guests_has_nothing_missing(tmp_path: Path) -> None:
    answer = run_checks(Paths(tmp_path), {NV.NETRULES: None})
    assert answer == {NV.NETRULES: [], NV.FAILURES: {}}
