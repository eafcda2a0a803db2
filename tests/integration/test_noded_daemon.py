"""noded as a daemon: readiness, pid file, clear start errors, clean stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from corral.paths import Paths
from corral.process.daemons import DaemonStartError, running_pid
from tests.helpers.noded import (
    NODED,
    daemon_env,
    free_port,
    make_node_root,
    noded_cmd,
    running_noded,
    start_noded,
)
from tests.helpers.waiting import wait_until


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return make_node_root(tmp_path / "node1")


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for its reaper counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


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


def test_missing_certificates_are_reported(paths: Paths) -> None:
    # A root with the cluster CA is in a cluster: without server.pem it cannot serve.
    # (A root without any cluster certificate waits for a join: test_node_join.)
    paths.server_pem.unlink()
    with pytest.raises(DaemonStartError, match=r"^Cannot load .*server\.pem"):
        start_noded(paths)


def test_stop_restart_and_sigterm(paths: Paths) -> None:
    node = start_noded(paths)
    assert node.stop() is True
    assert not paths.pid_file(NODED).exists()
    # The port is free again at once.
    node = start_noded(paths, node.address, node.port)
    pid = node.pid
    assert pid is not None and paths.pid_file(NODED).read_text() == f"{pid}\n"
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: process_gone(pid))
    assert not paths.pid_file(NODED).exists()
    log = paths.daemon_log(NODED).read_text()
    assert "Stopped by signal" in log and f"{NODED} stopped" in log
    assert node.stop() is False  # nothing left to stop


def test_foreground_mode(paths: Paths) -> None:
    port = free_port()
    env = {**os.environ, **daemon_env(paths)}
    proc = subprocess.Popen(
        noded_cmd("127.0.0.1", port, "--foreground", "--debug"),
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: (
                "Ready" in paths.daemon_log(NODED).read_text()
                if paths.daemon_log(NODED).exists()
                else False
            )
        )
        assert running_pid(paths.pid_file(NODED)) == proc.pid
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
    finally:
        proc.kill()
    assert not paths.pid_file(NODED).exists()
    assert "Listening on 127.0.0.1" in proc.stderr.read()  # type: ignore[union-attr]


async def test_stop_lets_short_calls_finish_and_kills_hooks(paths: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "hook-pid"
    directory = paths.hooks_dir / "cluster-verify-post.d"
    directory.mkdir(parents=True)
    script = directory / "sleeper"
    script.write_text(
        f"#!/bin/sh\necho $$ > {marker}.tmp; mv {marker}.tmp {marker}; exec sleep 60\n"
    )
    script.chmod(0o755)
    # The short call: a hook that says it runs, then ends well within the grace period.
    arrived = tmp_path / "short-arrived"
    short_dir = paths.hooks_dir / "cluster-init-post.d"
    short_dir.mkdir(parents=True)
    (short_dir / "short").write_text(f"#!/bin/sh\ntouch {arrived}\nexec sleep 0.3\n")
    (short_dir / "short").chmod(0o755)
    node = start_noded(paths)
    async with node.client() as rpc:
        hooks = asyncio.ensure_future(
            rpc.call_one(*node.target, "hooks_runner", ["cluster-verify", "post", {}])
        )
        await asyncio.to_thread(wait_until, marker.exists)
        short = asyncio.ensure_future(
            rpc.call_one(*node.target, "hooks_runner", ["cluster-init", "post", {}])
        )
        await asyncio.to_thread(wait_until, arrived.exists)
        assert await asyncio.to_thread(node.stop) is True
        short_result, hooks_result = await short, await hooks
    assert not short_result.failed  # finished within the grace period
    assert hooks_result.failed and not hooks_result.offline  # noded went away mid-call
    wait_until(lambda: process_gone(int(marker.read_text())))
