"""Running an OS script on a node: reset environment, umask 077, cwd in the OS
directory, stdin closed, all output in a per-run log file, the log's tail on
failure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from corral import constants as C
from corral.osdef.definition import OSDefinition

TAIL_LINES = 20


def log_file(log_dir: Path, kind: str, os_name: str, instance: str) -> Path:
    """``<log dir>/os/<kind>-<os>-<instance>-<timestamp>.log``, as Ganeti names them."""
    stamp = time.strftime("%Y-%m-%d_%H_%M_%S") + f".{time.time_ns() % 1_000_000_000:09d}"
    return log_dir / "os" / f"{kind}-{os_name}-{instance}-{stamp}.log"


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        with path.open("r", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip("\n")
    except OSError:
        return ""


def kill_session(proc: asyncio.subprocess.Process | subprocess.Popen[bytes]) -> None:
    """Kill the script and everything it started (its session's process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# A line longer than this is written out in pieces (a secret split across the
# cut would escape the scrubbing; scripts do not print such lines).
_MAX_LINE = 1 << 20


class _Scrubber:
    """Cuts a script's output at line ends (so no secret is split) and
    replaces the secret values in it."""

    def __init__(self, secrets: Sequence[str]) -> None:
        # Longest first: a value containing another is replaced whole.
        self._hidden = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
        self._carry = b""

    def _scrub(self, data: bytes) -> bytes:
        for secret in self._hidden:
            data = data.replace(secret, C.REDACTED.encode())
        return data

    def feed(self, chunk: bytes) -> bytes:
        """The whole lines that ``chunk`` completes, scrubbed (maybe none)."""
        data = self._carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) < _MAX_LINE:
            self._carry = data
            return b""
        cut = cut or len(data)
        self._carry = data[cut:]
        return self._scrub(data[:cut])

    def rest(self) -> bytes:
        """What is left after the last line end, scrubbed."""
        data, self._carry = self._carry, b""
        return self._scrub(data)


async def _copy_output(stream: asyncio.StreamReader, fd: int, secrets: Sequence[str]) -> None:
    """Copy the script's output to its log, line by line, secrets replaced."""
    scrubber = _Scrubber(secrets)
    while chunk := await stream.read(65536):
        os.write(fd, scrubber.feed(chunk))
    os.write(fd, scrubber.rest())


async def run_script(
    osdef: OSDefinition,
    script: str,
    args: list[str],
    env: dict[str, str],
    log_path: Path,
    secrets: Sequence[str] = (),
) -> tuple[int, str]:
    """Run ``script`` of the OS; returns ``(exit code, tail of its log)``.

    The environment is exactly ``env`` (which holds PATH); nothing of noded's
    own environment leaks in.  ``secrets`` are the private and secret values:
    they must not reach the log (nor so the tail) even if the script prints them.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                str(osdef.script(script)),
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                cwd=str(osdef.path),
                start_new_session=True,
                umask=C.SCRIPT_UMASK,
            )
        except OSError as err:
            os.write(fd, f"Cannot execute {osdef.script(script)}: {err}\n".encode())
            return 127, tail(log_path)
        assert proc.stdout is not None
        try:
            await _copy_output(proc.stdout, fd, secrets)
            code = await proc.wait()
        except asyncio.CancelledError:
            kill_session(proc)
            await proc.wait()
            raise
    finally:
        os.close(fd)
    return code, tail(log_path) if code != 0 else ""


# Piped scripts (``export``, ``import``): their data goes through a pipe that
# the import/export engine reads or writes in threads, not through the event
# loop; so these helpers block, and run in those threads.


def spawn_piped(
    osdef: OSDefinition,
    script: str,
    env: dict[str, str],
    *,
    stdin: int,
    stdout: int,
    stderr: int,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``script`` as :func:`run_script` does (exactly ``env``, umask 077,
    cwd in the OS directory, a session of its own), on the given descriptors."""
    return subprocess.Popen(
        [str(osdef.script(script))],
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        pass_fds=tuple(pass_fds),
        env=env,
        cwd=str(osdef.path),
        start_new_session=True,
        umask=C.SCRIPT_UMASK,
    )


def copy_lines(
    source: int, log_fd: int, secrets: Sequence[str], on_line: Callable[[str], None]
) -> None:
    """Copy the script's messages from ``source`` to its log until the end,
    secrets replaced; each line (scrubbed) also goes to ``on_line``."""
    scrubber = _Scrubber(secrets)
    while chunk := os.read(source, 65536):
        _write_lines(log_fd, scrubber.feed(chunk), on_line)
    _write_lines(log_fd, scrubber.rest(), on_line)


def _write_lines(log_fd: int, text: bytes, on_line: Callable[[str], None]) -> None:
    os.write(log_fd, text)
    for line in text.decode("utf-8", "replace").splitlines():
        on_line(line)
