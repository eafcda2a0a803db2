"""Running QEMU's programs (QEMU itself, qemu-storage-daemon) as daemons:
starting one, reading its pidfile, killing it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence

from corral import errors

# QEMU's own error output can be long (a usage text): the error keeps its end.
_STDERR_LIMIT = 4000


async def output(argv: Sequence[str], pass_fds: Sequence[int] = ()) -> tuple[int, str]:
    """Run ``argv`` to its end: its exit code and its output (stdout and stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        pass_fds=pass_fds,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")


async def run_daemonized(
    what: str, argv: Sequence[str], pass_fds: Sequence[int] = (), program: str = "QEMU"
) -> None:
    """Run ``argv`` (a QEMU program with ``-daemonize``): returns once the
    daemon is set up (its parent exits then); OpExecError "Failed to start
    ``what``" carrying the program's output if not."""
    code, out = await output(argv, pass_fds)
    if code != 0:
        text = out.strip()[-_STDERR_LIMIT:] or "no output"
        raise errors.OpExecError(
            f"Failed to start {what}: {program} exited with code {code}: {text}"
        )


def read_pid(pidfile: str) -> int | None:
    """The pid in a QEMU pidfile, None without one."""
    try:
        with open(pidfile) as handle:
            return int(handle.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def kill(pid: int) -> None:
    """SIGKILL ``pid`` (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
