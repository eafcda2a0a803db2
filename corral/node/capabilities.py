"""What this node can serve: the hypervisors it can run and the disk templates
whose storage it has.

Each answer is ``{name: None}`` when the node can, or ``{name: why not}``;
it covers every hypervisor and disk template Corral implements, so the master
refuses to enable what some node lacks (``corral.capabilities.check_reports``).
``gnt-cluster init`` asks the same functions directly, before noded runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral import capabilities, errors, hypervisors
from corral.node.hypervisor import hypervisor_class
from corral.node.storage.registry import NODE_TEMPLATES
from corral.paths import Paths
from corral.storage import templates


def hypervisor_problem(paths: Paths, name: str) -> str | None:
    """Why this node cannot run hypervisor ``name``, or None if it can."""
    try:
        return hypervisor_class(name).problem(paths)
    except errors.GenericError as err:
        return err.message


def disk_template_problem(paths: Paths, name: str, units: Mapping[str, str | None]) -> str | None:
    """Why this node cannot serve disk template ``name``, or None if it can;
    ``units``: template → the key of its storage unit (its cluster directory)."""
    cls = NODE_TEMPLATES.get(name)
    if cls is None or name not in templates.DISK_TEMPLATES:
        return "not implemented by Corral"
    return cls(paths).unit_problem(units.get(name))


def report(
    paths: Paths, file_storage_dir: str, shared_file_storage_dir: str | None = None
) -> dict[str, Any]:
    """The node's capability report (see the module's docstring) with these
    cluster directories (production paths; the shared one by default Ganeti's)."""
    shared = shared_file_storage_dir or paths.to_wire(paths.shared_file_storage_dir)
    dirs = templates.StorageDirs(file_storage_dir, shared)
    units: dict[str, str | None] = {
        name: unit.key
        for name, template in templates.DISK_TEMPLATES.items()
        if (unit := template.capacity_unit(dirs)) is not None
    }
    return {
        capabilities.REPORT_HYPERVISORS: {
            name: hypervisor_problem(paths, name) for name in hypervisors.HYPERVISORS
        },
        capabilities.REPORT_DISK_TEMPLATES: {
            name: disk_template_problem(paths, name, units) for name in templates.DISK_TEMPLATES
        },
    }
