"""What this node can serve: the hypervisors it can run and the disk templates
whose storage it has.

Each answer is ``{name: None}`` when the node can, or ``{name: why not}``;
it covers every hypervisor and disk template Corral implements, so the master
refuses to enable what some node lacks (``corral.capabilities.check_reports``).
``gnt-cluster init`` asks the same functions directly, before noded runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from corral import capabilities, errors
from corral.node.hypervisor import get_hypervisor
from corral.paths import Paths
from corral.storage import templates


def hypervisor_problem(paths: Paths, name: str) -> str | None:
    """Why this node cannot run hypervisor ``name``, or None if it can."""
    try:
        # Listing the running instances reads the hypervisor's state.
        get_hypervisor(name, paths).instances_info()
    except errors.GenericError as err:
        return err.message
    except OSError as err:
        return f"cannot read its state: {err.strerror or err}"
    return None


def _no_storage(paths: Paths, file_storage_dir: str) -> str | None:
    return None


def _file_dir(paths: Paths, file_storage_dir: str) -> str | None:
    """The file storage directory must be a directory this node can write in."""
    try:
        local = paths.from_wire(file_storage_dir)
    except ValueError:
        return f"the file storage directory '{file_storage_dir}' is not an absolute path"
    if not local.is_dir():
        state = "does not exist" if not local.exists() else "is not a directory"
        return f"the file storage directory {file_storage_dir} {state}"
    if not os.access(local, os.W_OK | os.X_OK):
        return f"the file storage directory {file_storage_dir} is not writable"
    return None


# Storage kind (templates.STORAGE_*) → why this node lacks it, or None.
_STORAGE_PROBES: dict[str, Callable[[Paths, str], str | None]] = {
    templates.STORAGE_NONE: _no_storage,
    templates.STORAGE_FILE_DIR: _file_dir,
}


def disk_template_problem(paths: Paths, name: str, file_storage_dir: str) -> str | None:
    """Why this node cannot serve disk template ``name``, or None if it can."""
    template = templates.DISK_TEMPLATES.get(name)
    if template is None:
        return "not implemented by Corral"
    return _STORAGE_PROBES[template.storage](paths, file_storage_dir)


def report(paths: Paths, file_storage_dir: str) -> dict[str, Any]:
    """The node's capability report (see the module's docstring)."""
    return {
        capabilities.REPORT_HYPERVISORS: {
            name: hypervisor_problem(paths, name) for name in capabilities.HYPERVISORS
        },
        capabilities.REPORT_DISK_TEMPLATES: {
            name: disk_template_problem(paths, name, file_storage_dir)
            for name in templates.DISK_TEMPLATES
        },
    }
