"""The disk templates Corral implements: the one table that says which, and
what each means on the master's side.

Ganeti's nine template names are all valid names (opcodes and the command
line accept them), but only the templates in ``DISK_TEMPLATES`` can be
enabled or used: the others would store instances whose disks never exist.
Each entry says what a node must serve for the template (its storage kind),
the shape of its disks' ``logical_id``, whether its disks are seen by every
node (so instances can fail over and migrate), whether they can grow and
whether they are adopted rather than created.  The nodes' side of the same
contract is :mod:`corral.node.storage.registry`; a node reports, per
template, whether it can serve it (:mod:`corral.node.capabilities`).
"""

from __future__ import annotations

import os
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from corral import constants as C
from corral import errors
from corral.storage import names as N
from corral.storage.names import GANETI_DISK_TEMPLATES

__all__ = ["DISK_TEMPLATES", "GANETI_DISK_TEMPLATES", "DiskTemplate", "get"]

# The names as a type, for the opcodes' fields (a test checks it is the same list).
DiskTemplateName = Literal[
    "sharedfile", "diskless", "plain", "blockdev", "ext", "rbd", "drbd", "file", "gluster"
]

# Storage kinds: what a node needs for a template's disks.
STORAGE_NONE = "none"
STORAGE_FILE_DIR = "file-dir"  # the cluster's file storage directory
STORAGE_SHARED_DIR = "shared-file-dir"  # the directory every node sees
STORAGE_BLOCK = "block-devices"  # existing block devices, adopted


class ClusterDirs(Protocol):
    """The cluster settings a template's disks are placed by."""

    @property
    def file_storage_dir(self) -> str: ...

    @property
    def shared_file_storage_dir(self) -> str: ...


@dataclass(frozen=True)
class StorageDirs:
    """Cluster directories not (yet) in the cluster object: a change's or a node's."""

    file_storage_dir: str
    shared_file_storage_dir: str


# (cluster, instance name, disk index, disk spec) → the disk's logical_id.
LogicalIdFn = Callable[[ClusterDirs, str, int, Mapping[str, Any]], list[str]]


def _no_disks(cluster: ClusterDirs, name: str, index: int, spec: Mapping[str, Any]) -> list[str]:
    raise errors.ProgrammerError("A diskless instance has no disks")


def _in_dir(dir_of: Callable[[ClusterDirs], str], template: str) -> LogicalIdFn:
    """``[driver, <dir>/<instance>/<unique>.<template>.disk<index>]`` (as Ganeti's
    file-based templates: one directory per instance, unique file names)."""

    def logical_id(
        cluster: ClusterDirs, name: str, index: int, spec: Mapping[str, Any]
    ) -> list[str]:
        driver = spec.get("driver") or N.FILE_DRIVERS[0]
        unique = uuidlib.uuid4()
        return [driver, f"{dir_of(cluster)}/{name}/{unique}.{template}.disk{index}"]

    return logical_id


def _adopted(cluster: ClusterDirs, name: str, index: int, spec: Mapping[str, Any]) -> list[str]:
    """``[manual, <the adopted device>]``, as Ganeti's blockdev template."""
    return [N.BLOCKDEV_DRIVER_MANUAL, os.path.normpath(str(spec["adopt"]))]


def _file_dir(cluster: ClusterDirs) -> str:
    return cluster.file_storage_dir


def _shared_dir(cluster: ClusterDirs) -> str:
    return cluster.shared_file_storage_dir


@dataclass(frozen=True)
class DiskTemplate:
    """A disk template Corral implements (master side)."""

    name: str
    storage: str  # one of the STORAGE_* kinds
    doc: str
    logical_id: LogicalIdFn
    # Every node sees the disks: failover and migration need no copy.
    shared: bool = False
    growable: bool = False
    # Disks are existing devices taken over (``adopt=``): never created nor removed.
    adopts: bool = False
    # The cluster directory the disks live in, for file-based templates.
    directory: Callable[[ClusterDirs], str] | None = None
    # The file-based templates' logical_id: [driver, path].
    path_in_id: bool = False
    has_disks: bool = True

    def storage_dir(self, cluster: ClusterDirs) -> str | None:
        """The cluster directory of this template's disks (None: not file-based)."""
        return None if self.directory is None else self.directory(cluster)


DISK_TEMPLATES: Mapping[str, DiskTemplate] = {
    t.name: t
    for t in (
        DiskTemplate(
            N.DT_DISKLESS,
            STORAGE_NONE,
            "Instances without disks",
            _no_disks,
            shared=True,
            has_disks=False,
        ),
        DiskTemplate(
            N.DT_FILE,
            STORAGE_FILE_DIR,
            "Disks are files in the file storage directory of the primary node",
            _in_dir(_file_dir, N.DT_FILE),
            growable=True,
            directory=_file_dir,
            path_in_id=True,
        ),
        DiskTemplate(
            N.DT_SHARED_FILE,
            STORAGE_SHARED_DIR,
            "Disks are files in the shared file storage directory, seen by every node",
            _in_dir(_shared_dir, N.DT_SHARED_FILE),
            shared=True,
            growable=True,
            directory=_shared_dir,
            path_in_id=True,
        ),
        DiskTemplate(
            N.DT_BLOCK,
            STORAGE_BLOCK,
            "Disks are existing block devices below /dev/disk/, adopted",
            _adopted,
            shared=True,
            adopts=True,
        ),
    )
}

# Templates Corral cannot serve on a machine lacking what they are built on:
# name → (what is missing, the file that shows it is there).
_NEEDS_KERNEL: Mapping[str, tuple[str, str]] = {
    N.DT_PLAIN: ("device-mapper (LVM)", "/dev/mapper/control"),
    N.DT_DRBD: ("DRBD", "/proc/drbd"),
}


def get(name: str) -> DiskTemplate:
    """The implemented template ``name`` (ProgrammerError if it is not one: the
    caller should have checked with :func:`check_implemented`)."""
    try:
        return DISK_TEMPLATES[name]
    except KeyError:
        raise errors.ProgrammerError(f"Disk template {name!r} is not implemented") from None


def uses_storage(names: Iterable[str], storage: str) -> bool:
    """Whether one of the implemented templates ``names`` needs ``storage``."""
    return any(t.storage == storage for t in map(DISK_TEMPLATES.get, names) if t is not None)


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
    """The refusal of ``plain``/``drbd`` on a machine without what they need."""
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

    ``plain`` and ``drbd`` name what the machine lacks when it lacks it; any
    other Ganeti template Corral lacks is "not implemented"; any other name
    gets Ganeti's own "not a valid disk template" message.
    """
    template = DISK_TEMPLATES.get(name)
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
