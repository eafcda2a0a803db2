"""OP_OOB_COMMAND (out-of-band power and health) and the powered flag of
OP_NODE_SET_PARAMS against real nodes in-process (tests/helpers/inprocess.py),
with a real program below the master's root, as Ganeti's QA suite writes one
(tests/helpers/oob.py); the commands' output is compared with Ganeti's own
gnt-node and gnt-cluster in tests/conformance/test_cli_oob.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.node.context import NodeContext
from corral.node.dispatch import run_call
from corral.objects import Node
from corral.paths import Paths
from tests.helpers.inprocess import InProcessCluster, in_process_cluster
from tests.helpers.oob import PROGRAM, OobProgram
from tests.helpers.waiting import wait_until

NODE1, NODE2 = testbed.node_name(1), testbed.node_name(2)
SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR
NORMAL, NODATA, UNAVAIL = C.RS_NORMAL, C.RS_NODATA, C.RS_UNAVAIL
NOT_A_DICT = "power-status is expected to return a dict but got"


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        yield cluster


@pytest.fixture
async def oob(cl: InProcessCluster, tmp_path: Path) -> OobProgram:
    """The program, below the master's root, set for the whole cluster."""
    program = OobProgram(cl.paths, tmp_path / "oob")
    job = await cl.run({"OP_ID": "OP_CLUSTER_SET_PARAMS", "ndparams": {"oob_program": PROGRAM}})
    assert job.status == SUCCESS, job.error
    return program


def oob_op(command: str, *nodes: str, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_OOB_COMMAND", "command": command, "node_names": list(nodes), **fields}


def powered(cl: InProcessCluster, index: int) -> bool:
    return cl.config_node(index).powered


async def set_offline(cl: InProcessCluster, index: int) -> None:
    name = testbed.node_name(index)
    job = await cl.run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": name, "offline": True})
    assert job.status == SUCCESS, job.error


def warnings(job: Any) -> list[str]:
    return [line for line in job.log if line.startswith(" - WARNING: ")]


# Power
async def test_power_on_runs_the_program_with_command_and_node_name(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    job = await cl.run(oob_op("power-on", NODE2))
    assert job.status == SUCCESS, job.error
    assert job.result == [[[NORMAL, NODE2], [NORMAL, None]]]
    assert oob.runs() == [f"power-on {NODE2}"]
    assert powered(cl, 2)


async def test_power_off_needs_the_node_offline_and_changes_nothing_otherwise(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    serial = cl.cfg.serial
    job = await cl.run(oob_op("power-off", NODE2))
    assert job.status == ERROR
    assert job.error == f"Cannot power off node {NODE2} because it is not marked offline"
    assert job.result[1][1] == C.ECODE_STATE
    assert oob.runs() == [] and cl.cfg.serial == serial and powered(cl, 2)


async def test_power_off_of_an_offline_node_records_it_unpowered(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    await set_offline(cl, 2)
    job = await cl.run(oob_op("power-off", NODE2))
    assert job.status == SUCCESS, job.error
    assert oob.runs() == [f"power-off {NODE2}"]
    assert not powered(cl, 2)
    rows = await cl.master.query(C.QR_NODE, ["name", "powered"], None)
    assert [row[1] for row in rows["data"]] == [[NORMAL, True], [NORMAL, False]]


async def test_ignore_status_powers_off_an_online_node(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    job = await cl.run(oob_op("power-off", NODE2, ignore_status=True))
    assert job.status == SUCCESS, job.error
    assert oob.runs() == [f"power-off {NODE2}"] and not powered(cl, 2)


@pytest.mark.parametrize("command", ["power-off", "power-cycle"])
async def test_the_master_is_never_powered_off_or_cycled(
    cl: InProcessCluster, oob: OobProgram, command: str
) -> None:
    job = await cl.run(oob_op(command, NODE1, ignore_status=True))
    assert job.status == ERROR
    assert job.error == (
        f"Operating on the master node {NODE1} is not allowed for {command}; run"
        f" '{PROGRAM} {command} {NODE1}' if you want to operate on the master regardless"
    )
    assert job.result[1][1] == C.ECODE_INVAL and oob.runs() == []


async def test_the_master_without_a_program_is_refused_as_such(cl: InProcessCluster) -> None:
    job = await cl.run(oob_op("power-cycle", NODE1))
    assert job.error == (
        f"Operating on the master node {NODE1} is not allowed for power-cycle; it does not"
        " support out-of-band operations"
    )


async def test_without_names_every_node_in_nice_order_but_the_master_for_power_off(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    job = await cl.run(oob_op("power-on"))
    assert [entry[0][1] for entry in job.result] == [NODE1, NODE2]
    assert oob.runs() == [f"power-on {NODE1}", f"power-on {NODE2}"]
    job = await cl.run(oob_op("power-off", ignore_status=True, power_delay=0))
    assert job.status == SUCCESS, job.error
    assert [entry[0][1] for entry in job.result] == [NODE2]
    assert oob.runs()[2:] == [f"power-off {NODE2}"]


async def test_a_node_without_a_program_is_unavailable(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    node2 = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODE2, "ndparams": {"oob_program": ""}}
    assert (await cl.run(node2)).status == SUCCESS
    job = await cl.run(oob_op("power-on", power_delay=0))
    assert job.result == [[[NORMAL, NODE1], [NORMAL, None]], [[NORMAL, NODE2], [UNAVAIL, None]]]
    assert oob.runs() == [f"power-on {NODE1}"]


# Answers
async def test_power_status_answers_the_programs_json(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    oob.answer(json.dumps({"powered": False}))
    job = await cl.run(oob_op("power-status", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NORMAL, {"powered": False}]]]
    assert powered(cl, 2), "a status is reported, not recorded"


async def test_health_items_in_warning_or_critical_state_are_warned_about(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    oob.answer(json.dumps([["temp", "OK"], ["disk0", "CRITICAL"], ["fan", "WARNING"]]))
    job = await cl.run(oob_op("health", NODE2))
    assert job.result == [
        [[NORMAL, NODE2], [NORMAL, [["temp", "OK"], ["disk0", "CRITICAL"], ["fan", "WARNING"]]]]
    ]
    assert warnings(job) == [
        f" - WARNING: Item 'disk0' on node '{NODE2}' has status 'CRITICAL'",
        f" - WARNING: Item 'fan' on node '{NODE2}' has status 'WARNING'",
    ]


@pytest.mark.parametrize(
    ("command", "data", "problem"),
    [
        ("power-status", "", f"{NOT_A_DICT} <class 'NoneType'>"),
        ("power-status", "[]", f"{NOT_A_DICT} <class 'list'>"),
        (
            "power-status",
            '{"on": 1}',
            "power-status is expected to return {'powered': true or false} but got {'on': 1}",
        ),
        ("health", "", "command 'health' is expected to return a list but got <class 'NoneType'>"),
        ("health", '[["temp", "HOT"]]', "health item 'temp' has invalid status 'HOT'"),
        ("health", '[["temp"]]', "health item ['temp'] is not a pair [item, status]"),
        ("power-on", '{"powered": true}', "power-on is expected to not return payload but got"
         " '{'powered': True}'"),
    ],
)  # fmt: skip
async def test_an_answer_of_the_wrong_shape_is_no_data(
    cl: InProcessCluster, oob: OobProgram, command: str, data: str, problem: str
) -> None:
    oob.answer(data)
    job = await cl.run(oob_op(command, NODE2))
    assert job.status == SUCCESS, job.error
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    assert warnings(job) == [
        f" - WARNING: Payload returned by node '{NODE2}' is not valid: Check of out-of-band"
        f" payload failed due to {problem}"
    ]
    assert powered(cl, 2)


async def test_a_failing_program_is_no_data_with_its_output(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    oob.answer('{"powered": true}', exit_code=1)
    job = await cl.run(oob_op("power-on", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    assert warnings(job) == [
        f" - WARNING: Out-of-band RPC failed on node '{NODE2}': '{PROGRAM} power-on {NODE2}'"
        " failed with reason 'exited with exit code 1'; output: {\"powered\": true}"
    ]


async def test_printing_no_json_is_no_data(cl: InProcessCluster, oob: OobProgram) -> None:
    oob.answer("powered\n")
    job = await cl.run(oob_op("power-status", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    [warning] = warnings(job)
    assert f"'{PROGRAM} power-status {NODE2}' printed no valid JSON: Expecting value" in warning


async def test_a_program_past_its_timeout_is_killed_with_its_children(
    cl: InProcessCluster, oob: OobProgram, tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    oob.write(f"sleep 600 &\necho $! > {pid_file}\nwait\n")
    job = await cl.run(oob_op("health", NODE2, timeout=1))
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    [warning] = warnings(job)
    assert warning.endswith(
        f"'{PROGRAM} health {NODE2}' failed with reason 'terminated by signal 9,"
        " terminated after timeout of 1.00 seconds'; output:"
    )
    child = int(pid_file.read_text())
    wait_until(lambda: not _alive(child), what=f"the program's child {child} killed")


async def test_the_program_runs_with_a_clean_environment_from_the_root_directory(
    cl: InProcessCluster, oob: OobProgram, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    oob.write(f"env > {seen}\npwd >> {seen}\n")
    job = await cl.run(oob_op("power-on", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NORMAL, None]]]
    lines = set(seen.read_text().splitlines())
    assert {f"PATH={C.HOOKS_PATH}", "LC_ALL=C", "/"} <= lines
    names = {line.split("=", 1)[0] for line in lines if "=" in line}
    assert names <= {"PATH", "LC_ALL", "PWD", "SHLVL", "_"}  # the last three: the shell's


async def test_the_failure_shows_both_output_streams(cl: InProcessCluster, oob: OobProgram) -> None:
    oob.write("echo out\necho err >&2\nexit 2\n")
    job = await cl.run(oob_op("power-status", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    assert warnings(job) == [
        f" - WARNING: Out-of-band RPC failed on node '{NODE2}': '{PROGRAM} power-status {NODE2}'"
        " failed with reason 'exited with exit code 2'; output: out\nerr"
    ]


async def test_an_answer_past_the_output_limit_is_no_data(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    oob.answer(json.dumps({"powered": True, "log": "x" * C.OOB_MAX_OUTPUT}))
    job = await cl.run(oob_op("power-status", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    [warning] = warnings(job)
    assert warning.endswith(
        f"'{PROGRAM} power-status {NODE2}' printed more than {C.OOB_MAX_OUTPUT} bytes:"
        " an answer is a small JSON"
    )


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["/oob", "power-up", NODE2, 60], "Unknown out-of-band command 'power-up'; use one of"
         " health, power-cycle, power-off, power-on, power-status"),
        (["/oob", "health", NODE2, 0], "Invalid out-of-band timeout 0: it must be positive"),
    ],
)  # fmt: skip
async def test_noded_refuses_what_no_master_sends(
    tmp_path: Path, args: list[Any], why: str
) -> None:
    ctx = NodeContext(Paths(tmp_path), "127.0.0.1", 0)
    reply = await run_call(ctx, "run_oob", json.dumps(args).encode())
    assert json.loads(reply.body) == [False, why]


@pytest.mark.parametrize(
    ("program", "why"),
    [
        ("corral-test-oob", "The out-of-band program 'corral-test-oob' is not an absolute path;"
         " set the node parameter oob_program to one"),
        ("/no/such/program", f"Can't execute '/no/such/program power-on {NODE2}': not found"),
    ],
)  # fmt: skip
async def test_a_program_that_cannot_run_is_no_data(
    cl: InProcessCluster, oob: OobProgram, program: str, why: str
) -> None:
    change = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "ndparams": {"oob_program": program}}
    assert (await cl.run(change)).status == SUCCESS
    job = await cl.run(oob_op("power-on", NODE2))
    assert job.result == [[[NORMAL, NODE2], [NODATA, None]]]
    assert warnings(job) == [f" - WARNING: Out-of-band RPC failed on node '{NODE2}': {why}"]
    assert oob.runs() == []


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed but not reaped yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# Bad input: Ganeti's codes, nothing run
@pytest.mark.parametrize(
    ("fields", "error", "code"),
    [
        ({"node_names": ["nosuch.example.com"]}, "Node 'nosuch.example.com' not known",
         C.ECODE_NOENT),
        ({"timeout": 0}, "Invalid out-of-band timeout 0: give a positive number of seconds",
         C.ECODE_INVAL),
        ({"power_delay": -1.5}, "Invalid power delay -1.5: give a number of seconds, at least 0",
         C.ECODE_INVAL),
        ({"command": "power-up"}, "Invalid OP_OOB_COMMAND: parameter 'command'", C.ECODE_INVAL),
    ],
)  # fmt: skip
async def test_bad_input_is_refused_and_runs_nothing(
    cl: InProcessCluster, oob: OobProgram, fields: dict[str, Any], error: str, code: str
) -> None:
    op = {**oob_op("power-on", NODE2), **fields}
    if "command" in fields:
        with pytest.raises(Exception, match=error):
            await cl.queue.submit([op])
    else:
        job = await cl.run(op)
        assert job.status == ERROR
        assert job.error.startswith(error) and job.result[1][1] == code
    assert oob.runs() == []


async def test_a_dry_run_runs_nothing(cl: InProcessCluster, oob: OobProgram) -> None:
    job = await cl.run(oob_op("power-on", NODE2, dry_run=True))
    assert job.status == SUCCESS and oob.runs() == []


# The powered flag of gnt-node modify
async def test_the_powered_flag_needs_a_program(cl: InProcessCluster) -> None:
    job = await cl.run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODE2, "offline": True,
                        "powered": False})  # fmt: skip
    assert job.status == ERROR
    assert job.error == (
        f"Unable to change powered state for node {NODE2} as it does not support out-of-band"
        " handling"
    )
    assert job.result[1][1] == C.ECODE_STATE and not cl.config_node(2).offline


async def test_an_unpowered_node_stays_offline_until_marked_powered(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    await set_offline(cl, 2)
    assert (await cl.run(oob_op("power-off", NODE2))).status == SUCCESS
    online = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODE2, "offline": False}
    job = await cl.run(online)
    assert job.status == ERROR
    assert job.error == f"Node {NODE2} needs to be turned on before its offline status can be reset"
    assert cl.config_node(2).offline
    job = await cl.run({**online, "powered": True})
    assert job.status == SUCCESS, job.error
    node: Node = cl.config_node(2)
    assert not node.offline and node.powered


# gnt-cluster verify: ENODEOOBPATH
async def verify_lines(cl: InProcessCluster) -> list[str]:
    job = await cl.run({"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "default"})
    assert job.status == SUCCESS, job.error
    return [line for line in job.log if "ENODEOOBPATH" in line or "out of band" in line]


async def test_verify_checks_the_program_on_every_node_that_may_be_master(
    cl: InProcessCluster, oob: OobProgram
) -> None:
    missing = f"error stating out of band helper: [Errno 2] No such file or directory: '{PROGRAM}'"
    # The program is on the master only.
    assert await verify_lines(cl) == [f"  - ERROR: node {NODE2}: {missing}"]
    other = OobProgram(cl.node(2).paths, oob.calls.parent / "node2")
    other.path.chmod(0o600)
    assert await verify_lines(cl) == [
        f"  - ERROR: node {NODE2}: out of band helper {PROGRAM} is not executable"
    ]
    other.path.chmod(0o500)
    assert await verify_lines(cl) == []
    other.path.unlink()
    other.path.mkdir()
    assert await verify_lines(cl) == [
        f"  - ERROR: node {NODE2}: out of band helper {PROGRAM} is not a file"
    ]
