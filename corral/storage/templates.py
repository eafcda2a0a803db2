"""The disk templates Corral implements: the one table that says which, each
a strategy object (:class:`~corral.storage.strategy.DiskTemplate`) saying
what the template means on the master's side.

Ganeti's nine template names are all valid names (opcodes and the command
line accept them), but only the templates in ``DISK_TEMPLATES`` can be
enabled or used: the others would store instances whose disks never exist.
The nodes' side of the same contract is :mod:`corral.node.storage.registry`;
a node reports, per template, whether it can serve it
(:mod:`corral.node.capabilities`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Literal

from corral import constants as C
from corral import errors
from corral import storage_names as N
from corral.objects import Disk, Instance
from corral.storage.blockdev import BlockDevTemplate
from corral.storage.diskless import DisklessTemplate
from corral.storage.file import FileTemplate, SharedFileTemplate
from corral.storage.mirrored import MirroredTemplate
from corral.storage.strategy import (
    RES_DEVICE,
    RES_PATH,
    RES_PORT,
    ClusterDirs,
    DiskTemplate,
    Ledger,
    Mirroring,
    Moves,
    Placement,
    Resource,
    StorageDirs,
)
from corral.storage.units import StorageUnit
from corral.storage_names import GANETI_DISK_TEMPLATES

__all__ = [
    "DISK_TEMPLATES",
    "GANETI_DISK_TEMPLATES",
    "RES_DEVICE",
    "RES_PATH",
    "RES_PORT",
    "ClusterDirs",
    "DiskTemplate",
    "Ledger",
    "Mirroring",
    "Moves",
    "Placement",
    "Resource",
    "StorageDirs",
    "StorageUnit",
    "get",
]

# The names as a type, for the opcodes' fields (a test checks it is the same list).
DiskTemplateName = Literal[
    "sharedfile", "diskless", "plain", "blockdev", "ext", "rbd", "drbd", "file", "gluster",
    "mirrored",
]  # fmt: skip

DISK_TEMPLATES: Mapping[str, DiskTemplate] = {
    t.name: t
    for t in (
        DisklessTemplate(),
        FileTemplate(),
        SharedFileTemplate(),
        BlockDevTemplate(),
        MirroredTemplate(),
    )
}

# Templates Corral cannot serve on a machine lacking what they are built on:
# name → (what is missing, the file that shows it is there).
_NEEDS_KERNEL: Mapping[str, tuple[str, str]] = {
    N.DT_PLAIN: ("device-mapper (LVM)", "/dev/mapper/control"),
}


def get(name: str) -> DiskTemplate:
    """The implemented template ``name`` (ProgrammerError if it is not one: the
    caller should have checked with :func:`check_implemented`)."""
    try:
        return DISK_TEMPLATES[name]
    except KeyError:
        raise errors.ProgrammerError(f"Disk template {name!r} is not implemented") from None


def not_implemented(
    kind: str, name: str, doing: str, implemented: Iterable[str]
) -> errors.OpPrereqError:
    """The refusal of a name Ganeti knows and Corral does not implement (a disk
    template here, a hypervisor in ``corral.capabilities``)."""
    return errors.OpPrereqError(
        f"Cannot {doing} {kind} '{name}': it is not implemented by Corral;"
        f" use one of: {', '.join(implemented)}",
        C.ECODE_INVAL,
    )


def implemented_names() -> str:
    """The implemented templates, for messages."""
    return ", ".join(DISK_TEMPLATES)


def _missing_kernel_support(name: str, doing: str) -> errors.OpPrereqError | None:
    """The refusal of ``plain`` on a machine without what it needs."""
    need = _NEEDS_KERNEL.get(name)
    if need is None or os.path.exists(need[1]):
        return None
    what, probe = need
    return errors.OpPrereqError(
        f"Cannot {doing} disk template '{name}': this machine has no {what} ({probe} does not"
        f" exist); use one of: {implemented_names()}",
        C.ECODE_INVAL,
    )


def check_implemented(name: str, doing: str = "use") -> DiskTemplate:
    """The template ``name``, or OpPrereqError (ECODE_INVAL) saying why it cannot be used.

    ``drbd`` is served by ``mirrored`` (:data:`GANETI_ALIASES`); ``plain``
    names what the machine lacks when it lacks it; any other Ganeti template
    Corral lacks is "not implemented"; any other name gets Ganeti's own "not
    a valid disk template" message.
    """
    template = DISK_TEMPLATES.get(N.canonical_template(name))
    if template is not None:
        return template
    if name in GANETI_DISK_TEMPLATES:
        raise _missing_kernel_support(name, doing) or not_implemented(
            "disk template", name, doing, DISK_TEMPLATES
        )
    raise errors.OpPrereqError(
        f"'{name}' is not a valid disk template. Valid disk templates are:"
        f" {','.join(GANETI_DISK_TEMPLATES)}",
        C.ECODE_INVAL,
    )


def capacity_units(dirs: ClusterDirs) -> list[StorageUnit]:
    """The storage units of the implemented templates whose space is counted,
    in the table's order: what a node must serve for them."""
    units = (template.capacity_unit(dirs) for template in DISK_TEMPLATES.values())
    # Each once: mirrored's copies take their space where file disks do.
    return list(dict.fromkeys(unit for unit in units if unit is not None))


def default_unit(dirs: ClusterDirs) -> StorageUnit:
    """The storage unit the nodes' capacity reports show by default: the file
    storage directory."""
    return StorageUnit(N.ST_FILE, dirs.file_storage_dir)


def capacity_unit(name: str | None, dirs: ClusterDirs) -> StorageUnit:
    """Where template ``name``'s disks take their space; for no template, or
    one whose space Corral does not count, the default unit."""
    template = None if name is None else DISK_TEMPLATES.get(name)
    unit = None if template is None else template.capacity_unit(dirs)
    return unit or default_unit(dirs)


def disk_path(disk: Disk) -> str | None:
    """The production path of a disk whose logical_id names one (file-based
    templates, adopted block devices), else None."""
    template = DISK_TEMPLATES.get(disk.dev_type)
    return None if template is None else template.disk_path(disk.logical_id)


def set_primary(instance: Instance, node: str) -> None:
    """Make ``node`` (a uuid) the primary node of ``instance`` (a failover,
    migration or move); the disks follow, as their template places them.
    A secondary made the primary swaps roles with it (mirrored disks)."""
    former = instance.primary_node
    instance.secondary_nodes = [former if n == node else n for n in instance.secondary_nodes]
    instance.primary_node = node
    for disk in instance.disks:
        disk.nodes = _disk_nodes(disk, node, instance.secondary_nodes)
        template = DISK_TEMPLATES.get(disk.dev_type)
        if template is not None:
            template.nodes_changed(disk)


def fill_disk_nodes(instance: Instance) -> None:
    """Disks stored by an older Corral, without their nodes, get those their
    template gives them (a file disk: the primary node)."""
    for disk in instance.disks:
        if not disk.nodes:
            disk.nodes = _disk_nodes(disk, instance.primary_node, instance.secondary_nodes)


def _disk_nodes(disk: Disk, primary: str, secondaries: list[str]) -> list[str]:
    """The nodes holding ``disk`` of an instance on these nodes."""
    template = DISK_TEMPLATES.get(disk.dev_type)
    return list(disk.nodes) if template is None else template.disk_nodes(primary, secondaries)
