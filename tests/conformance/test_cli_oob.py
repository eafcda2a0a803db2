"""Out-of-band management: Ganeti 3.0.2's ``gnt-node power``, ``gnt-node
health`` and ``gnt-cluster epo`` and Corral's print the same, against a
Corral cluster of three nodes (two of them twins for the changes), whose
out-of-band program (below the master's root) is the QA suite's kind
(tests/helpers/oob.py); for the changes, the program must also have been
run alike.  ``epo --on`` is not compared: Ganeti's finds nodes by DNS (the
test names resolve nowhere) and sends power-off (Corral's deliberate
difference, see corral/cli/cluster_epo.py); nor ``epo --groups``, which
Ganeti's crashes on (it sends luxi an itertools.chain);
tests/integration/test_oob_qa.py runs them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import (
    Output,
    assert_same,
    assert_same_on_twins,
    corral_on_terminal,
    ganeti_on_terminal,
    normalized,
)
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.multinode import add_node
from tests.helpers.oob import PROGRAM, OobProgram

TWINS = ("twina.example.com", "twinb.example.com")
MASTER = "node1.example.com"
STATE = "name,offline,powered,master_candidate"
POWERED = json.dumps({"powered": True})
HEALTH = json.dumps([["temp", "OK"], ["disk0", "CRITICAL"], ["fan", "WARNING"]])


@pytest.fixture(scope="module")
def ocluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("oob")
    with running_cluster(root / "master") as cl:
        added = []
        try:
            for name in TWINS:
                added.append(add_node(cl, root / name, name))
            change = cl.gnt("cluster", "modify", "--node-parameters", f"oob_program={PROGRAM}")
            assert change.rc == 0, change.stderr
            yield cl
        finally:
            for noded in added:
                noded.stop()


@pytest.fixture
def oob(ocluster: TestCluster, tmp_path: Path) -> OobProgram:
    """The program (made anew for each test, with no run recorded)."""
    return OobProgram(ocluster.paths, tmp_path / "oob")


@pytest.mark.parametrize(
    ("answer", "argv"),
    [
        (POWERED, ["power", "status"]),
        (POWERED, ["power", "--no-headers", "--separator=:", "status", TWINS[0], MASTER]),
        (POWERED, ["power", "status", "no-such-node"]),
        ('{"powered": false}', ["power", "--separator= | ", "status", TWINS[1]]),
        ("", ["power", "on", MASTER]),
        ("", ["power", "bogus", MASTER]),
        ("", ["power"]),
        ("", ["power", "-f", "cycle"]),
        ("", ["power", "-f", "off", MASTER]),
        ("", ["power", "-f", "--ignore-status", "cycle", MASTER]),
        ("", ["power", "--oob-timeout=0", "status"]),
        ("", ["power", "--power-delay=-1", "on", MASTER]),
        (POWERED, ["health"]),
        (HEALTH, ["health"]),
        (HEALTH, ["health", "--no-headers", "--separator=,", TWINS[1]]),
        ('[["temp", "HOT"]]', ["health", TWINS[0]]),
        (POWERED, ["list", "-o", "name,powered"]),
    ],
)
def test_commands(ocluster: TestCluster, oob: OobProgram, answer: str, argv: list[str]) -> None:
    oob.answer(answer)
    assert_same(ocluster, ["gnt-node", *argv])


def test_a_failing_program(ocluster: TestCluster, oob: OobProgram) -> None:
    oob.answer('{"powered": true}\n', exit_code=3)
    assert_same(ocluster, ["gnt-node", "power", "status", TWINS[0]])
    assert_same(ocluster, ["gnt-node", "health"])


@pytest.mark.parametrize(
    "argv",
    [
        ["epo", "--groups", "--all"],
        ["epo", "--all", "some_arg"],
        ["epo", "-f", MASTER],
        ["epo", "-f"],
        ["epo", "-f", "no-such-node"],
    ],
)
def test_epo_refusals(ocluster: TestCluster, oob: OobProgram, argv: list[str]) -> None:
    assert_same(ocluster, ["gnt-cluster", *argv])
    assert oob.runs() == []


def on_twins(cl: TestCluster, oob: OobProgram, argv: list[str]) -> Output:
    """The command with both tools on the twins: same output, same runs of the
    program, same state after."""
    before = len(oob.runs())
    output = assert_same_on_twins(cl, argv, TWINS)
    runs = oob.runs()[before:]
    half = len(runs) // 2
    assert [run.replace(TWINS[0], TWINS[1]) for run in runs[:half]] == runs[half:], runs
    assert_same_on_twins(cl, ["gnt-node", "list", "-o", STATE, "{}"], TWINS)
    return output


def test_power_off_marks_the_node_offline_and_on_needs_it_marked_powered(
    ocluster: TestCluster, oob: OobProgram
) -> None:
    on_twins(ocluster, oob, ["gnt-node", "power", "-f", "off", "{}"])
    # Without -f both ask first; without a terminal the answer is no, and the
    # command fails (as in the QA suite's TestOutOfBand, which so fails).
    asked = ["gnt-node", "modify", "-O", "no", "--node-powered", "yes", "{}"]
    assert on_twins(ocluster, oob, asked).rc == 1
    on_twins(ocluster, oob, ["gnt-node", "modify", "-f", "-O", "no", "{}"])
    on_twins(ocluster, oob, ["gnt-node", "modify", "-f", "-O", "no", "--node-powered", "yes", "{}"])
    on_twins(ocluster, oob, ["gnt-node", "power", "-f", "--ignore-status", "off", "{}"])
    on_twins(ocluster, oob, ["gnt-node", "power", "on", "{}"])
    on_twins(ocluster, oob, ["gnt-node", "power", "-f", "cycle", "{}"])
    oob.answer(POWERED)
    on_twins(ocluster, oob, ["gnt-node", "power", "-f", "on", "{}"])  # an answer: refused
    assert oob.runs()[-1] == f"power-on {TWINS[1]}"


def test_epo_powers_a_node_off(ocluster: TestCluster, oob: OobProgram) -> None:
    on_twins(ocluster, oob, ["gnt-cluster", "epo", "-f", "{}"])
    on_twins(ocluster, oob, ["gnt-cluster", "epo", "-f", "{}"])  # already off: skipped
    on_twins(ocluster, oob, ["gnt-node", "power", "on", "{}"])


@pytest.mark.parametrize(("argv", "answer"), [(["power", "off"], "n"), (["power", "cycle"], "y")])
def test_questions_on_a_terminal(
    ocluster: TestCluster, oob: OobProgram, argv: list[str], answer: str
) -> None:
    theirs = ganeti_on_terminal(ocluster, ["gnt-node", *argv, TWINS[0]], answer)
    ours = corral_on_terminal(ocluster, ["gnt-node", *argv, TWINS[1]], answer)
    assert ours[0] == theirs[0]
    assert normalized(ours[1], {TWINS[1]: "<TWIN>"}) == normalized(theirs[1], {TWINS[0]: "<TWIN>"})
    expected = [] if answer == "n" else [f"power-cycle {TWINS[0]}", f"power-cycle {TWINS[1]}"]
    assert oob.runs() == expected
