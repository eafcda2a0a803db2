"""The node call declarations, their agreement with noded's handlers, noded's
door, and light imports."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import corral
from corral import constants as C
from corral import errors
from corral.node.context import NodeContext
from corral.node.dispatch import run_call
from corral.node.handlers import HANDLERS
from corral.paths import Paths
from corral.rpc.calls import CALLS, get_call
from corral.rpc.calls_instance import instance_shutdown
from corral.rpc.calls_node import hooks_runner

PACKAGE = Path(corral.__file__).parent


def test_every_call_has_a_handler_with_the_declared_arguments() -> None:
    assert set(HANDLERS) == set(CALLS)
    for name, call in CALLS.items():
        params = list(inspect.signature(HANDLERS[name]).parameters)
        assert params[0] == "ctx", name
        assert tuple(params[1:]) == call.args, name
        # Every argument is declared with a type noded can check.
        assert set(typing.get_type_hints(call.signature)) == {*call.args, "return"}, name


def test_requests_take_arguments_by_position_or_name() -> None:
    by_position = instance_shutdown("fake", "inst1", 120)
    by_name = instance_shutdown("fake", name="inst1", timeout=120)
    assert by_position.args == by_name.args == ["fake", "inst1", 120]
    assert by_position.call is get_call("instance_shutdown")


def test_check_args() -> None:
    call = get_call("hooks_runner")
    assert call is hooks_runner
    assert call.check_args(("instance-add", "pre", {})) == ["instance-add", "pre", {}]
    with pytest.raises(errors.ProgrammerError, match="takes 3 arguments"):
        call.check_args(["instance-add"])
    with pytest.raises(errors.ProgrammerError, match="Unknown RPC call"):
        get_call("no_such_call")


def test_timeouts() -> None:
    assert get_call("version").timeout_for([]) == C.RPC_TMO_URGENT
    assert get_call("hooks_runner").timeout_for(["x", "pre", {}]) == C.RPC_TMO_NORMAL
    assert get_call("test_delay").timeout_for([100]) > 100
    assert get_call("run_oob").timeout_for(["/oob", "health", "node1", 100]) > 100


@pytest.mark.parametrize(
    ("name", "args", "problem"),
    [
        ("test_delay", ["soon"], "duration of test_delay: Input should be a valid number"),
        ("instance_shutdown", ["fake", "i1", True], "timeout of instance_shutdown"),
        ("blockdev_remove", [{"path": "/etc/shadow"}], "disk.template of blockdev_remove"),
        ("node_info", ["/srv"], "storage_units of node_info: Input should be a valid array"),
        ("hypervisor_info", ["fake", "/srv"], "storage_unit of hypervisor_info"),
        ("hooks_runner", ["x", "pre", {"A": 1}], "env.A of hooks_runner"),
        ("run_oob", ["/oob", "health", "node1", "60"], "timeout of run_oob"),
    ],
)
async def test_noded_refuses_arguments_of_the_wrong_type(
    tmp_path: Path, name: str, args: list[object], problem: str
) -> None:
    ctx = NodeContext(Paths(tmp_path), "127.0.0.1", 0)
    reply = await run_call(ctx, name, json.dumps(args).encode())
    assert reply.status == 400
    success, message = json.loads(reply.body)
    assert not success and message.startswith("Invalid argument ") and problem in message
    assert not any(tmp_path.iterdir())  # nothing done


@pytest.mark.parametrize(
    "module", ["corral.rpc.calls", "corral.rpc.client", "corral.process.daemons"]
)
def test_light_modules_import_no_heavy_libraries(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "heavy = [m for m in ('aiohttp', 'cryptography', 'pydantic') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
