"""What may be enabled on a cluster: hypervisors and disk templates that Corral
implements and that every node running instances can serve.

The hypervisor table lives in :mod:`corral.hypervisors`, the disk template
table in :mod:`corral.storage.templates`.  Nodes report what they can serve through
the ``node_capabilities`` call (:mod:`corral.node.capabilities`); the checks
below turn those reports into one clear refusal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from corral import constants as C
from corral import errors
from corral.hypervisors import GANETI_HYPERVISORS, HYPERVISORS, HypervisorKind
from corral.storage import templates
from corral.storage_names import DISK_TEMPLATE_NAMES

# The keys of a node's capability report.
REPORT_HYPERVISORS = "hypervisors"
REPORT_DISK_TEMPLATES = "disk_templates"


def check_hypervisor_implemented(name: str, doing: str = "use") -> HypervisorKind:
    """The hypervisor ``name``, or OpPrereqError (ECODE_INVAL) saying why it cannot be used."""
    kind = HYPERVISORS.get(name)
    if kind is not None:
        return kind
    if name in GANETI_HYPERVISORS:
        raise templates.not_implemented("hypervisor", name, doing, HYPERVISORS)
    raise errors.OpPrereqError(
        f"Unknown hypervisor '{name}'; valid hypervisors are: {', '.join(GANETI_HYPERVISORS)}",
        C.ECODE_INVAL,
    )


def check_init_names(hypervisors: list[str], disk_templates: list[str]) -> None:
    """``gnt-cluster init``'s checks of the names, with Ganeti's messages for
    empty lists and unknown names, then Corral's for names it does not implement."""
    for what, names, known in (
        ("Enabled hypervisors", hypervisors, GANETI_HYPERVISORS),
        ("Enabled disk templates", disk_templates, DISK_TEMPLATE_NAMES),
    ):
        if not names:
            raise errors.OpPrereqError(
                f"{what} list must contain at least one member", C.ECODE_INVAL
            )
        invalid = sorted(set(names) - set(known))
        if invalid:
            listed = "{" + ", ".join(repr(name) for name in invalid) + "}"
            contains = "contains" if what.endswith("hypervisors") else "list contains"
            raise errors.OpPrereqError(
                f"{what} {contains} invalid entries: {listed}", C.ECODE_INVAL
            )
    check_implemented(hypervisors, disk_templates)


def check_implemented(hypervisors: Iterable[str], disk_templates: Iterable[str]) -> None:
    """Refuse to enable any hypervisor or disk template Corral does not implement."""
    for name in hypervisors:
        check_hypervisor_implemented(name, "enable")
    for name in disk_templates:
        templates.check_implemented(name, "enable")


def check_reports(
    reports: Mapping[str, dict[str, Any] | str],
    hypervisors: Iterable[str],
    disk_templates: Iterable[str],
) -> None:
    """Refuse unless every node's report (node name → its ``node_capabilities``
    answer, or why the call failed) says it can serve each name."""
    wanted = [(REPORT_HYPERVISORS, "hypervisor", "run", name) for name in hypervisors] + [
        (REPORT_DISK_TEMPLATES, "disk template", "serve", name) for name in disk_templates
    ]
    for key, what, verb, name in wanted:
        for node, report in sorted(reports.items()):
            if isinstance(report, str):
                problem = f"node {node} did not say whether it can {verb} it ({report})"
                advice = "bring the node back or mark it offline, then retry"
            else:
                reason = report.get(key, {}).get(name, f"the node does not know {what} {name}")
                if reason is None:
                    continue
                problem = f"node {node} cannot {verb} it: {reason}"
                advice = f"fix the node or leave {what} '{name}' disabled"
            raise errors.OpPrereqError(
                f"Cannot enable {what} '{name}': {problem}; {advice}", C.ECODE_INVAL
            )
