"""The RPC call table, its agreement with noded's handlers, and light imports."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from corral import constants as C
from corral import errors
from corral.node.handlers import HANDLERS
from corral.rpc.calls import CALLS, get_call


def test_every_call_has_a_handler_with_the_table_arguments() -> None:
    assert set(HANDLERS) == set(CALLS)
    for name, call in CALLS.items():
        params = list(inspect.signature(HANDLERS[name]).parameters)
        assert params[0] == "ctx", name
        assert tuple(params[1:]) == call.args, name


def test_check_args() -> None:
    call = get_call("hooks_runner")
    assert call.check_args(("instance-add", "pre", {})) == ["instance-add", "pre", {}]
    with pytest.raises(errors.ProgrammerError, match="takes 3 arguments"):
        call.check_args(["instance-add"])
    with pytest.raises(errors.ProgrammerError, match="Unknown RPC call"):
        get_call("no_such_call")


def test_timeouts() -> None:
    assert get_call("version").timeout_for([]) == C.RPC_TMO_URGENT
    assert get_call("hooks_runner").timeout_for(["x", "pre", {}]) == C.RPC_TMO_NORMAL
    assert get_call("test_delay").timeout_for([100]) > 100


@pytest.mark.parametrize("module", ["corral.rpc.calls", "corral.process.daemons"])
def test_light_modules_import_no_heavy_libraries(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "heavy = [m for m in ('aiohttp', 'cryptography', 'pydantic') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
