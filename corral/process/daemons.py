"""Plumbing shared by Corral's daemons: pid files, logging, daemonizing, start/stop.

A daemon started in the background reports back to the command that started
it through a *readiness pipe*: the command waits until the daemon is actually
serving (exit 0) or prints the daemon's one-line reason for failing (exit 1),
such as "Cannot listen on 127.0.0.2:1811: address already in use".

Stdlib only, and asyncio is imported only by run_daemon: the gnt-* commands
import start_daemon/stop_daemon and must start fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from corral import errors
from corral.paths import Paths

if TYPE_CHECKING:
    import logging


def _log() -> logging.Logger:
    import logging  # not at the top: this module must import fast for the CLI

    return logging.getLogger(__name__)


ReadyCallback = Callable[[], None]
DaemonMain = Callable[[ReadyCallback], Awaitable[None]]

_READY = "OK"
_FAILED = "ERROR "
_POLL = 0.05
# The highest soft limit of open files a daemon raises itself to.
FD_LIMIT_CAP = 65536


class DaemonStartError(errors.CommandError):
    """A daemon could not start; the message is meant for the user as it is."""


def one_line(err: BaseException) -> str:
    """An error as one line of text, for the user."""
    text = err.message if isinstance(err, errors.GenericError) else str(err)
    text = " ".join(text.split())
    return text or err.__class__.__name__


def listen_error(address: str, port: int, err: OSError) -> DaemonStartError:
    """The error to report when a daemon cannot listen on ``address:port``."""
    reason = os.strerror(err.errno).lower() if err.errno else str(err)
    host = f"[{address}]" if ":" in address else address
    return DaemonStartError(f"Cannot listen on {host}:{port}: {reason}")


class PidFile:
    """A daemon's pid file, locked (flock) for as long as the daemon runs.

    The lock, not the file's existence, says whether the daemon runs: a file
    left behind by a killed daemon is unlocked and simply taken over.
    """

    def __init__(self, path: Path, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        self._fd: int | None = None

    def acquire(self) -> None:
        """Lock the file and write our pid; PidFileLockError if the daemon runs."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _read_pid_fd(fd)
                os.close(fd)
                raise errors.PidFileLockError(
                    f"{self.name} is already running (pid {pid or 'unknown'})"
                ) from None
            # The previous owner may have unlinked the file between our open and
            # our lock; then we locked an orphan and must try again.
            if _same_file(fd, self.path):
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Remove the file and drop the lock (in that order, so no one else's file goes).

        A daemon that dropped root cannot remove it: the unlocked file stays,
        which says the same (see running_pid).
        """
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError, PermissionError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> PidFile:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    fst = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


def _read_pid_fd(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None


def running_pid(path: Path) -> int | None:
    """The pid of the daemon holding the pid file ``path``, or None if none does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_pid_fd(fd)
    finally:
        os.close(fd)
    return None


def setup_logging(log_path: Path, debug: bool, *, stderr: bool = False) -> None:
    """Log to ``log_path`` (and stderr if asked) with time, daemon, pid and level.

    Repeated messages of one kind are rate-limited (see corral.process.lograte).
    """
    import logging

    from corral.process.lograte import rate_limit

    log_path.parent.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter(
        f"%(asctime)s: {log_path.stem} pid=%(process)d %(levelname)s %(message)s"
    )
    handlers: list[logging.Handler] = [logging.FileHandler(log_path)]
    if stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        handler.setFormatter(fmt)
        # A flood of one error (failed accepts, handshakes) must not fill the disk.
        root.addHandler(rate_limit(handler))
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        # One line per RPC is noise in normal operation.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def reopen_logs(log_path: Path, *, stdio: bool) -> None:
    """Open the log files again (after logrotate moved them: SIGHUP, as Ganeti's
    daemons); ``stdio``: the daemon's stdout and stderr point at ``log_path``
    too.  A file that cannot be opened keeps the old one, with a warning."""
    import logging

    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            continue
        try:
            stream = open(_append_fd(handler.baseFilename), "a", encoding=handler.encoding)  # noqa: SIM115
        except OSError as err:
            _log().warning("Cannot open the log %s again: %s", handler.baseFilename, err)
            continue
        old = handler.setStream(stream)
        if old is not None:
            old.close()
    if stdio:
        with contextlib.suppress(OSError):
            fd = _append_fd(log_path)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
    _log().info("Log files opened again")


def _append_fd(path: Path | str) -> int:
    """A descriptor appending to the log ``path`` (made private if it is new)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


_sighup_callbacks: list[Callable[[], None]] = []


def on_sighup(callback: Callable[[], None]) -> None:
    """Call ``callback`` (in the event loop) when the daemon gets SIGHUP, after
    its log files were opened again."""
    _sighup_callbacks.append(callback)


def raise_fd_limit() -> None:
    """Raise the soft limit of open files to the hard one (at most FD_LIMIT_CAP).

    A daemon holds a descriptor per client connection; the usual soft limit of
    1,024 is soon reached.  The cap keeps the children (hooks, OS scripts) from
    inheriting a limit so large that programs which size tables by it suffer.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = FD_LIMIT_CAP if hard == resource.RLIM_INFINITY else min(hard, FD_LIMIT_CAP)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as err:
        _log().warning("Cannot raise the limit of open files to %d: %s", target, err)
        return
    _log().info("Raised the limit of open files from %d to %d", soft, target)


class _Readiness:
    """The daemon's end of the readiness pipe (``fd`` None in the foreground)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self.done = False
        self.detached = fd is not None  # stdout and stderr go to the log

    def ready(self) -> None:
        if not self.done:
            _log().info("Ready")
            self._send(_READY)
            # Run by a unit of Type=notify (packaging/debian): systemctl start returns now.
            from corral.process.sd_notify import notify

            notify("READY=1")

    def fail(self, message: str) -> None:
        if self.done:
            return
        if self._fd is None:
            print(message, file=sys.stderr, flush=True)
        self._send(_FAILED + message)

    def _send(self, text: str) -> None:
        self.done = True
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._fd, text.encode("utf-8", "replace") + b"\n")
        os.close(self._fd)
        self._fd = None


def _wait_for_child(rfd: int, child: int, log_path: Path) -> int:
    """In the parent: wait for the daemon's readiness message; the exit code."""
    chunks = []
    with os.fdopen(rfd, "rb") as pipe:
        while chunk := pipe.read(4096):
            chunks.append(chunk)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child, 0)
    message = b"".join(chunks).decode("utf-8", "replace").strip()
    if message == _READY:
        return 0
    if message.startswith(_FAILED):
        print(message[len(_FAILED) :], file=sys.stderr)
    else:
        print(f"{log_path.stem} failed to start; see {log_path}", file=sys.stderr)
    return 1


def _detach(log_path: Path) -> None:
    """Become a daemon: new session, second fork, stdio to /dev/null and the log."""
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.chdir("/")
    os.umask(0o022)
    null = os.open(os.devnull, os.O_RDONLY)
    out = _append_fd(log_path)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


async def _supervise(main: DaemonMain, notify: _Readiness, log_path: Path) -> int:
    """Run ``main`` until it ends or SIGTERM/SIGINT cancels it; the exit code.
    SIGHUP opens the log files again (see :func:`on_sighup`)."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main(notify.ready))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    reopening: set[asyncio.Task[None]] = set()

    def hangup() -> None:
        async def reopen() -> None:
            # Opening files is disk work: off the event loop.
            await asyncio.to_thread(reopen_logs, log_path, stdio=notify.detached)
            for callback in _sighup_callbacks:
                callback()

        job = loop.create_task(reopen())
        reopening.add(job)
        job.add_done_callback(reopening.discard)

    loop.add_signal_handler(signal.SIGHUP, hangup)
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        _log().info("Stopped by signal")
        notify.fail("Stopped by a signal before it was ready")
        return 0
    except Exception as err:
        expected = isinstance(err, errors.GenericError)
        _log().error("Fatal error: %s", one_line(err), exc_info=not expected)
        notify.fail(one_line(err))
        return 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    notify.fail("Exited before it was ready")
    return 0


def run_daemon(
    name: str,
    main: DaemonMain,
    *,
    foreground: bool,
    paths: Paths | None = None,
    debug: bool = False,
    argv: list[str] | None = None,
) -> int:
    """Run ``main(ready)`` as the daemon ``name``; returns the process's exit code.

    Unless ``foreground``, the process daemonizes and the original process
    returns only when the daemon called ``ready()`` (0) or failed (1, after
    printing the reason).  The pid file is ``paths.pid_file(name)``, the log
    ``paths.daemon_log(name)``.  ``argv`` is what starts the daemon again
    (default: this process's command line), recorded for ganeti-watcher
    (:mod:`corral.process.start_record`).
    """
    paths = paths or Paths.from_env()
    log_path = paths.daemon_log(name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    notify = _Readiness(None)
    if not foreground:
        rfd, wfd = os.pipe()
        child = os.fork()
        if child > 0:
            os.close(wfd)
            return _wait_for_child(rfd, child, log_path)
        os.close(rfd)
        _detach(log_path)
        notify = _Readiness(wfd)
    setup_logging(log_path, debug, stderr=foreground)
    pidfile = PidFile(paths.pid_file(name), name)
    try:
        # /var/run is a tmpfs: after a reboot its directories are gone.
        for directory in (paths.run_dir, paths.socket_dir):
            directory.mkdir(parents=True, exist_ok=True)
        pidfile.acquire()
    except (errors.PidFileLockError, OSError) as err:
        _log().error("%s", one_line(err))
        notify.fail(one_line(err))
        return 1
    try:
        import asyncio

        _log().info("%s starting (pid %d)", name, os.getpid())
        _record_start(paths, name, argv)
        raise_fd_limit()
        return asyncio.run(_supervise(main, notify, log_path))
    finally:
        pidfile.release()
        _log().info("%s stopped", name)


def _record_start(paths: Paths, name: str, argv: list[str] | None) -> None:
    """Keep how this daemon was started; a failure costs only the watcher's restart."""
    from corral.process import start_record

    try:
        start_record.write(paths, name, argv or start_record.own_command())
    except OSError as err:
        _log().warning(
            "Cannot record how %s was started (the watcher cannot restart it): %s", name, err
        )


def start_daemon(cmd: list[str], env: dict[str, str], timeout: float = 60.0) -> None:
    """Start a daemon and return once it is ready; DaemonStartError if it is not.

    ``env`` is added to the current environment.  The daemon must daemonize
    with :func:`run_daemon` (its first process exits when the daemon is ready).
    """
    start_daemons([cmd], env, timeout)


def start_daemons(cmds: list[list[str]], env: dict[str, str], timeout: float = 60.0) -> None:
    """Start daemons at the same time and return once all are ready; the first
    failure as a DaemonStartError once all have finished starting."""
    procs = []
    for cmd in cmds:
        try:
            procs.append(
                subprocess.Popen(
                    cmd,
                    env={**os.environ, **env},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        except OSError as err:
            raise DaemonStartError(f"Cannot run {cmd[0]}: {err.strerror or err}") from None
    deadline = time.monotonic() + timeout
    failures = [
        _startup_failure(proc, cmd[0], deadline - time.monotonic())
        for proc, cmd in zip(procs, cmds, strict=True)
    ]
    failure = next((f for f in failures if f), None)
    if failure:
        raise DaemonStartError(failure)


def _startup_failure(proc: subprocess.Popen[bytes], name: str, timeout: float) -> str | None:
    """Why the daemon started by ``proc`` did not get ready, or None if it did."""
    try:
        _out, err = proc.communicate(timeout=max(timeout, 0))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"{name} did not get ready in time"
    if proc.returncode == 0:
        return None
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"{name} exited with {proc.returncode}"


def _wait_stopped(path: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while running_pid(path) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)
    return True


def stop_daemon(paths: Paths, name: str, timeout: float = 10.0) -> bool:
    """Stop the daemon ``name``: SIGTERM, then SIGKILL after ``timeout`` seconds.

    Returns whether a running daemon was found (and stopped).
    """
    path = paths.pid_file(name)
    pid = running_pid(path)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    if not _wait_stopped(path, timeout):
        _log().warning("%s (pid %d) did not stop within %g s; killing it", name, pid, timeout)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        # A killed daemon leaves an unlocked pid file, which the next start reuses.
        _wait_stopped(path, timeout)
    # So does one that dropped root (corral-rapi): its pid file goes here.
    if running_pid(path) is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return True
