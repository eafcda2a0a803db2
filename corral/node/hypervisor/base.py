"""The hypervisor interface every backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
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

    @abstractmethod
    def node_info(self) -> dict[str, Any]:
        """Memory as the hypervisor sees it: ``memory_total``, ``memory_free`` (MiB)."""

    @abstractmethod
    async def rename(self, old: str, new: str) -> None:
        """Follow an instance rename (only stopped instances are renamed)."""
