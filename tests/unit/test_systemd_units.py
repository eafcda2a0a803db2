"""Starting and stopping the daemons through systemd (corral.process.systemd,
as Ganeti's daemon-util ``use_systemctl``) with a stub ``systemctl`` on PATH
(systemd cannot run here), and sd_notify's READY=1 on a real socket."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from corral import bootstrap
from corral.paths import Paths
from corral.process import sd_notify, systemd
from corral.process.daemons import DaemonStartError

# Logs each call and, for a start, the unit's one-time options as the unit
# would read them; answers ``show`` with $STUB_LOADSTATE; fails a start of
# $STUB_FAIL as systemctl does.
STUB = """#!/bin/sh
echo "$*" >> "$STUB_LOG"
case "$1" in
show) echo "LoadState=$STUB_LOADSTATE" ;;
start)
    if [ "$2" = "$STUB_FAIL" ]; then
        echo "Job for $2 failed because the control process exited with error code." >&2
        exit 1
    fi
    cat "$STUB_DATA/${2%.service}.onetime.conf" >> "$STUB_LOG" ;;
esac
"""


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    paths = Paths(tmp_path / "root")
    paths.data_dir.mkdir(parents=True)
    return paths


@pytest.fixture
def log(tmp_path: Path, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemd as PID 1 with Corral's units, for the cluster in ``paths``:
    the stub on PATH, the booted marker and the units' root moved here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "systemctl"
    stub.write_text(STUB)
    stub.chmod(0o755)
    booted = tmp_path / "run-systemd-system"
    booted.mkdir()
    log = tmp_path / "systemctl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("STUB_LOG", str(log))
    monkeypatch.setenv("STUB_DATA", str(paths.data_dir))
    monkeypatch.setenv("STUB_LOADSTATE", "loaded")
    monkeypatch.setattr(systemd, "BOOTED", booted)
    monkeypatch.setattr(systemd, "UNITS_ROOT", paths.root)
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_in_charge_with_the_units_loaded(paths: Paths, log: Path) -> None:
    assert systemd.in_charge(paths)
    assert calls(log) == ["show --property=LoadState ganeti.target"]


def test_not_in_charge_without_the_units(
    paths: Paths, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_LOADSTATE", "not-found")
    assert not systemd.in_charge(paths)


def test_not_in_charge_of_another_root(tmp_path: Path, log: Path) -> None:
    assert not systemd.in_charge(Paths(tmp_path / "elsewhere"))
    assert not log.exists()  # not even asked


def test_not_in_charge_unless_systemd_booted(
    paths: Paths, log: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(systemd, "BOOTED", tmp_path / "missing")
    assert not systemd.in_charge(paths)


def test_not_in_charge_without_systemctl(
    paths: Paths, log: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert not systemd.in_charge(paths)


def test_a_start_gives_its_options_to_the_unit_once(paths: Paths, log: Path) -> None:
    systemd.start(paths, "corral-noded", ["--bind", "127.0.0.2", "--port", "1811"])
    assert calls(log) == [
        "start corral-noded.service",
        'ONETIME_ARGS="--bind 127.0.0.2 --port 1811"',
    ]
    assert not systemd.onetime_file(paths, "corral-noded").exists()


def test_a_failed_start_says_why(paths: Paths, log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_FAIL", "corral-rapi.service")
    with pytest.raises(DaemonStartError, match=r"Job for corral-rapi\.service failed"):
        systemd.start(paths, "corral-rapi", [])
    assert not systemd.onetime_file(paths, "corral-rapi").exists()


def test_options_systemd_would_split_are_refused(paths: Paths, log: Path) -> None:
    with pytest.raises(DaemonStartError, match="Cannot pass"):
        systemd.start(paths, "corral-rapi", ["a b"])
    assert not log.exists()


def test_init_starts_the_daemons_through_their_units(paths: Paths, log: Path) -> None:
    bootstrap.start_daemons(paths, "127.0.0.2", 1811)
    assert calls(log) == [
        "show --property=LoadState ganeti.target",
        "start corral-noded.service",
        'ONETIME_ARGS="--bind 127.0.0.2 --port 1811"',
        "start corral-masterd.service",
        'ONETIME_ARGS=""',
        "start corral-rapi.service",
        'ONETIME_ARGS="--bind 127.0.0.2"',
    ]


def test_the_daemons_stop_through_their_units(paths: Paths, log: Path) -> None:
    bootstrap.stop_daemons(paths)  # metad has no unit: only its pid file is looked at
    assert calls(log) == [
        "show --property=LoadState ganeti.target",
        "stop corral-rapi.service",
        "stop corral-masterd.service",
        "stop corral-noded.service",
    ]


def test_ready_reaches_the_notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(tmp_path / "notify"))
        monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
        assert sd_notify.notify("READY=1")
        assert listener.recv(64) == b"READY=1"
    # used once: the daemon's children do not inherit it
    assert not sd_notify.notify("READY=1")


def test_no_notification_without_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not sd_notify.notify("READY=1")
