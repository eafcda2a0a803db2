"""noded's side of corral-metad: what a started kvm guest may learn about
itself is published to the node's metad, and withdrawn when the guest goes.

Only an instance with a communication NIC whose start carried its OS
(``osspec``: public and private parameters, see
:func:`corral.cmdlib.instance_utils.start_descriptor`) is published.  metad
runs on demand: the first publication starts it (a daemon of the node, with
its pid file); the node's daemon stop stops it (:func:`corral.bootstrap.stop_daemons`).
A metad that cannot be reached costs the guest its metadata, never its start:
the failure is logged, as Ganeti's master warns and proceeds.

metad keeps what it serves in memory only (private values never reach the
disk), so noded keeps the published records too: when metad dies (noded is
told by a pidfd, at once), noded starts it again and publishes every running
guest anew.  Ganeti's metad lost its data until each instance started again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

from corral import errors
from corral.metad import client
from corral.metad.model import InstanceMetadata, Nic
from corral.node.communication import communication_tap
from corral.node.hypervisor.spec import InstanceSpec
from corral.osdef.spec import OsSpec
from corral.paths import Paths
from corral.process.daemons import DaemonStartError, running_pid, start_daemon

log = logging.getLogger(__name__)

METAD = "corral-metad"


def metadata_of(spec: InstanceSpec) -> InstanceMetadata | None:
    """What metad serves ``spec``'s guest (None: its start carried no OS): as
    its config drive would hold, user-data and SSH keys included."""
    osspec = spec.wire.get("osspec")
    if not isinstance(osspec, dict):
        return None
    nics = tuple(_nic(entry) for entry in spec.wire.get("nics") or ())
    os_spec = OsSpec.from_wire(osspec)  # type: ignore[arg-type]
    return InstanceMetadata.of_instance(spec.name, spec.uuid or spec.name, os_spec, nics)


def _nic(entry: dict[str, Any]) -> Nic:
    network = entry.get("network") or {}
    return Nic(
        mac=str(entry["mac"]),
        ip=entry.get("ip") or None,
        network=network.get("subnet") or None,
        gateway=network.get("gateway") or None,
        name=entry.get("name") or None,
    )


def metad_command() -> list[str]:
    """How noded starts corral-metad: with noded's own Python."""
    return [sys.executable, "-m", "corral.daemons.metad"]


class MetadFeed:
    """Publishes and withdraws the guests of one node; starts metad on
    demand and again whenever it dies while guests are published."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._starting = asyncio.Lock()
        self._records: dict[str, dict[str, Any]] = {}  # what metad must hold
        self._pidfd: int | None = None  # metad's, while noded watches it
        self._reviving: asyncio.Task[None] | None = None

    async def publish(self, spec: InstanceSpec) -> None:
        """Publish ``spec``'s metadata if it has a communication NIC and its OS;
        a failure is logged (the guest runs without its metadata)."""
        found = communication_tap(spec, str(self.paths.root))
        try:
            meta = metadata_of(spec)
        except (errors.OpExecError, KeyError, TypeError, ValueError) as err:
            log.error("Instance %s's metadata is malformed, not published: %s", spec.name, err)
            return
        if found is None or meta is None:
            return
        tap, ip = found
        record = self._records[spec.name] = client.record_of(meta, tap, ip)
        try:
            if not await self._ensure_running():  # a new metad got every record already
                await client.publish(self.paths, record)
        except (DaemonStartError, client.MetadError) as err:
            log.error("Cannot publish instance %s's metadata: %s", spec.name, err)
            return
        log.info("Published instance %s's metadata (%s on %s)", spec.name, ip, tap)

    async def publish_install(self, meta: InstanceMetadata, tap: str, ip: str) -> None:
        """Publish an install's data (a helper VM's): unlike a start's, a failure
        raises (DaemonStartError, MetadError), as the install cannot go on.
        Kept like a guest's: a metad that dies during the install gets it again."""
        record = self._records[meta.name] = client.record_of(meta, tap, ip)
        await self._ensure_running()
        await client.publish(self.paths, record)

    async def withdraw(self, name: str) -> None:
        """Withdraw ``name``'s metadata (and its secrets) if metad runs."""
        self._records.pop(name, None)
        pid_file = self.paths.pid_file(METAD)
        if await asyncio.to_thread(running_pid, pid_file) is None:
            return
        try:
            await client.withdraw(self.paths, name)
        except client.MetadError as err:
            log.error("Cannot withdraw instance %s's metadata: %s", name, err)

    def close(self) -> None:
        """Stop watching metad (noded's stop; metad stops after noded)."""
        self._unwatch()
        if self._reviving is not None:
            self._reviving.cancel()

    async def _ensure_running(self) -> bool:
        """Start metad unless it runs; when started, publish every record to it.
        Returns whether it was started."""
        async with self._starting:
            pid_file = self.paths.pid_file(METAD)
            pid = await asyncio.to_thread(running_pid, pid_file)
            started = pid is None
            if started:
                env = {"CORRAL_ROOT": str(self.paths.root)}
                await asyncio.to_thread(start_daemon, metad_command(), env)
                log.info("Started %s", METAD)
                pid = await asyncio.to_thread(running_pid, pid_file)
                for name, record in list(self._records.items()):
                    try:
                        await client.publish(self.paths, record)
                    except client.MetadError as err:
                        log.error("Cannot publish instance %s's metadata: %s", name, err)
            if pid is not None and self._pidfd is None:
                self._watch(pid)
            return started

    def _watch(self, pid: int) -> None:
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # gone already
            self._metad_exited()
            return
        asyncio.get_running_loop().add_reader(self._pidfd, self._metad_exited)

    def _unwatch(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _metad_exited(self) -> None:
        self._unwatch()
        if self._records and self._reviving is None:
            log.error("%s died; starting it again for %d guests", METAD, len(self._records))
            self._reviving = asyncio.get_running_loop().create_task(self._revive())

    async def _revive(self) -> None:
        try:
            await self._ensure_running()
        except DaemonStartError as err:
            log.error("Cannot start %s again: %s", METAD, err)
        finally:
            self._reviving = None
