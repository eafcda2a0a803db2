"""Hypervisors behind one interface; the node picks one by name."""

from __future__ import annotations

from corral import errors
from corral.node.hypervisor.base import Hypervisor
from corral.node.hypervisor.fake import FakeHypervisor
from corral.paths import Paths

_CLASSES: dict[str, type[Hypervisor]] = {FakeHypervisor.NAME: FakeHypervisor}


def get_hypervisor(name: str, paths: Paths) -> Hypervisor:
    """The hypervisor ``name`` on this node."""
    cls = _CLASSES.get(name)
    if cls is None:
        raise errors.OpExecError(f"Hypervisor '{name}' is not supported on this node")
    return cls(paths)
