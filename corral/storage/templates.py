"""The disk templates Corral implements: the one table that says which.

Ganeti's nine template names are all valid names (opcodes and the command
line accept them), but only the templates in ``DISK_TEMPLATES`` can be
enabled or used: the others would store instances whose disks never exist.
Each entry says what a node must serve for the template (its storage kind);
the node reports, per template, whether it can (``corral.node.capabilities``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from corral import constants as C
from corral import errors

# Ganeti 3.0.2's disk templates (constants.DISK_TEMPLATES), in the order its
# messages list them.
GANETI_DISK_TEMPLATES = (
    "sharedfile",
    "diskless",
    "plain",
    "blockdev",
    "ext",
    "rbd",
    "drbd",
    "file",
    "gluster",
)

# Storage kinds: what a node needs for a template's disks.
STORAGE_NONE = "none"
STORAGE_FILE_DIR = "file-dir"  # the cluster's file storage directory


@dataclass(frozen=True)
class DiskTemplate:
    """A disk template Corral implements."""

    name: str
    storage: str  # one of the STORAGE_* kinds
    doc: str


DISK_TEMPLATES: Mapping[str, DiskTemplate] = {
    t.name: t
    for t in (
        DiskTemplate("diskless", STORAGE_NONE, "Instances without disks"),
        DiskTemplate("file", STORAGE_FILE_DIR, "Disks are files in the file storage directory"),
    )
}


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


def check_implemented(name: str, doing: str = "use") -> DiskTemplate:
    """The template ``name``, or OpPrereqError (ECODE_INVAL) saying why it cannot be used.

    A Ganeti template Corral lacks is "not implemented"; any other name gets
    Ganeti's own "not a valid disk template" message.
    """
    template = DISK_TEMPLATES.get(name)
    if template is not None:
        return template
    if name in GANETI_DISK_TEMPLATES:
        raise not_implemented("disk template", name, doing, DISK_TEMPLATES)
    raise errors.OpPrereqError(
        f"'{name}' is not a valid disk template. Valid disk templates are:"
        f" {','.join(GANETI_DISK_TEMPLATES)}",
        C.ECODE_INVAL,
    )
