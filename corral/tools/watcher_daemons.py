"""ganeti-watcher's first job on every node: start the daemons that should
run here and do not, as Ganeti's watcher does with ``daemon-util
check-and-start``: corral-noded on every node of a cluster, corral-masterd
and corral-rapi on the master node (the node the ssconf file ``master_node``
names; Ganeti ensures luxid and RAPI there only).

A daemon is dead when its pid file is not locked by a live process whose
``/proc/<pid>/cmdline`` runs that daemon: a pid left behind and taken by
another program does not count.  A dead daemon is started again from its
start record (:mod:`corral.process.start_record`: the command line and
environment it last started with) through the start path of ``gnt-cluster
init`` (:func:`corral.process.daemons.start_daemon`, which returns once the
daemon serves), so it comes back exactly as it was started.  A live one is
never started again, and the pid file's lock refuses a second copy anyway.
A daemon that systemd runs is systemd's to restart, as daemon-util says.
"""

from __future__ import annotations

import fcntl
import os
import shlex
from collections.abc import Callable

from corral.cli.common import read_ssconf
from corral.paths import Paths
from corral.process import daemons, start_record
from corral.tools.watcher_common import log

NODED = "corral-noded"
MASTERD = "corral-masterd"
RAPI = "corral-rapi"
# How a daemon's process shows in its command line: its module (python -m)
# or one of its commands (Corral's and Ganeti's names).
PROGRAMS = {
    NODED: ("corral.daemons.noded", "corral-noded", "ganeti-noded"),
    MASTERD: ("corral.daemons.masterd", "corral-masterd", "ganeti-luxid", "ganeti-wconfd"),
    RAPI: ("corral.daemons.rapi", "corral-rapi", "ganeti-rapi"),
}
# masterd opens its stores and may replay jobs before it serves.
START_TIMEOUT = 120.0


def live_pid(paths: Paths, name: str) -> int | None:
    """The pid of the running daemon ``name`` of this node, or None if it is dead."""
    pid = daemons.running_pid(paths.pid_file(name))
    return pid if pid is not None and runs(pid, name) else None


def runs(pid: int, name: str) -> bool:
    """Whether the process ``pid`` runs the daemon ``name`` (its /proc cmdline)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    programs = PROGRAMS[name]
    args = raw.decode("utf-8", "replace").split("\0")
    return any(arg in programs or os.path.basename(arg) in programs for arg in args)


def ensure_daemons(paths: Paths) -> list[str]:
    """Start this node's dead daemons (noded first, as ``gnt-cluster init``
    does: masterd asks it); the names of those started again."""
    if not paths.server_pem.exists():
        log.debug("Not a node of a cluster (no %s): no daemons to check", paths.server_pem)
        return []
    master = _MasterCheck(paths)
    wanted: list[tuple[str, Callable[[], bool]]] = [
        (NODED, lambda: True),
        (MASTERD, master),
        (RAPI, master),
    ]
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    with open(paths.run_dir / "ganeti-watcher-daemons.lock", "a") as lock:
        # Watchers that overlap check one after the other: the second finds
        # what the first started alive.
        fcntl.flock(lock, fcntl.LOCK_EX)
        return [
            name
            for name, where in wanted
            if live_pid(paths, name) is None and _restart(paths, name, where)
        ]


def _restart(paths: Paths, name: str, wanted_here: Callable[[], bool]) -> bool:
    """Start the dead daemon ``name`` again if it belongs here; whether it runs now."""
    if not wanted_here():
        return False
    record = start_record.read(paths, name)
    if record is None:
        path = start_record.record_path(paths, name)
        log.error("Daemon %s is not running and cannot be restarted: no record %s", name, path)
        return False
    if record.supervisor == start_record.SYSTEMD:
        log.warning("Daemon %s supervised by systemd but not running, will not restart", name)
        return False
    try:
        daemons.start_daemon(record.argv, record.env, START_TIMEOUT)
    except daemons.DaemonStartError as err:
        log.error("Daemon %s is not running; restarting it failed: %s", name, err.message)
        return False
    pid = live_pid(paths, name)
    log.info("Restarted daemon %s (pid %s): %s", name, pid, shlex.join(record.argv))
    return True


class _MasterCheck:
    """Whether this node is the master, found out only when asked (reading
    the node's certificate costs an import of ``cryptography``)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._answer: bool | None = None

    def __call__(self) -> bool:
        if self._answer is None:
            self._answer = self._is_master()
        return self._answer

    def _is_master(self) -> bool:
        master = read_ssconf(str(self.paths.root), "master_node")
        if not master:
            log.warning("No ssconf file names the master node: masterd and RAPI not checked")
            return False
        from corral.crypto.certs import cert_info

        try:
            own = cert_info(self.paths.server_pem)["subject"]
        except (OSError, ValueError) as err:
            log.error("Cannot read this node's name from %s: %s", self.paths.server_pem, err)
            return False
        return bool(own == master)
