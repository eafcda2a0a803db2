"""What this node can serve: the hypervisors it can run and the disk templates
whose storage it has.

Each answer is ``{name: None}`` when the node can, or ``{name: why not}``;
it covers every hypervisor and disk template Corral implements, so the master
refuses to enable what some node lacks (``corral.capabilities.check_reports``).
``gnt-cluster init`` asks the same functions directly, before noded runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from corral import capabilities, errors, hypervisors
from corral.node.hypervisor import hypervisor_class
from corral.node.storage.registry import NODE_TEMPLATES
from corral.paths import Paths
from corral.storage import templates
from corral.storage.units import StorageUnit


def hypervisor_problem(paths: Paths, name: str) -> str | None:
    """Why this node cannot run hypervisor ``name``, or None if it can."""
    try:
        return hypervisor_class(name).problem(paths)
    except errors.GenericError as err:
        return err.message


def disk_template_problem(paths: Paths, name: str, keys: Mapping[str, str]) -> str | None:
    """Why this node cannot serve disk template ``name``, or None if it can;
    ``keys``: storage type → the key of the cluster's storage unit of that type."""
    cls = NODE_TEMPLATES.get(name)
    if cls is None or name not in templates.DISK_TEMPLATES:
        return "not implemented by Corral"
    return cls(paths).unit_problem(keys.get(cls.STORAGE_TYPE))


def report(paths: Paths, units: Iterable[StorageUnit]) -> dict[str, Any]:
    """The node's capability report (see the module's docstring), the templates
    checked against the cluster's storage ``units`` (their keys production paths)."""
    keys = {unit.storage_type: unit.key for unit in units}
    return {
        capabilities.REPORT_HYPERVISORS: {
            name: hypervisor_problem(paths, name) for name in hypervisors.HYPERVISORS
        },
        capabilities.REPORT_DISK_TEMPLATES: {
            name: disk_template_problem(paths, name, keys) for name in templates.DISK_TEMPLATES
        },
    }


def report_wire(paths: Paths, units: object) -> dict[str, Any]:
    """:func:`report` for storage units sent as ``[[type, key], ...]``."""
    if not isinstance(units, list):
        raise errors.OpExecError(f"Invalid storage units {units!r}: expected a list")
    return report(paths, [StorageUnit.from_wire(unit) for unit in units])
