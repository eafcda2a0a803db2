"""The hypervisor interface every backend implements.

Every operation is a coroutine: a real hypervisor talks to processes and
monitors, and noded's event loop must never wait on one.  Instances arrive
typed (:class:`~corral.node.hypervisor.spec.InstanceSpec`); operations that
Ganeti's calls make by name (shutdown, info) take the name.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from corral import errors
from corral import hvparams as hvparams_table
from corral.node.hypervisor.spec import ConsoleInfo, InstanceInfo, InstanceSpec, MirrorFault
from corral.node.storage.mirrored import Link as MirrorLink
from corral.paths import Paths

# Ganeti's reboot types (INSTANCE_REBOOT_*).
REBOOT_SOFT = "soft"
REBOOT_HARD = "hard"
REBOOT_FULL = "full"


class Hypervisor(ABC):
    """Starts, stops and reports instances on one node."""

    NAME = ""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @classmethod
    def problem(cls, paths: Paths) -> str | None:
        """Why this node cannot run this hypervisor (a program missing, ...), or None."""
        return None

    async def resume(self) -> None:
        """Called once when noded starts: take up the instances that kept running
        while it was down (reconnect to their monitors).  Nothing by default."""
        return None

    async def close(self) -> None:
        """Called when noded stops: let go of monitors; instances keep running."""
        return None

    # Life cycle
    @abstractmethod
    async def start(self, spec: InstanceSpec, paused: bool = False) -> None:
        """Start the instance; OpExecError if it is running already or cannot start."""

    @abstractmethod
    async def stop(self, name: str, timeout: int = 120, force: bool = False) -> None:
        """Stop the instance: cleanly (ACPI) within ``timeout`` seconds, then hard;
        at once if ``force``.  Stopping one that is not running is not an error."""

    @abstractmethod
    async def reboot(self, spec: InstanceSpec, kind: str, timeout: int) -> None:
        """Reboot a running instance (``REBOOT_SOFT`` or ``REBOOT_HARD``; a full
        reboot is a stop and a start, done by the master)."""

    @abstractmethod
    async def instances_info(self, names: Iterable[str] | None = None) -> list[InstanceInfo]:
        """The instances this hypervisor runs (of ``names``, if given), including
        those a guest stopped itself (state ``shutdown``)."""

    @abstractmethod
    async def node_info(self) -> dict[str, Any]:
        """Memory as the hypervisor sees it: ``memory_total``, ``memory_free``,
        ``memory_dom0``, ``instances_memory`` (MiB)."""

    async def rename(self, old: str, new: str) -> None:
        """Follow an instance rename (only stopped instances are renamed)."""
        if old in {info.name for info in await self.instances_info([old])}:
            raise errors.OpExecError(f"Instance '{old}' is running; stop it before a rename")

    async def console(self, spec: InstanceSpec, node_name: str) -> ConsoleInfo:
        """How to reach the console of the instance running on ``node_name``."""
        return ConsoleInfo(spec.name, "msg", message=f"The {self.NAME} hypervisor has no console")

    def serial_socket(self, name: str) -> Path | None:
        """The unix socket of the running instance's serial console (what noded's
        console relay connects to), or None if it has none."""
        return None

    async def verify(self) -> list[str]:
        """Problems of this hypervisor on this node (``gnt-cluster verify``)."""
        problem = self.problem(self.paths)
        return [problem] if problem else []

    async def validate_params(self, hvparams: Mapping[str, Any]) -> list[str]:
        """What is wrong with the filled ``hvparams`` on this node (Ganeti's
        ValidateParameters: files, users, what the hypervisor program offers)."""
        return await asyncio.to_thread(hvparams_table.node_problems, self.NAME, hvparams)

    # Mirrored disks (corral.node.hypervisor.kvm.guest_mirrors): only guests
    # writing through QEMU's quorum have them.
    MIRRORS = False

    async def mirror_faults(self, wait: float) -> list[MirrorFault]:
        """The guests' mirrored disks whose secondary failed; waits up to
        ``wait`` seconds for one."""
        return []

    async def mirror_degrade(self, name: str, disk: str) -> None:
        """Guest ``name`` goes on without disk ``disk``'s secondary copy."""
        raise errors.OpExecError(f"The {self.NAME} hypervisor runs no mirrored disks")

    async def mirror_resync(
        self,
        name: str,
        peer: MirrorLink,
        progress: Callable[[int, int], None],
        full: bool = False,
    ) -> None:
        """Bring the secondary copy ``peer`` reaches up to date under guest
        ``name`` (all of it when ``full``) and write both again; ``progress``
        is told the bytes copied and in all as it goes."""
        raise errors.OpExecError(f"The {self.NAME} hypervisor runs no mirrored disks")

    async def balloon(self, spec: InstanceSpec, memory: int) -> None:
        """Change the memory of the running instance to ``memory`` MiB."""
        raise errors.OpExecError(f"The {self.NAME} hypervisor cannot change a running memory")

    # Migration, in Ganeti's steps; the master drives them in this order:
    # migration_info (source) → accept_instance (target) → migrate_instance
    # (source) → migration_status (source, until it ends) → finalize_migration_src
    # and finalize_migration_dst (both; success=False aborts).
    @abstractmethod
    async def migration_info(self, spec: InstanceSpec) -> Any:
        """What the target needs to accept the instance (opaque to the master,
        but for ``not_live``: why the instance must be paused to move, if it must)."""

    @abstractmethod
    async def accept_instance(self, spec: InstanceSpec, info: Any, target: str) -> Any:
        """Prepare this node (the target, address ``target``) to receive the
        instance; what the source needs to send it there (opaque to the master)."""

    @abstractmethod
    async def migrate_instance(
        self, cluster_name: str, spec: InstanceSpec, target: str, live: bool, accepted: Any = None
    ) -> None:
        """Start sending the running instance to the node at ``target``
        (``accepted``: the target's answer to accept_instance)."""

    @abstractmethod
    async def migration_status(self, spec: InstanceSpec) -> dict[str, Any]:
        """The source's view: ``{"status": <Ganeti's HV_MIGRATION_*>, ...}``
        with progress fields (``transferred_ram``, ``total_ram``) while active."""

    @abstractmethod
    async def finalize_migration_dst(self, spec: InstanceSpec, info: Any, success: bool) -> None:
        """On the target: run the instance (success) or drop what was received."""

    @abstractmethod
    async def finalize_migration_src(self, spec: InstanceSpec, success: bool, live: bool) -> None:
        """On the source: forget the instance (success) or keep running it."""
