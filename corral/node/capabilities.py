"""What this node can serve: the hypervisors it can run and the disk templates
whose storage it has.

Each answer is ``{name: None}`` when the node can, or ``{name: why not}``;
it covers every hypervisor and disk template Corral implements, so the master
refuses to enable what some node lacks (``corral.capabilities.check_reports``).
``gnt-cluster init`` asks the same functions directly, before noded runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from corral import capabilities, errors, hypervisors
from corral.node.hypervisor import hypervisor_class
from corral.paths import Paths
from corral.storage import templates


def hypervisor_problem(paths: Paths, name: str) -> str | None:
    """Why this node cannot run hypervisor ``name``, or None if it can."""
    try:
        return hypervisor_class(name).problem(paths)
    except errors.GenericError as err:
        return err.message


def _no_storage(paths: Paths, directory: str | None) -> str | None:
    return None


def _writable_dir(what: str) -> Callable[[Paths, str | None], str | None]:
    """A probe: the template's directory must be one this node can write in."""

    def probe(paths: Paths, directory: str | None) -> str | None:
        if not directory:
            return f"no {what} is set"
        try:
            local = paths.from_wire(directory)
        except ValueError:
            return f"the {what} '{directory}' is not an absolute path"
        if not local.is_dir():
            state = "does not exist" if not local.exists() else "is not a directory"
            return f"the {what} {directory} {state}"
        if not os.access(local, os.W_OK | os.X_OK):
            return f"the {what} {directory} is not writable"
        return None

    return probe


def _block_devices(paths: Paths, directory: str | None) -> str | None:
    """Adopted devices are named below the node's /dev/disk/ (see node.storage.blockdev)."""
    return None if os.path.isdir("/dev") else "the node has no /dev"


# Storage kind (templates.STORAGE_*) → why this node lacks it, or None.
_STORAGE_PROBES: dict[str, Callable[[Paths, str | None], str | None]] = {
    templates.STORAGE_NONE: _no_storage,
    templates.STORAGE_FILE_DIR: _writable_dir("file storage directory"),
    templates.STORAGE_SHARED_DIR: _writable_dir("shared file storage directory"),
    templates.STORAGE_BLOCK: _block_devices,
}


def disk_template_problem(paths: Paths, name: str, storage_dirs: Mapping[str, str]) -> str | None:
    """Why this node cannot serve disk template ``name``, or None if it can;
    ``storage_dirs``: template → the cluster directory its disks go in."""
    template = templates.DISK_TEMPLATES.get(name)
    if template is None:
        return "not implemented by Corral"
    return _STORAGE_PROBES[template.storage](paths, storage_dirs.get(name))


def report(
    paths: Paths, file_storage_dir: str, shared_file_storage_dir: str | None = None
) -> dict[str, Any]:
    """The node's capability report (see the module's docstring) with these
    cluster directories (production paths; the shared one by default Ganeti's)."""
    shared = shared_file_storage_dir or paths.to_wire(paths.shared_file_storage_dir)
    dirs = templates.StorageDirs(file_storage_dir, shared)
    storage_dirs = {
        name: directory
        for name, template in templates.DISK_TEMPLATES.items()
        if (directory := template.storage_dir(dirs)) is not None
    }
    return {
        capabilities.REPORT_HYPERVISORS: {
            name: hypervisor_problem(paths, name) for name in hypervisors.HYPERVISORS
        },
        capabilities.REPORT_DISK_TEMPLATES: {
            name: disk_template_problem(paths, name, storage_dirs)
            for name in templates.DISK_TEMPLATES
        },
    }
