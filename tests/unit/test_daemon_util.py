"""Pid files, error messages and start_daemon's error reporting."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest

from corral import errors
from corral.paths import Paths
from corral.process.daemons import (
    DaemonStartError,
    PidFile,
    listen_error,
    running_pid,
    start_daemon,
    stop_daemon,
)


def test_pid_file_lock(tmp_path: Path) -> None:
    path = tmp_path / "run" / "corral-noded.pid"
    with PidFile(path):
        assert path.read_text() == f"{os.getpid()}\n"
        assert running_pid(path) == os.getpid()
        with pytest.raises(errors.PidFileLockError) as info:
            PidFile(path).acquire()
        assert str(info.value) == f"corral-noded is already running (pid {os.getpid()})"
    assert not path.exists()
    assert running_pid(path) is None


def test_stale_pid_file_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "corral-noded.pid"
    path.write_text("999999\n")
    assert running_pid(path) is None
    with PidFile(path):
        assert path.read_text() == f"{os.getpid()}\n"


def test_stop_daemon_without_daemon(tmp_path: Path) -> None:
    assert stop_daemon(Paths(tmp_path), "corral-noded") is False


def test_listen_error_message() -> None:
    err = listen_error("127.0.0.2", 1811, OSError(errno.EADDRINUSE, "whatever"))
    assert str(err) == "Cannot listen on 127.0.0.2:1811: address already in use"
    err = listen_error("::1", 1811, OSError(errno.EADDRNOTAVAIL, "whatever"))
    assert str(err) == "Cannot listen on [::1]:1811: cannot assign requested address"


def test_start_daemon_reports_last_error_line() -> None:
    code = "import sys; print('noise', file=sys.stderr); sys.exit('Cannot do it: reason')"
    with pytest.raises(DaemonStartError, match=r"^Cannot do it: reason$"):
        start_daemon([sys.executable, "-c", code], {})
    with pytest.raises(DaemonStartError, match="Cannot run /nonexistent"):
        start_daemon(["/nonexistent"], {})
    start_daemon(
        [sys.executable, "-c", "import os; assert os.environ['X_TEST'] == '1'"], {"X_TEST": "1"}
    )
