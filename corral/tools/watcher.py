"""ganeti-watcher: the cluster watcher, run from a timer (or cron) every 5
minutes on every node, with Ganeti 3.0.2's options, state files and
behaviour.  It says what it did in ``var/log/ganeti/watcher.log``, one line
per action.

On every node it starts the node's dead daemons again (noded; on the master
also masterd and corral-rapi: :mod:`corral.tools.watcher_daemons`) and runs
the site's watcher hooks.  On the master it then archives old jobs, cancels
remote imports that stalled past their time-out
(:mod:`corral.tools.watcher_imports`), and, per node group, restarts the
instances that should run and do not (at most ``MAXTRIES`` times in a row,
counted in the group's state file), cleans up after guests their users shut
down, activates the mirrored disks of instances whose secondary node
rebooted or whose copy is outdated (:mod:`corral.tools.watcher_disks`), and
records each node's boot id.

A paused watcher (``gnt-cluster watcher pause``) does nothing unless told
``--ignore-pause``.  The pause lives in masterd's durable state; the watcher
keeps the last one it read in ``watcher.pause-seen`` so that it holds while
masterd is down too (a stopped masterd is not started during a pause).  The
other nodes cannot ask masterd (Ganeti copies the pause file to every node):
their watcher starts a dead noded even during a pause.

Unlike Ganeti's, the per-group watchers run one after the other in this
process instead of forked children, so ``--no-wait-children`` changes
nothing.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import re
import subprocess
import sys
import time
from typing import Any

from corral import __version__, errors
from corral import constants as C
from corral.cli import common
from corral.cli.optvalues import parse_timespec
from corral.luxi.client import Client
from corral.paths import Paths
from corral.tools import watcher_daemons, watcher_disks, watcher_imports
from corral.tools.watcher_common import log, submit
from corral.tools.watcher_disks import HELPLESS_STATES, InstanceRow, NodeRow
from corral.tools.watcher_state import StateLocked, WatcherState

MAXTRIES = 5
# An instance in a bad state is restarted; one on a dead node cannot be helped.
BAD_STATES = frozenset({"ERROR_down"})
# run-parts' rule for the names of the hooks it runs (Ganeti's RunParts).
_HOOK_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_UUID = re.compile(r"^[a-f\d]{8}-[a-f\d]{4}-[a-f\d]{4}-[a-f\d]{4}-[a-f\d]{12}$")
HOOK_TIMEOUT = 3600


class NotMaster(Exception):
    """This node is not the master."""


def build_parser() -> argparse.ArgumentParser:
    """Ganeti's options of ganeti-watcher."""
    parser = argparse.ArgumentParser(prog="ganeti-watcher", description="Ganeti cluster watcher")
    parser.add_argument("--version", action="version", version=f"%(prog)s (corral) {__version__}")
    parser.add_argument("-d", "--debug", action="store_true", help="Turn debugging on")
    parser.add_argument("-g", "--node-group", dest="nodegroup", help="Node group (name or uuid)")
    parser.add_argument(
        "-A",
        "--job-age",
        default="21600",
        help="Autoarchive jobs older than this age (default 6 hours)",
    )
    parser.add_argument("--ignore-pause", action="store_true", help="Ignore cluster pause setting")
    parser.add_argument("--wait-children", dest="wait_children", action="store_true", default=True)
    parser.add_argument("--no-wait-children", dest="wait_children", action="store_false")
    parser.add_argument("--no-verify-disks", action="store_true", help="Do not verify disk status")
    parser.add_argument("--rapi-ip", default="127.0.0.1", help="Use this IP to talk to RAPI.")
    parser.add_argument(
        "--remote-import-timeout",
        default=str(watcher_imports.DEFAULT_TIMEOUT),
        help="Cancel remote imports idle for longer than this (default 1 day, the life of"
        " a move's certificates; Corral's option)",
    )
    parser.add_argument("args", nargs="*")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options given, checked."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    if opts.args:
        parser.error("No arguments expected")
    try:
        opts.job_age = parse_timespec(opts.job_age)
        opts.remote_import_timeout = parse_timespec(opts.remote_import_timeout)
    except errors.OpPrereqError as err:
        parser.error(str(err.args[0]))
    if opts.remote_import_timeout <= 0:
        parser.error("--remote-import-timeout must be a positive time")
    return opts


def _setup_logging(paths: Paths, debug: bool) -> None:
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [logging.FileHandler(paths.log_dir / "watcher.log")]
    if debug:
        handlers.append(logging.StreamHandler(sys.stderr))
    fmt = "%(asctime)s: ganeti-watcher pid=%(process)d %(levelname)s %(message)s"
    for handler in handlers:
        handler.setFormatter(logging.Formatter(fmt))
        log.addHandler(handler)
    log.setLevel(logging.DEBUG if debug else logging.INFO)


def run_hooks(paths: Paths) -> None:
    """The site's watcher hooks (``hooks/watcher/``), as run-parts runs them."""
    hooks = paths.hooks_dir / C.HOOKS_NAME_WATCHER
    if not hooks.is_dir():
        return
    for path in sorted(hooks.iterdir()):
        if not _HOOK_NAME.match(path.name) or not os.access(path, os.X_OK) or path.is_dir():
            log.debug("Watcher hook %s: skipped", path.name)
            continue
        try:
            done = subprocess.run(
                [str(path)], capture_output=True, text=True, timeout=HOOK_TIMEOUT,
                env={"PATH": C.HOOKS_PATH}, cwd="/", check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            log.warning("Watcher hook %s: error (%s)", path.name, err)
            continue
        output = (done.stdout + done.stderr).strip()
        if done.returncode:
            log.warning(
                "Watcher hook %s: failed (exit: %d) (output: %s)",
                path.name,
                done.returncode,
                output,
            )
        else:
            log.debug("Watcher hook %s: success (output: %s)", path.name, output)


def global_watcher(paths: Paths, opts: argparse.Namespace, client: Client) -> None:
    """Archive old jobs, cancel stale remote imports, then watch every node group."""
    archived, left = client.call("AutoArchiveJobs", opts.job_age, C.LUXI_WFJC_TIMEOUT)
    log.debug("Archived %s jobs, left %s", archived, left)
    watcher_imports.remove_stale_imports(client, opts.remote_import_timeout)
    for name, uuid in client.call("QueryGroups", [], ["name", "uuid"], False):
        log.debug("Watching group %r (%s)", name, uuid)
        try:
            group_watcher(paths, opts, client, uuid)
        except StateLocked as err:
            log.error("%s", err)


def group_watcher(paths: Paths, opts: argparse.Namespace, client: Client, uuid: str) -> None:
    """Restart, clean up and check what one node group holds."""
    uuid = uuid.lower()
    if not _UUID.match(uuid):
        raise errors.GenericError(
            f"Node group parameter (--node-group) must be given a UUID, got '{uuid}'"
        )
    log.info("Watcher for node group '%s'", uuid)
    state = WatcherState(str(paths.data_dir / f"watcher.{uuid}.data"))
    try:
        nodes, instances, locked = _group_data(client, uuid)
        statuses = {name: inst.status for name, inst in instances.items()}
        _write_status(paths.data_dir / f"watcher.{uuid}.instance-status", statuses)
        _merge_status(paths, client)
        started = _check_instances(client, state, instances, locked)
        watcher_disks.check_boot_ids(client, state, nodes, instances, started)
        if not opts.no_verify_disks:
            watcher_disks.verify_disks(client, uuid, nodes, instances)
    except BaseException as err:
        log.info("Not updating status file due to failure: %s", err)
        state.close()
        raise
    state.save()


def _group_data(
    client: Client, uuid: str
) -> tuple[list[NodeRow], dict[str, InstanceRow], set[str]]:
    """The group's nodes, its instances by name, and the instances locked now."""
    locks = client.query("lock", ["name", "mode"])["data"]
    locked = {
        name.removeprefix("instance/")
        for (_, name), (_, mode) in locks
        if name.startswith("instance/") and mode
    }
    fields = ["name", "status", "admin_state", "admin_state_source", "disks_active", "snodes"]
    rows = client.query("instance", fields, ["=", "pnode.group.uuid", uuid])["data"]
    instances = {row[0][1]: InstanceRow(*(cell[1] for cell in row[1:])) for row in rows}
    nodes = client.query("node", ["name", "bootid", "offline"], ["=", "group.uuid", uuid])
    return [NodeRow(*(cell[1] for cell in row)) for row in nodes["data"]], instances, locked


def _write_status(path: Any, statuses: dict[str, str]) -> None:
    """The ``<instance> <status>`` lines of Ganeti's instance status file."""
    lines = "\n".join(f"{name} {status}" for name, status in sorted(statuses.items()))
    tmp = f"{path}.new"
    with open(tmp, "w") as handle:
        handle.write(lines)
    os.replace(tmp, path)


def _merge_status(paths: Paths, client: Client) -> None:
    """Every group's status file merged into the cluster's, newest line winning."""
    latest: dict[str, tuple[float, str]] = {}
    for (uuid,) in client.call("QueryGroups", [], ["uuid"], False):
        path = paths.data_dir / f"watcher.{uuid}.instance-status"
        try:
            mtime, text = path.stat().st_mtime, path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            name, _, status = line.partition(" ")
            if name and (name not in latest or latest[name][0] < mtime):
                latest[name] = (mtime, status)
    merged = {name: status for name, (_, status) in latest.items()}
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    target = paths.run_dir / "instance-status"
    with open(target, "a"):
        pass
    with open(target) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _write_status(target, merged)


def _check_instances(
    client: Client, state: WatcherState, instances: dict[str, InstanceRow], locked: set[str]
) -> set[str]:
    """Restart the instances that should run; clean up after user shutdowns.
    The instances the watcher tried to start."""
    state.maintain(list(instances))
    started = set()
    for name, inst in sorted(instances.items()):
        if inst.status == "USER_down" and inst.admin_state != "down":
            _clean_up(client, state, name, locked)
        elif inst.status in BAD_STATES:
            if _restart(client, state, name):
                started.add(name)
        elif state.restart_attempts(name):
            state.forget(name)
            if inst.status not in HELPLESS_STATES:
                log.info("Restart of instance '%s' succeeded", name)
    return started


def _restart(client: Client, state: WatcherState, name: str) -> bool:
    """Start the instance, unless it failed too often; whether it was tried."""
    attempts = state.restart_attempts(name)
    if attempts > MAXTRIES:
        log.warning("Not restarting instance '%s', retries exhausted", name)
        return False
    if attempts == MAXTRIES:
        state.record_restart(name)
        log.error("Could not restart instance '%s' after %s attempts, giving up", name, MAXTRIES)
        return False
    log.info("Restarting instance '%s' (attempt #%s)", name, attempts + 1)
    op = {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": name, "force": False}
    try:
        submit(client, op, f"Restarting instance {name}")
    except errors.GenericError as err:
        log.error("Error while restarting instance '%s': %s", name, err)
    state.record_restart(name)
    return True


def _clean_up(client: Client, state: WatcherState, name: str, locked: set[str]) -> None:
    """Record the shutdown of a guest its user shut down (Ganeti's cleanup)."""
    if name in locked:
        log.info("Not cleaning up instance '%s', instance is locked", name)
        return
    if state.cleanup_attempts(name) > MAXTRIES:
        log.warning("Not cleaning up instance '%s', retries exhausted", name)
        return
    log.info("Instance '%s' was shutdown by the user, cleaning up instance", name)
    op = {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": name, "admin_state_source": "user"}
    try:
        submit(client, op, f"Cleaning up instance {name}")
    except errors.GenericError as err:
        log.error("Error while cleaning up instance '%s': %s", name, err)
        state.record_cleanup(name)
        return
    state.forget(name)


def _watch(paths: Paths, opts: argparse.Namespace) -> int:
    try:
        client = common.get_client()
    except (errors.NoMasterError, errors.NotClusterError):
        # A node that holds no configuration (not a master candidate) is no master.
        if opts.nodegroup is not None:
            raise NotMaster("Not on master node") from None
        return C.EXIT_SUCCESS  # nothing but the daemons and hooks to do on other nodes
    with client:
        if opts.nodegroup is None:
            global_watcher(paths, opts, client)
        else:
            group_watcher(paths, opts, client, opts.nodegroup)
    return C.EXIT_SUCCESS


def paused(paths: Paths) -> bool:
    """Whether the watcher is paused: as masterd says, else (masterd down or
    standing by) as it last said on this node."""
    seen = paths.watcher_pause_seen  # masterd also sends it to every node
    try:
        with common.get_client() as client:
            (until,) = client.call("QueryConfigValues", ["watcher_pause"])
    except errors.GenericError as err:
        log.debug("Cannot ask masterd for the pause (%s); going by the last one seen", err)
        try:
            return float(seen.read_text()) > time.time()
        except (OSError, ValueError):
            return False
    try:
        if until is None:
            seen.unlink(missing_ok=True)
        else:
            tmp = seen.with_name(f"{seen.name}.new")
            tmp.write_text(f"{until}\n")
            os.replace(tmp, seen)
    except OSError as err:
        log.warning("Cannot keep the pause in %s (it holds only while masterd runs): %s", seen, err)
    return until is not None


def main(argv: list[str] | None = None) -> int:
    """Run the watcher once; Ganeti's exit codes."""
    opts = parse_args(argv)
    paths = Paths.from_env()
    _setup_logging(paths, opts.debug)
    if not opts.ignore_pause and paused(paths):
        log.debug("Pause has been set, exiting")
        return C.EXIT_SUCCESS
    lock_path = paths.run_dir / "ganeti-watcher.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError as err:
            log.error("Can't acquire lock on %s: %s", lock_path, err)
            return C.EXIT_SUCCESS
        try:
            if opts.nodegroup is None:
                watcher_daemons.ensure_daemons(paths)
                run_hooks(paths)
            return _watch(paths, opts)
        except NotMaster:
            log.debug("Not master, exiting")
            return C.EXIT_NOTMASTER
        except (errors.JobQueueFull, errors.JobQueueDrainError) as err:
            log.error("Job queue cannot take the watcher's jobs: %s", err)
            return C.EXIT_SUCCESS
        except (errors.GenericError, StateLocked, OSError) as err:
            log.exception("%s", err)
            return C.EXIT_FAILURE


def cli() -> None:
    """Entry point of ``ganeti-watcher``."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
