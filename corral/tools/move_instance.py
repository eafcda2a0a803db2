"""move-instance: move instances from one cluster to another through both
clusters' RAPI (the 2.2 design's inter-cluster moves), as Ganeti 3.0.2's
tool does, with Corral's client (standard library HTTP).

Per instance, two threads: the source side reads the instance and prepares a
remote export (the signed handshake, key name and certificate); the
destination side creates the instance in ``remote-import`` mode and hands the
job's ``remote-import`` log entry (its signed certificate and disk addresses)
back; the source side then exports to those addresses.  When one side fails
the other stops: it stops waiting, and its job, if one runs, is cancelled
(``gnt-job cancel --kill``), so that neither cluster is left with a half
import or a waiting export.  The source instance is removed only after a
successful export, and not at all with ``--keep-source-instance``.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from corral import constants as C
from corral import errors
from corral.rapi.client import RapiClient, RapiError
from corral.tools import move_options as O
from corral.tools.move_jobs import JobFailed, cancel_job, error_text, follow_job

log = logging.getLogger("move-instance")

ClientFactory = Callable[[], RapiClient]
# The creation mode (Ganeti's constants.INSTANCE_REMOTE_IMPORT).
REMOTE_IMPORT = "remote-import"
# Ganeti varies the opportunistic delay by up to this fraction, both ways.
_DELAY_VARIATION = 0.15


class Abort(errors.GenericError):
    """The other side of the move failed: stop this one."""


class MoveRuntime:
    """What the two sides of one move share, guarded by one condition."""

    def __init__(self, move: O.InstanceMove) -> None:
        self.move = move
        self.changed = threading.Condition()
        self.src_error: str | None = None
        self.dest_error: str | None = None
        self.src_instinfo: dict[str, Any] | None = None
        self.src_expinfo: dict[str, Any] | None = None
        self.dest_impinfo: dict[str, Any] | None = None
        # The job each side runs now (None: none), for the other side to cancel.
        self.jobs: dict[str, tuple[ClientFactory, int] | None] = {"src": None, "dest": None}
        self.cancelled: set[tuple[str, int]] = set()  # (side, job id): cancelled once

    def check_abort(self) -> None:
        """Abort if either side has failed."""
        if self.src_error is not None or self.dest_error is not None:
            raise Abort("Aborted")

    def wait_for(self, ready: Callable[[], bool]) -> None:
        """Block until ``ready()``; Abort when a side fails first."""
        with self.changed:
            while not ready():
                self.check_abort()
                self.changed.wait()

    def publish(self, **values: Any) -> None:
        """Set attributes and wake the other side."""
        with self.changed:
            for name, value in values.items():
                setattr(self, name, value)
            self.changed.notify_all()

    def set_job(self, side: str, job: tuple[ClientFactory, int] | None) -> None:
        with self.changed:
            self.jobs[side] = job

    def run_side(self, side: str, body: Callable[[], None], other: str) -> None:
        """Run one side; on failure record why, wake the other side and cancel
        its running job."""
        try:
            body()
            return
        except Abort:
            message = "Aborted"
        except (errors.GenericError, RapiError, OSError) as err:
            message = error_text(err)
        except Exception as err:  # a bug: say so, with the traceback in the debug log
            log.debug("Unexpected error", exc_info=True)
            message = f"Unexpected error: {err!r}"
        log.error("%s side of %s: %s", side, self.move.label, message)
        with self.changed:
            setattr(self, f"{side}_error", message)
            running = self.jobs[other] if message != "Aborted" else None
            if running is not None:
                self.cancelled.add((other, running[1]))
            self.changed.notify_all()
        if running is not None:
            factory, job_id = running
            with factory() as client:
                cancel_job(client, job_id)

    def cancel_own(self, side: str, client: RapiClient, job_id: int) -> None:
        """Cancel a job of ``side`` unless the other side did already."""
        with self.changed:
            if (side, job_id) in self.cancelled:
                return
            self.cancelled.add((side, job_id))
        cancel_job(client, job_id)


def _run_job(mrt: MoveRuntime, side: str, factory: ClientFactory, client: RapiClient,
             job_id: int, remote_import: Any = None) -> list[Any]:  # fmt: skip
    """Follow one job of ``side``, registered so that the other side can cancel
    it; if the other side fails first, or following it fails, cancel it here
    (a job left running would hold its instance, or wait for a peer in vain)."""
    mrt.set_job(side, (factory, job_id))
    try:
        return follow_job(client, job_id, mrt.check_abort, remote_import)
    except JobFailed:
        raise  # it has ended
    except (errors.GenericError, RapiError):  # Abort, or a bad log entry, or RAPI gone
        mrt.cancel_own(side, client, job_id)
        raise
    finally:
        mrt.set_job(side, None)


def source_side(mrt: MoveRuntime, factory: ClientFactory) -> None:
    """Read and prepare the instance, wait for the destination, export."""
    name = mrt.move.src_instance_name
    with factory() as client:
        log.info("Checking whether instance exists")
        try:
            client.get_instance(name)
        except RapiError as err:
            if err.code == 404:
                raise errors.OpPrereqError(f"Instance {name} not found ({err})") from None
            raise
        log.info("Retrieving instance information from source cluster")
        result = _run_job(mrt, "src", factory, client, client.get_instance_info(name, static=True))
        instinfo = next(iter(result[0].values()))
        log.info("Preparing export on source cluster")
        job = client.prepare_export(name, C.EXPORT_MODE_REMOTE)
        expinfo = _run_job(mrt, "src", factory, client, job)[0]
        mrt.publish(src_instinfo=instinfo, src_expinfo=expinfo)
        log.info("Waiting for destination information to become available")
        mrt.wait_for(lambda: mrt.dest_impinfo is not None)
        assert mrt.dest_impinfo is not None
        log.info("Starting remote export on source cluster")
        job = client.export_instance(
            name,
            C.EXPORT_MODE_REMOTE,
            mrt.dest_impinfo["disks"],
            shutdown=True,
            remove_instance=not mrt.move.keep_source_instance,
            x509_key_name=expinfo["x509_key_name"],
            destination_x509_ca=mrt.dest_impinfo["x509_ca"],
            compress=mrt.move.compress,
            # A kept instance is started again after the export; without
            # snapshots it stays down meanwhile, which the export must be told.
            long_sleep=True if mrt.move.keep_source_instance else None,
        )
        finished, disks = _run_job(mrt, "src", factory, client, job)[0]
        if not (finished and all(disks)):
            failed = ", ".join(str(i) for i, ok in enumerate(disks) if not ok)
            raise errors.OpExecError(f"Export failed for disks {failed}")
        log.info("Export successful")


def dest_side(mrt: MoveRuntime, factory: ClientFactory) -> None:
    """Create the instance in remote-import mode, opportunistically first if asked."""
    log.debug("Waiting for instance information to become available")
    mrt.wait_for(lambda: mrt.src_instinfo is not None and mrt.src_expinfo is not None)
    move = mrt.move
    log.info("Creating instance %s in remote-import mode", move.dest_instance_name)
    attempts = [True] * move.opportunistic_tries + [False]
    with factory() as client:
        for opportunistic in attempts:
            body = creation_body(move, mrt.src_instinfo or {}, mrt.src_expinfo or {})
            job = client.create_instance(**body, opportunistic_locking=opportunistic)
            try:
                _run_job(mrt, "dest", factory, client, job,
                         lambda info: mrt.publish(dest_impinfo=info))  # fmt: skip
            except JobFailed as err:
                code = err.error.args[1] if len(err.error.args) > 1 else None
                if not opportunistic or code != C.ECODE_TEMP_NORES:
                    raise
                delay = move.opportunistic_delay * random.uniform(
                    1 - _DELAY_VARIATION, 1 + _DELAY_VARIATION
                )
                log.info("Opportunistic attempt unsuccessful, waiting %.2f seconds"
                         " before another creation attempt is made", delay)  # fmt: skip
                time.sleep(delay)  # the user asked for this pause between attempts
                continue
            log.info("Import successful")
            return


def creation_body(
    move: O.InstanceMove, instance: dict[str, Any], expinfo: dict[str, Any]
) -> dict[str, Any]:
    """CreateInstance's arguments for the destination, from the source
    instance's static information and the prepared export."""
    disks = []
    for disk in instance["disks"]:
        spec = {"size": disk["size"], "mode": disk["mode"]}
        # Ganeti's tool sends str(None), naming unnamed disks "None"; not so here.
        for key in ("name", "spindles"):
            if disk.get(key) is not None:
                spec[key] = disk[key]
        disks.append(spec)
    nics = []
    for nic in instance["nics"]:
        nic_name, _uuid, ip, mac, mode, link, vlan, network, _info = nic
        nics.append({"ip": ip, "mac": mac, "mode": mode, "link": link, "vlan": vlan,
                     "network": network, "name": nic_name})  # fmt: skip
    if len(move.nics) > len(nics):
        raise errors.OpPrereqError("Can not create new NICs")
    for index, override in enumerate(move.nics):
        nics[index] = {**nics[index], **override}
    return {
        "mode": REMOTE_IMPORT,
        "name": move.dest_instance_name,
        "disk_template": move.dest_disk_template or instance["disk_template"],
        "disks": disks,
        "nics": nics,
        # An instance without an OS has "" (the destination takes None for that).
        "os": instance.get("os") or None,
        "pnode": move.dest_pnode,
        "snode": move.dest_snode,
        "start": instance["config_state"] == "up",
        "ip_check": False,
        # Ganeti's move-instance always checks the name; Corral's may not.
        "name_check": move.name_check,
        "iallocator": move.dest_iallocator,
        "hypervisor": instance["hypervisor"],
        "source_handshake": expinfo["handshake"],
        "source_x509_ca": expinfo["x509_ca"],
        "compress": move.compress,
        "source_instance_name": instance["name"],
        "beparams": {**instance.get("be_instance", {}), **move.beparams},
        "hvparams": {**instance.get("hv_instance", {}), **move.hvparams},
        "osparams": {**instance.get("os_instance", {}), **move.osparams},
    }


def run_move(move: O.InstanceMove, src: ClientFactory, dest: ClientFactory) -> None:
    """Move one instance; its ``error_message`` says what failed, if anything."""
    log.info("Preparing to move %s", move.label)
    mrt = MoveRuntime(move)
    dest_thread = threading.Thread(
        target=mrt.run_side,
        args=("dest", lambda: dest_side(mrt, dest), "src"),
        name=f"Dest-{move.dest_instance_name}",
    )
    dest_thread.start()
    try:
        mrt.run_side("src", lambda: source_side(mrt, src), "dest")
    finally:
        dest_thread.join()
    if mrt.src_error is not None or mrt.dest_error is not None:
        move.error_message = f"Source error: {mrt.src_error}, destination error: {mrt.dest_error}"


class Clusters:
    """The RAPI clients of the two clusters (a new one per use: one per thread)."""

    def __init__(self, opts: argparse.Namespace, src: str, dest: str) -> None:
        password = O.read_password(opts.src_password_file) if opts.src_password_file else None
        dest_password = (
            O.read_password(opts.dest_password_file) if opts.dest_password_file else password
        )
        dest_user = opts.dest_username if opts.dest_username is not None else opts.src_username
        src_args = (src, opts.src_rapi_port, opts.src_username, password, opts.src_ca_file)
        dest_ca = opts.dest_ca_file or opts.src_ca_file
        dest_args = (dest, opts.dest_rapi_port, dest_user, dest_password, dest_ca)
        self.src: ClientFactory = lambda: RapiClient(*src_args)
        self.dest: ClientFactory = lambda: RapiClient(*dest_args)

    def check(self) -> bool:
        """Both answer (their RAPI versions logged); whether the destination
        has a default instance allocator."""
        with self.src() as client:
            log.info("Connecting to source RAPI server")
            log.info("Source cluster RAPI version: %s", client.get_version())
        with self.dest() as client:
            log.info("Connecting to destination RAPI server")
            log.info("Destination cluster RAPI version: %s", client.get_version())
            return bool(client.get_info().get("default_iallocator"))


def setup_logging(debug: int, verbose: bool) -> None:
    """Ganeti's tool logging: to standard error, warnings only unless asked."""
    level = "%(levelname)s " if debug or verbose else ""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s: %(threadName)s {level}%(message)s"))
    handler.setLevel(logging.NOTSET if debug else logging.INFO if verbose else logging.WARNING)
    root = logging.getLogger()
    root.setLevel(logging.NOTSET)
    root.addHandler(handler)


def _fail(message: str) -> int:
    sys.stderr.write(f"move-instance: error: {message}\n")
    return C.EXIT_FAILURE


def build_parser() -> O.Parser:
    """The options, under the name the tool was run as."""
    prog = os.path.basename(sys.argv[0])
    if not prog or prog.endswith(".py"):  # run as python -m corral.tools.move_instance
        prog = "move-instance"
    return O.build_parser(prog)


def main(argv: list[str] | None = None) -> int:
    """Parse, check, move every instance (``--parallel`` at a time); the exit code."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    setup_logging(opts.debug, opts.verbose)
    src, dest, names = O.check_options(parser, opts)
    log.info("Source cluster: %s", src)
    log.info("Destination cluster: %s", dest)
    log.info("Instances to be moved: %s", ", ".join(names))
    try:
        clusters = Clusters(opts, src, dest)
        has_iallocator = bool(opts.iallocator) or clusters.check()
    except (errors.GenericError, RapiError, OSError, ValueError) as err:
        return _fail(error_text(err))
    if len(names) > 1 and not has_iallocator:
        return _fail(
            "When moving multiple nodes, an iallocator must be used. None was provided and"
            " the target cluster does not have a default iallocator."
        )
    if len(names) == 1 and not (has_iallocator or opts.dest_primary_node
                                or opts.dest_secondary_node):  # fmt: skip
        return _fail(
            "Target cluster does not have a default iallocator, please specify either"
            " destination nodes or an iallocator."
        )
    moves = O.moves_of(opts, names)
    with ThreadPoolExecutor(opts.parallel, thread_name_prefix="Move") as pool:
        list(pool.map(lambda move: run_move(move, clusters.src, clusters.dest), moves))
    return report(moves)


def report(moves: list[O.InstanceMove]) -> int:
    """Log each move's outcome (failures always shown); the exit code."""
    log.info("Instance move results:")
    for move in moves:
        if move.error_message:
            log.error("%s: Failed (%s)", move.label, move.error_message)
        else:
            log.info("%s: Success", move.label)
    return C.EXIT_FAILURE if any(m.error_message for m in moves) else C.EXIT_SUCCESS


def cli() -> None:
    """The console script."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
