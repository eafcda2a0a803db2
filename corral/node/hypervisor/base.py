"""The hypervisor interface every backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from corral.paths import Paths


class Hypervisor(ABC):
    """Starts, stops and reports instances on one node."""

    NAME = ""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @abstractmethod
    async def start(self, inst: dict[str, Any], paused: bool = False) -> None:
        """Start an instance described by its descriptor (name, memory, vcpus, ...)."""

    @abstractmethod
    async def stop(self, name: str, force: bool = False, timeout: int = 120) -> None:
        """Stop an instance; stopping one that is not running is not an error."""

    @abstractmethod
    async def reboot(self, name: str) -> None:
        """Reboot a running instance (soft reboot)."""

    @abstractmethod
    def instances_info(self) -> dict[str, dict[str, Any]]:
        """Running instances: name → ``{"memory", "vcpus", "state", "time"}``."""

    def instances_info_of(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The running ones of ``names``, as :meth:`instances_info` (a backend
        that can look instances up one by one does it faster)."""
        running = self.instances_info()
        return {name: running[name] for name in names if name in running}

    @abstractmethod
    def node_info(self) -> dict[str, Any]:
        """Memory as the hypervisor sees it: ``memory_total``, ``memory_free`` (MiB)."""

    @abstractmethod
    async def rename(self, old: str, new: str) -> None:
        """Follow an instance rename (only stopped instances are renamed)."""

    # Migration, in Ganeti's steps; the master drives them in this order:
    # migration_info (source) → accept_instance (target) → migrate_instance
    # (source) → migration_status (source) → finalize_migration_src and
    # finalize_migration_dst (both; success=False aborts).
    @abstractmethod
    async def migration_info(self, inst: dict[str, Any]) -> Any:
        """What the target needs to accept ``inst`` (opaque to the master)."""

    @abstractmethod
    async def accept_instance(self, inst: dict[str, Any], info: Any, target: str) -> None:
        """Prepare this node (the target, address ``target``) to receive ``inst``."""

    @abstractmethod
    async def migrate_instance(
        self, cluster_name: str, inst: dict[str, Any], target: str, live: bool
    ) -> None:
        """Send the running ``inst`` to the node at ``target``."""

    @abstractmethod
    async def migration_status(self, inst: dict[str, Any]) -> dict[str, Any]:
        """The source's view of the migration: ``{"status": <Ganeti's status>, ...}``."""

    @abstractmethod
    async def finalize_migration_dst(self, inst: dict[str, Any], info: Any, success: bool) -> None:
        """On the target: run the instance (success) or drop what was received."""

    @abstractmethod
    async def finalize_migration_src(self, inst: dict[str, Any], success: bool, live: bool) -> None:
        """On the source: forget the instance (success) or keep running it."""
