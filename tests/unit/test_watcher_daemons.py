"""How a daemon's start is recorded (corral.process.start_record) and how the
watcher decides that a daemon is dead and whether to start it again
(corral.tools.watcher_daemons).  The restarts themselves, of real daemons
killed with SIGKILL, are in tests/integration/test_watcher.py (master) and
tests/integration/test_mirrored_kvm.py (a joined node)."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.paths import Paths
from corral.process import start_record
from corral.tools import watcher_daemons
from corral.tools.watcher_daemons import NODED
from tests.helpers.waiting import wait_until


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["-b", "127.0.0.3", "--join-token-file", "/tmp/t", "-d"], ["-b", "127.0.0.3", "-d"]),
        (
            ["-b", "127.0.0.3", "--join-token=cj1.x", "-p", "1811"],
            ["-b", "127.0.0.3", "-p", "1811"],
        ),
        (["--join-token-f", "/tmp/t", "-b", "a"], ["-b", "a"]),  # argparse's abbreviation
        (["-b", "a", "--join-token", "-"], ["-b", "a"]),
        (["-b", "a", "--", "--join-token"], ["-b", "a", "--", "--join-token"]),
    ],
)
def test_a_restart_leaves_out_the_join_token(
    monkeypatch: pytest.MonkeyPatch, args: list[str], kept: list[str]
) -> None:
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-m", "corral.daemons.noded", *args])
    drop = ("--join-token", "--join-token-file")
    assert start_record.own_command(drop) == [sys.executable, "-m", "corral.daemons.noded", *kept]


def test_the_record_keeps_the_command_and_the_environment_that_shape_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = Paths(tmp_path)
    monkeypatch.setenv("CORRAL_ROOT", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", "/src")
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    start_record.write(paths, NODED, ["python3", "-m", "corral.daemons.noded", "-b", "a"])
    record = start_record.read(paths, NODED)
    assert record is not None
    assert record.argv == ["python3", "-m", "corral.daemons.noded", "-b", "a"]
    assert record.env["CORRAL_ROOT"] == str(tmp_path) and record.env["PYTHONPATH"] == "/src"
    assert "HOME" not in record.env and record.supervisor is None
    assert start_record.record_path(paths, NODED).stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("INVOCATION_ID", "0123abcd")  # what systemd sets in a service
    start_record.write(paths, NODED, ["corral-noded", "-b", "a"])
    assert start_record.read(paths, NODED) == start_record.StartRecord(
        ["corral-noded", "-b", "a"], record.env, "systemd"
    )


@pytest.mark.parametrize("text", ["", "{", "[]", '{"argv": [], "env": {}, "supervisor": null}'])
def test_a_bad_record_is_no_record(tmp_path: Path, text: str) -> None:
    paths = Paths(tmp_path)
    start_record.record_path(paths, NODED).parent.mkdir(parents=True)
    start_record.record_path(paths, NODED).write_text(text)
    assert start_record.read(paths, NODED) is None


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not noded, whatever its pid file says."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "x"], stdin=subprocess.PIPE
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_is_known_by_its_command_line(other: subprocess.Popen[bytes]) -> None:
    assert not watcher_daemons.runs(other.pid, NODED)
    assert not watcher_daemons.runs(2**22 + 1, NODED)  # no such process
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "corral.daemons.noded"],
        stdin=subprocess.PIPE,
    ) as noded:
        try:
            # Its command line shows once its exec is complete, a moment after Popen returns.
            wait_until(lambda: watcher_daemons.runs(noded.pid, NODED), what="cmdline")
            assert not watcher_daemons.runs(noded.pid, watcher_daemons.MASTERD)
        finally:
            noded.kill()


def test_nothing_is_started_outside_a_cluster(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    start_record.write(paths, NODED, ["/bin/false"])
    assert watcher_daemons.ensure_daemons(paths) == []


def cluster_member(tmp_path: Path, argv: list[str]) -> Paths:
    """A root that is a node of a cluster (a certificate), not the master."""
    paths = Paths(tmp_path)
    paths.data_dir.mkdir(parents=True)
    paths.server_pem.write_text("not read: this node is no master\n")
    start_record.write(paths, NODED, argv)
    return paths


def test_a_daemon_run_by_systemd_is_left_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "started"
    monkeypatch.setenv("INVOCATION_ID", "0123abcd")
    paths = cluster_member(tmp_path, ["touch", str(marker)])
    monkeypatch.delenv("INVOCATION_ID")
    assert watcher_daemons.ensure_daemons(paths) == []
    assert not marker.exists()
    assert "Daemon corral-noded supervised by systemd but not running, will not restart" in (
        caplog.text
    )


def test_without_a_record_a_dead_daemon_is_only_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = cluster_member(tmp_path, ["true"])
    start_record.record_path(paths, NODED).unlink()
    caplog.set_level(logging.INFO, logger="ganeti-watcher")
    assert watcher_daemons.ensure_daemons(paths) == []
    assert "Daemon corral-noded is not running and cannot be restarted: no record" in caplog.text


def test_a_start_that_fails_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    script = tmp_path / "failing-noded"
    script.write_text(
        "#!/bin/sh\necho 'Cannot listen on 127.0.0.3:1811: address in use' >&2\nexit 1\n"
    )
    script.chmod(0o755)
    paths = cluster_member(tmp_path, [str(script)])
    assert watcher_daemons.ensure_daemons(paths) == []
    assert (
        "Daemon corral-noded is not running; restarting it failed:"
        " Cannot listen on 127.0.0.3:1811: address in use"
    ) in caplog.text
