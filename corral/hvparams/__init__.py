"""Hypervisor parameters, declared once per hypervisor as a table of
:class:`HvParam` rows (Ganeti's names, types and defaults, its checks, and
whether Corral implements each), with the checks Ganeti makes on them:

- :func:`check_values`: each given value alone (``hv_base`` checks) and the
  compatibility rule (a parameter Corral does not implement only takes its
  default);
- :func:`check_filled`: the same on the filled parameters, then the checks
  across parameters (Ganeti's ``CheckParameterSyntax``);
- :func:`node_problems`: what a node checks (Ganeti's ``ValidateParameters``).

Ganeti raises ``HypervisorError`` for these; Corral refuses with
``OpPrereqError`` (ECODE_INVAL), as for every other bad parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from corral import constants as C
from corral import errors
from corral import hypervisors as H
from corral.hvparams import fake, kvm, kvm_checks
from corral.hvparams.rows import Check, HvParam, unspecified

__all__ = [
    "DEFAULTS",
    "EXTENSIONS",
    "TABLES",
    "TYPES",
    "Check",
    "HvParam",
    "check_filled",
    "check_values",
    "node_problems",
]

CrossCheck = Callable[[Mapping[str, Any]], str | None]
NodeCheck = Callable[[Mapping[str, Any], str | None, str | None], list[str]]


@dataclass(frozen=True)
class HvTable:
    """One hypervisor's parameters and its checks across them."""

    params: Mapping[str, HvParam]
    cross_checks: tuple[CrossCheck, ...] = ()
    node_check: NodeCheck | None = None


def _table(rows: tuple[HvParam, ...], **checks: Any) -> HvTable:
    return HvTable({row.name: row for row in rows}, **checks)


TABLES: Mapping[str, HvTable] = {
    H.HT_FAKE: _table(fake.PARAMS),
    H.HT_KVM: _table(
        kvm.PARAMS, cross_checks=kvm_checks.CROSS_CHECKS, node_check=kvm_checks.node_problems
    ),
}
# Each hypervisor's parameter types (Ganeti's VTYPE names) and defaults.
TYPES: Mapping[str, dict[str, str]] = {
    hv: {name: row.type for name, row in table.params.items()} for hv, table in TABLES.items()
}
DEFAULTS: Mapping[str, dict[str, Any]] = {
    hv: {name: row.default for name, row in table.params.items()} for hv, table in TABLES.items()
}
# Corral's own parameters, which Ganeti lacks (kvm's use_network_rules, use_namespaces).
EXTENSIONS: frozenset[str] = kvm.EXTENSIONS


def _refuse(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, C.ECODE_INVAL)


def _check_one(hv: str, row: HvParam, value: Any) -> None:
    check = row.check
    if unspecified(value):
        if check.required and value is not None:
            raise _refuse(
                f"The {hv} hypervisor parameter '{row.name}' cannot be empty: {check.hint}"
            )
    elif check.test is not None and not check.test(value):
        raise _refuse(
            f"Invalid value '{value}' for the {hv} hypervisor parameter '{row.name}': {check.hint}"
        )
    if row.implements(value):
        return
    if row.built:
        raise _refuse(
            f"The value '{value}' of the {hv} hypervisor parameter '{row.name}' is not"
            f" implemented by Corral yet; use one of {', '.join(map(str, row.only))}"
        )
    raise _refuse(
        f"The {hv} hypervisor parameter '{row.name}' is not implemented by Corral yet;"
        f" leave it at its default ({row.default!r})"
    )


def _table_of(hv: str) -> HvTable:
    table = TABLES.get(hv)
    if table is None:
        raise _refuse(f"Unknown hypervisor '{hv}'")
    return table


def _full(hv: str, filled: Mapping[str, Any]) -> dict[str, Any]:
    # As params.fill: None means "the default".
    return {**DEFAULTS[hv], **{k: v for k, v in filled.items() if v is not None}}


def check_values(hv: str, values: Mapping[str, Any]) -> None:
    """Refuse (OpPrereqError, ECODE_INVAL) a value that fails its parameter's
    check or that Corral does not implement. ``values``: typed, known names;
    None (reset to the default) passes."""
    params = _table_of(hv).params
    for name, value in values.items():
        _check_one(hv, params[name], value)


def check_filled(hv: str, filled: Mapping[str, Any]) -> None:
    """Refuse the filled parameters (defaults, cluster's, OS's, instance's) when a
    value is bad alone or together with others (Ganeti's CheckParameterSyntax).
    Names not given take Ganeti's default."""
    table = _table_of(hv)
    unknown = sorted(set(filled) - set(table.params))
    if unknown:
        raise _refuse(
            f"Unknown {hv} hypervisor parameter '{unknown[0]}';"
            f" known: {', '.join(sorted(table.params))}"
        )
    full = _full(hv, filled)
    check_values(hv, full)
    for cross in table.cross_checks:
        problem = cross(full)
        if problem is not None:
            raise _refuse(problem)


def node_problems(
    hv: str,
    filled: Mapping[str, Any],
    *,
    qemu_help: str | None = None,
    qemu_machines: str | None = None,
) -> list[str]:
    """What is wrong with the filled parameters on this node (Ganeti's
    ValidateParameters): missing files and directories, unknown users, bind
    addresses. Reads the file system and the user database, changes nothing.
    For kvm, ``qemu_help``/``qemu_machines`` are the output of ``kvm --help``
    and ``kvm -machine help``, when the caller has them."""
    table = _table_of(hv)
    full = _full(hv, filled)
    problems = []
    for name, row in table.params.items():
        value, check = full[name], row.check
        if check.on_node is None or (not check.required and unspecified(value)):
            continue
        if not check.on_node(value):
            problems.append(
                f"{name} '{value}' {check.node_hint} on this node: create it, or change {name}"
            )
    if table.node_check is not None:
        problems += table.node_check(full, qemu_help, qemu_machines)
    return problems
