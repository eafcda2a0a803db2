"""noded's side of corral-metad: what a started kvm guest may learn about
itself is published to the node's metad, and withdrawn when the guest goes.

Only an instance with a communication NIC whose start carried its OS
(``osspec``: public and private parameters, see
:func:`corral.cmdlib.instance_utils.start_descriptor`) is published.  metad
runs on demand: the first publication starts it (a daemon of the node, with
its pid file); the node's daemon stop stops it (:func:`corral.bootstrap.stop_daemons`).
A metad that cannot be reached costs the guest its metadata, never its start:
the failure is logged, as Ganeti's master warns and proceeds.
"""

from __future__ import annotations

import asyncio
import logging
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
    """What metad serves ``spec``'s guest (None: its start carried no OS)."""
    osspec = spec.wire.get("osspec")
    if not isinstance(osspec, dict):
        return None
    return InstanceMetadata(
        name=spec.name,
        uuid=spec.uuid or spec.name,
        hostname=spec.name,
        os=OsSpec.from_wire(osspec),  # type: ignore[arg-type]
        nics=tuple(_nic(entry) for entry in spec.wire.get("nics") or ()),
    )


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
    """Publishes and withdraws the guests of one node; starts metad once."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._starting = asyncio.Lock()

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
        try:
            await self._ensure_running()
            await client.publish(self.paths, client.record_of(meta, tap, ip))
        except (DaemonStartError, client.MetadError) as err:
            log.error("Cannot publish instance %s's metadata: %s", spec.name, err)
            return
        log.info("Published instance %s's metadata (%s on %s)", spec.name, ip, tap)

    async def publish_install(self, meta: InstanceMetadata, tap: str, ip: str) -> None:
        """Publish an install's data (a helper VM's): unlike a start's, a failure
        raises (DaemonStartError, MetadError), as the install cannot go on."""
        await self._ensure_running()
        await client.publish(self.paths, client.record_of(meta, tap, ip))

    async def withdraw(self, name: str) -> None:
        """Withdraw ``name``'s metadata (and its secrets) if metad runs."""
        pid_file = self.paths.pid_file(METAD)
        if await asyncio.to_thread(running_pid, pid_file) is None:
            return
        try:
            await client.withdraw(self.paths, name)
        except client.MetadError as err:
            log.error("Cannot withdraw instance %s's metadata: %s", name, err)

    async def _ensure_running(self) -> None:
        async with self._starting:
            pid_file = self.paths.pid_file(METAD)
            if await asyncio.to_thread(running_pid, pid_file) is not None:
                return
            env = {"CORRAL_ROOT": str(self.paths.root)}
            await asyncio.to_thread(start_daemon, metad_command(), env)
            log.info("Started %s", METAD)
