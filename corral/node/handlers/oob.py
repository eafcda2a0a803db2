"""The run_oob call: a node's out-of-band program, which the master's noded
runs for the nodes it manages (power them on, off, cycle, ask their power
state or their health).

As Ganeti's RunOob: ``<program> <command> <node name>``; a non-zero exit
fails the call with the program's output; on success its standard output is
JSON, or nothing.  Corral's rules on top: the program is an absolute
(production) path, looked up below this node's root; it runs with a clean
environment (a fixed PATH and ``LC_ALL=C``, nothing of noded's), cwd ``/``,
stdin ``/dev/null`` and a session of its own, which is killed after
``timeout`` seconds; each output stream is kept up to OOB_MAX_OUTPUT bytes.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.osdef.runner import kill_session
from corral.process.capture import CappedOutput, capture
from corral.rpc import calls_node as calls

log = logging.getLogger(__name__)

ENVIRONMENT = {"PATH": C.HOOKS_PATH, "LC_ALL": "C"}


@dataclass
class _Outcome:
    """How the program ended and what it printed."""

    code: int
    stdout: CappedOutput
    stderr: CappedOutput
    timed_out: bool

    def reason(self, timeout: int) -> str:
        """Why it failed, in Ganeti's words (RunResult.fail_reason)."""
        why = (
            f"terminated by signal {-self.code}"
            if self.code < 0
            else f"exited with exit code {self.code}"
        )
        if self.timed_out:
            why += f", terminated after timeout of {timeout:.2f} seconds"
        return why

    def output(self) -> str:
        """Its standard output then its standard error, as text (Ganeti's output)."""
        text = ""
        for stream in (self.stdout, self.stderr):
            text += bytes(stream.kept).decode("utf-8", "replace")
            if stream.dropped:
                text += f"\n[{stream.dropped} more bytes not kept]\n"
        return text


async def _run(program: Path, args: list[str], timeout: int) -> _Outcome:
    """Run ``program args`` (see the module's description); OSError if it cannot start."""
    proc = await asyncio.create_subprocess_exec(
        str(program),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=ENVIRONMENT,
        cwd="/",
        start_new_session=True,
        umask=C.SCRIPT_UMASK,
    )
    out, err, timed_out = await capture(proc, C.OOB_MAX_OUTPUT, timeout, kill_session)
    return _Outcome(await proc.wait(), out, err, timed_out)


def _check(oob_program: str, command: str, timeout: int) -> None:
    if command not in C.OOB_COMMANDS:
        raise errors.OpExecError(
            f"Unknown out-of-band command '{command}'; use one of {', '.join(C.OOB_COMMANDS)}"
        )
    if timeout <= 0:
        raise errors.OpExecError(f"Invalid out-of-band timeout {timeout}: it must be positive")
    if not posixpath.isabs(oob_program):
        raise errors.OpExecError(
            f"The out-of-band program '{oob_program}' is not an absolute path;"
            " set the node parameter oob_program to one"
        )


@rpc_handler(calls.run_oob)
async def run_oob(
    ctx: NodeContext, oob_program: str, command: str, node_name: str, timeout: int
) -> Any:
    """Run the out-of-band program (see the module's description)."""
    _check(oob_program, command, timeout)
    shown = shlex.join([oob_program, command, node_name])
    log.info("Running out-of-band command %s", shown)
    try:
        outcome = await _run(ctx.paths.from_wire(oob_program), [command, node_name], timeout)
    except OSError as err:
        what = "not found" if err.errno == errno.ENOENT else err.strerror or str(err)
        raise errors.OpExecError(f"Can't execute '{shown}': {what}") from None
    if outcome.code != 0 or outcome.timed_out:
        raise errors.OpExecError(
            f"'{shown}' failed with reason '{outcome.reason(timeout)}'; output: {outcome.output()}"
        )
    if outcome.stdout.dropped:
        raise errors.OpExecError(
            f"'{shown}' printed more than {C.OOB_MAX_OUTPUT} bytes: an answer is a small JSON"
        )
    if not outcome.stdout.kept:
        return None
    try:
        return json.loads(bytes(outcome.stdout.kept))
    except ValueError as err:
        raise errors.OpExecError(f"'{shown}' printed no valid JSON: {err}") from None
