"""The hooks_runner call: runs ``<hooks dir>/<hpath>-<phase>.d`` as Ganeti does.

Run-parts rules (:mod:`corral.hook_scripts`), one script after the other.
Each gets exactly the environment the master built plus a fixed
PATH, cwd ``/``, stdin ``/dev/null`` and its own session; stdout and stderr are
captured together.  There is no per-script timeout (only the RPC's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.hook_scripts import HOOK_NAME_RE, hooks_subdir, runnable_hooks
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.process.capture import read_capped
from corral.rpc import calls_node as calls

log = logging.getLogger(__name__)

MAX_OUTPUT = 64 * 1024
_TRUNCATED = "\n[output truncated]"


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> str:
    """Everything from ``stream`` up to ``limit`` bytes; the rest is read and dropped."""
    kept, dropped = await read_capped(stream, limit)
    text = kept.decode("utf-8", "replace")
    return text + _TRUNCATED if dropped else text


def _kill_session(proc: asyncio.subprocess.Process) -> None:
    # The hook is a session leader, so its pid is also its process group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_hook(script: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run one hook script; ``(HKR_SUCCESS or HKR_FAIL, output)``."""
    try:
        proc = await asyncio.create_subprocess_exec(
            str(script),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            cwd="/",
            start_new_session=True,
            umask=C.SCRIPT_UMASK,
        )
    except OSError as err:
        return C.HKR_FAIL, f"Cannot execute {script}: {err.strerror or err}"
    assert proc.stdout is not None
    try:
        output = await _read_capped(proc.stdout, MAX_OUTPUT)
        code = await proc.wait()
    except asyncio.CancelledError:
        # noded is stopping: do not leave the hook running behind it.
        _kill_session(proc)
        await proc.wait()
        raise
    log.debug("Hook %s exited with code %s", script, code)
    return (C.HKR_SUCCESS if code == 0 else C.HKR_FAIL), output


def hook_environment(env: Any) -> dict[str, str]:
    """The environment of a hook: the given variables and the fixed PATH only."""
    if not isinstance(env, dict):
        raise errors.HooksFailure("hooks_runner: env must be a dictionary")
    return {**{str(key): str(value) for key, value in env.items()}, "PATH": C.HOOKS_PATH}


@rpc_handler(calls.hooks_runner)
async def hooks_runner(
    ctx: NodeContext, hpath: str, phase: str, env: dict[str, str]
) -> list[list[Any]]:
    """Run the hooks of ``hpath`` in ``phase``: ``[[relpath, hkr, output], ...]``."""
    if phase not in (C.HOOKS_PHASE_PRE, C.HOOKS_PHASE_POST):
        raise errors.HooksFailure(f"Unknown hooks phase {phase!r}")
    if not isinstance(hpath, str) or not HOOK_NAME_RE.match(hpath):
        raise errors.HooksFailure(f"Invalid hooks path {hpath!r}")
    hook_env = hook_environment(env)
    subdir = hooks_subdir(hpath, phase)
    results: list[list[Any]] = []
    for script in runnable_hooks(ctx.paths.hooks_dir / subdir):
        hkr, output = await run_hook(script, hook_env)
        results.append([f"{subdir}/{script.name}", hkr, output])
    return results
