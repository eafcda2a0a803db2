"""The daemons open their logs again on SIGHUP (logrotate's postrotate, as
Ganeti's daemon-util rotate-all-logs): the rotated file gets nothing more,
the new one gets the lines and the daemon's stdout and stderr (corral-rapi's
too, which runs as gnt-rapi by then)."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

from corral.bootstrap import MASTERD, NODED, RAPI
from corral.process.daemons import running_pid
from tests.helpers.cluster import running_cluster
from tests.helpers.waiting import wait_until

REOPENED = "Log files opened again"


def _says(log: Path, text: str) -> bool:
    return text in log.read_text()


def _traversable(path: Path) -> None:
    """Let every user through ``path``'s directories, as through /var/log in
    production (corral-rapi opens its log again as gnt-rapi; pytest's
    temporary directories are private)."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if mode & 0o001 == 0:
            parent.chmod(mode | 0o001)


def test_sighup_opens_the_logs_again(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        _traversable(cl.paths.daemon_log(RAPI))
        for daemon in (MASTERD, NODED, RAPI):
            log = cl.paths.daemon_log(daemon)
            rotated = log.with_name(log.name + ".1")
            pid = running_pid(cl.paths.pid_file(daemon))
            assert pid is not None, daemon
            log.rename(rotated)
            # As logrotate's "create": a new file of the old one's owner and mode.
            old = rotated.stat()
            log.touch(mode=0o600)
            os.chown(log, old.st_uid, old.st_gid)
            os.chmod(log, old.st_mode & 0o777)
            os.kill(pid, signal.SIGHUP)
            wait_until(functools.partial(_says, log, REOPENED), 30, daemon)
            assert REOPENED not in rotated.read_text(), daemon
            for fd in (1, 2):
                assert os.readlink(f"/proc/{pid}/fd/{fd}") == str(log), (daemon, fd)
            assert running_pid(cl.paths.pid_file(daemon)) == pid, daemon
        result = cl.gnt("cluster", "info")  # the daemons go on
        assert result.rc == 0, result.stderr
