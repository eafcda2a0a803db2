"""Hypervisors behind one interface; the node picks one by name.

One object per hypervisor and node root, kept for the life of the process: a
real hypervisor holds state (monitor connections, event subscriptions) that
every call must share.
"""

from __future__ import annotations

from corral import errors
from corral.node.hypervisor.base import Hypervisor
from corral.node.hypervisor.fake import FakeHypervisor
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.paths import Paths

# Name → class: the node side of corral.hypervisors.HYPERVISORS.
CLASSES: dict[str, type[Hypervisor]] = {
    FakeHypervisor.NAME: FakeHypervisor,
    KvmHypervisor.NAME: KvmHypervisor,
}

_INSTANCES: dict[tuple[str, str], Hypervisor] = {}


def hypervisor_class(name: str) -> type[Hypervisor]:
    """The class of hypervisor ``name``; OpExecError if this node has none."""
    cls = CLASSES.get(name)
    if cls is None:
        raise errors.OpExecError(f"Hypervisor '{name}' is not supported on this node")
    return cls


def get_hypervisor(name: str, paths: Paths) -> Hypervisor:
    """The hypervisor ``name`` on this node."""
    key = (name, str(paths.root))
    hypervisor = _INSTANCES.get(key)
    if hypervisor is None:
        hypervisor = _INSTANCES[key] = hypervisor_class(name)(paths)
    return hypervisor


def available(paths: Paths) -> list[Hypervisor]:
    """The hypervisors this node can run."""
    return [get_hypervisor(name, paths) for name, cls in CLASSES.items() if not cls.problem(paths)]
