"""One run of an OS ``export`` or ``import`` script for one disk.

The data goes through a pipe (export: the script's stdout; import: its
stdin) that the engine's threads read or write; the script's messages go to
its log file (secrets scrubbed) and to the stream's recent output; an extra
pipe, ``EXP_SIZE_FD``, is where an export script may write the size of its
stream in bytes.  The descriptors are as Ganeti gives them: export: stdin
/dev/null, stdout the data; import: stdin the data, stdout with stderr.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from corral import errors
from corral.osdef.definition import OSDefinition
from corral.osdef.env import disk_transfer_env
from corral.osdef.runner import copy_lines, kill_session, spawn_piped, tail

# Large pipes: fewer system calls per byte (the kernel caps this for non-root).
PIPE_SIZE = 1024 * 1024
_MAX_SIZE_TEXT = 64
# Ganeti runs export/import from its import/export daemon, which passes on
# noded's environment (a system daemon's) with LC_ALL=C: these four are in
# its scripts' environment (and not in create/rename/verify's).
DAEMON_ENV = {"HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "dumb"}
# How long a script's helpers may keep its pipes open after it exited.
LINGER = 5.0


class ScriptRun:
    """The script ``kind`` (``export``/``import``) of ``osdef`` for disk ``index``."""

    def __init__(
        self,
        osdef: OSDefinition,
        kind: str,
        env: dict[str, str],
        disk: tuple[int, str],
        log_path: Path,
        secrets: list[str],
    ) -> None:
        self.osdef, self.kind, self.log_path, self.secrets = osdef, kind, log_path, secrets
        self.index, self.disk_path = disk
        self.base_env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_fd = -1
        self._threads: list[threading.Thread] = []

    def start(self, note: Callable[[str], None], on_size: Callable[[int], None]) -> int:
        """Start the script; the descriptor of the data pipe's end for the engine."""
        size_r, size_w = os.pipe()
        err_r, err_w = os.pipe()
        data_r, data_w = os.pipe()
        env = disk_transfer_env(
            self.base_env, self.kind, self.index, self.disk_path, size_fd=size_w
        )
        env.update(DAEMON_ENV)
        export = self.kind == "export"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        child_end = data_w if export else data_r
        self.data_fd = data_r if export else data_w
        try:
            self.proc = spawn_piped(
                self.osdef,
                self.kind,
                env,
                stdin=subprocess.DEVNULL if export else data_r,
                stdout=data_w if export else err_w,
                stderr=err_w,
                pass_fds=(size_w,),
            )
        except OSError as err:
            for fd in (size_r, err_r, self.data_fd, log_fd):
                os.close(fd)
            raise errors.OpExecError(
                f"Cannot execute {self.osdef.script(self.kind)}: {err}"
            ) from None
        finally:
            for fd in (size_w, err_w, child_end):
                os.close(fd)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.data_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self._spawn(self._messages, err_r, log_fd, note)
        self._spawn(self._size, size_r, on_size, note)
        return self.data_fd

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=f"{self.kind} script", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _messages(self, err_r: int, log_fd: int, note: Callable[[str], None]) -> None:
        try:
            copy_lines(err_r, log_fd, self.secrets, note)
        finally:
            os.close(err_r)
            os.close(log_fd)

    @staticmethod
    def _size(size_r: int, on_size: Callable[[int], None], note: Callable[[str], None]) -> None:
        data = b""
        try:
            while (chunk := os.read(size_r, _MAX_SIZE_TEXT)) and len(data) < _MAX_SIZE_TEXT:
                data += chunk
        finally:
            os.close(size_r)
        text = data.decode("ascii", "replace").strip()
        if not text:
            return
        try:
            on_size(int(text))
        except ValueError:
            note(f"Ignored the invalid size {text[:20]!r} from EXP_SIZE_FD")

    def finish(self) -> None:
        """Wait for the script to end (its data pipe closed); OpExecError if it failed."""
        assert self.proc is not None
        code = self.proc.wait()
        for thread in self._threads:
            thread.join(LINGER)
            if thread.is_alive():
                # Something the script started keeps its pipes open: as it is
                # alive, the session (its process group) is still this one's.
                os.killpg(self.proc.pid, signal.SIGKILL)
                thread.join()
        if code != 0:
            raise errors.OpExecError(
                f"OS {self.kind} script failed (exit code {code}), last lines in the log file"
                f" {self.log_path}:\n{tail(self.log_path)}"
            )

    def kill(self) -> None:
        """Stop the script now (an abort, a failed stream)."""
        # Not once reaped: its process group id may belong to another by now.
        if self.proc is not None and self.proc.returncode is None:
            kill_session(self.proc)


class ScriptPipe:
    """The engine's end of a script's data pipe (``fd``, set once the script
    runs); closing it stops the script."""

    def __init__(self, script: ScriptRun) -> None:
        self.script = script
        self.fd = -1

    def kill(self) -> None:
        """Stop the script (a failure or an abort elsewhere in the stream)."""
        self.script.kill()

    def close(self) -> None:
        self.script.kill()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
