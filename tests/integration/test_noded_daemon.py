"""noded as a daemon: readiness, pid file, clear start errors, clean stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corral import constants as C
from corral.daemons.util import DaemonStartError, running_pid
from corral.paths import Paths
from tests.helpers.noded import (
    NODED,
    daemon_env,
    free_port,
    make_node_root,
    noded_cmd,
    running_noded,
    start_noded,
)


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return make_node_root(tmp_path / "node1")


def wait_until(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_second_noded_on_the_same_root_is_refused(paths: Paths) -> None:
    with running_noded(paths) as node:
        with pytest.raises(DaemonStartError) as info:
            start_noded(paths)  # another port: only the pid file stops it
        assert str(info.value) == f"{NODED} is already running (pid {node.pid})"
        assert node.pid is not None  # the first one still runs


def test_port_in_use_is_reported(paths: Paths) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(DaemonStartError) as info:
            start_noded(paths, "127.0.0.1", port)
    assert str(info.value) == f"Cannot listen on 127.0.0.1:{port}: address already in use"
    assert running_pid(paths.pid_file(NODED)) is None
    assert not paths.pid_file(NODED).exists()


def test_missing_certificates_are_reported(tmp_path: Path) -> None:
    with pytest.raises(DaemonStartError, match=r"^Cannot load .*server\.pem"):
        start_noded(Paths(tmp_path))


def test_sigterm_stops_cleanly(paths: Paths) -> None:
    node = start_noded(paths)
    pid = node.pid
    assert pid is not None and paths.pid_file(NODED).read_text() == f"{pid}\n"
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not paths.pid_file(NODED).exists())
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"))
    log = paths.daemon_log(NODED).read_text()
    assert "Stopped by signal" in log and f"{NODED} stopped" in log
    assert node.stop() is False  # nothing left to stop


def test_stop_daemon_and_restart_on_the_same_port(paths: Paths) -> None:
    node = start_noded(paths)
    assert node.stop() is True
    assert not paths.pid_file(NODED).exists()
    again = start_noded(paths, node.address, node.port)
    assert again.stop() is True


def test_foreground_mode(paths: Paths) -> None:
    port = free_port()
    env = {**os.environ, **daemon_env(paths)}
    proc = subprocess.Popen(noded_cmd("127.0.0.1", port, "--foreground", "--debug"), env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "Ready" in paths.daemon_log(NODED).read_text()
                   if paths.daemon_log(NODED).exists() else False)
        assert running_pid(paths.pid_file(NODED)) == proc.pid
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
    finally:
        proc.kill()
    assert not paths.pid_file(NODED).exists()
    assert "Listening on 127.0.0.1" in proc.stderr.read()  # type: ignore[union-attr]


def test_sigterm_kills_running_hooks(paths: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "hook-pid"
    directory = paths.hooks_dir / "cluster-verify-post.d"
    directory.mkdir(parents=True)
    script = directory / "sleeper"
    script.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 60\n")
    script.chmod(0o755)
    node = start_noded(paths)
    code = (
        "import asyncio, sys\n"
        "from corral.rpc.client import RpcClient\n"
        "from corral.paths import Paths\n"
        f"rpc = RpcClient(Paths.from_env(), {node.port})\n"
        f"asyncio.run(rpc.call_one('n', '127.0.0.1', 'hooks_runner', ['cluster-verify', 'post', {{}}]))\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **daemon_env(paths)})
    try:
        wait_until(lambda: marker.exists() and marker.read_text().strip() != "")
        hook_pid = int(marker.read_text())
        assert node.stop() is True
        wait_until(lambda: not os.path.exists(f"/proc/{hook_pid}") or
                   open(f"/proc/{hook_pid}/stat").read().split()[2] == "Z")
    finally:
        caller.kill()
        caller.wait()
    assert C.HKR_FAIL  # the caller's result does not matter; the hook is gone
