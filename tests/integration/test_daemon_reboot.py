"""After a reboot: /var/run (a tmpfs) is empty and no daemon runs; the
watcher (cron or its timer) starts each daemon again from its start record,
and the daemons make their run directories themselves."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from corral.bootstrap import MASTERD, NODED, RAPI
from corral.process.daemons import running_pid, stop_daemon
from tests.helpers.cluster import running_cluster


def test_the_watcher_brings_the_daemons_back_after_a_reboot(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        for daemon in (RAPI, MASTERD, NODED):
            assert stop_daemon(cl.paths, daemon), daemon
        shutil.rmtree(cl.paths.run_dir)
        proc = subprocess.run(
            [sys.executable, "-m", "corral.tools.watcher"],
            env=cl.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        for daemon in (NODED, MASTERD, RAPI):
            assert running_pid(cl.paths.pid_file(daemon)) is not None, daemon
        assert cl.paths.master_socket.exists()
        result = cl.gnt("cluster", "verify")
        assert result.rc == 0, result.stdout + result.stderr
