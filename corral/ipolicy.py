"""The instance policy (ipolicy): Ganeti 3.0.2's limits on instance specs.

A policy is a plain dict, stored on the cluster (complete) and on node groups
(partial, filled from the cluster's)::

    {"minmax": [{"min": {spec: n, ...}, "max": {spec: n, ...}}, ...],
     "std": {spec: n, ...},                 # cluster only
     "disk-templates": ["diskless", ...],
     "vcpu-ratio": 4.0, "spindle-ratio": 32.0}

An instance complies when every spec lies within one of the ``minmax`` pairs
and its disk template is allowed.  This module has no heavy imports: the
``gnt-*`` commands use its names and defaults too.

Where Ganeti joins a Python set into a message (so that the order changes from
run to run), the order here is fixed: the policy's own order, else sorted.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from corral import constants as C
from corral import errors
from corral.storage_names import (
    DT_DISKLESS,
    DT_MIRRORED,
    GANETI_DISK_TEMPLATES,
    canonical_template,
)

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

ISPEC_MEM_SIZE = "memory-size"
ISPEC_CPU_COUNT = "cpu-count"
ISPEC_DISK_COUNT = "disk-count"
ISPEC_DISK_SIZE = "disk-size"
ISPEC_NIC_COUNT = "nic-count"
ISPEC_SPINDLE_USE = "spindle-use"
ISPECS_PARAMETERS = (
    ISPEC_CPU_COUNT,
    ISPEC_DISK_COUNT,
    ISPEC_DISK_SIZE,
    ISPEC_MEM_SIZE,
    ISPEC_NIC_COUNT,
    ISPEC_SPINDLE_USE,
)
ISPECS_MINMAX = "minmax"
ISPECS_MIN = "min"
ISPECS_MAX = "max"
ISPECS_STD = "std"
ISPECS_MINMAX_KEYS = (ISPECS_MAX, ISPECS_MIN)
IPOLICY_DTS = "disk-templates"
IPOLICY_VCPU_RATIO = "vcpu-ratio"
IPOLICY_SPINDLE_RATIO = "spindle-ratio"
IPOLICY_PARAMETERS = (IPOLICY_SPINDLE_RATIO, IPOLICY_VCPU_RATIO)
IPOLICY_ALL_KEYS = frozenset({ISPECS_MINMAX, ISPECS_STD, IPOLICY_DTS, *IPOLICY_PARAMETERS})
VALUE_DEFAULT = "default"
VALUE_AUTO = "auto"

# Every disk template Ganeti knows, in the order of its IPOLICY_DEFAULTS, and Corral's own.
DISK_TEMPLATES = (*sorted(GANETI_DISK_TEMPLATES), DT_MIRRORED)
ISPECS_MINMAX_DEFAULTS: dict[str, dict[str, int]] = {
    ISPECS_MAX: {
        ISPEC_CPU_COUNT: 8,
        ISPEC_DISK_COUNT: 16,
        ISPEC_DISK_SIZE: 1048576,
        ISPEC_MEM_SIZE: 32768,
        ISPEC_NIC_COUNT: 8,
        ISPEC_SPINDLE_USE: 12,
    },
    ISPECS_MIN: {
        ISPEC_CPU_COUNT: 1,
        ISPEC_DISK_COUNT: 1,
        ISPEC_DISK_SIZE: 1024,
        ISPEC_MEM_SIZE: 128,
        ISPEC_NIC_COUNT: 1,
        ISPEC_SPINDLE_USE: 1,
    },
}
IPOLICY_DEFAULTS: dict[str, Any] = {
    IPOLICY_DTS: list(DISK_TEMPLATES),
    ISPECS_MINMAX: [copy.deepcopy(ISPECS_MINMAX_DEFAULTS)],
    IPOLICY_SPINDLE_RATIO: 32.0,
    ISPECS_STD: dict(ISPECS_MINMAX_DEFAULTS[ISPECS_MIN]),
    IPOLICY_VCPU_RATIO: 4.0,
}


def comma_join(items: Iterable[Any]) -> str:
    """Ganeti's CommaJoin."""
    return ", ".join(str(item) for item in items)


# Filling and defaults
def fill_ipolicy(default: dict[str, Any], custom: dict[str, Any]) -> dict[str, Any]:
    """``custom`` with what it lacks taken from ``default`` (Ganeti's FillIPolicy):
    whole keys, except ``std`` which is filled spec by spec."""
    out = copy.deepcopy(custom)
    for key, value in default.items():
        if key not in out:
            out[key] = copy.deepcopy(value)
        elif key == ISPECS_STD:
            out[key] = {**copy.deepcopy(value), **out[key]}
    return out


def initial_ipolicy(custom: dict[str, Any], enabled: Sequence[str]) -> dict[str, Any]:
    """A new cluster's policy: ``custom`` filled from Ganeti's defaults, its disk
    templates cut down to the enabled ones (as Ganeti's cluster init does)."""
    policy = fill_ipolicy(IPOLICY_DEFAULTS, custom)
    policy[IPOLICY_DTS] = [dt for dt in policy[IPOLICY_DTS] if dt in enabled]
    return policy


def group_ipolicy(cluster_policy: dict[str, Any], group_policy: dict[str, Any]) -> dict[str, Any]:
    """A node group's effective policy: its own keys over the cluster's."""
    return fill_ipolicy(cluster_policy, group_policy)


# Syntax
def force_ints(spec: Any, names: Sequence[str]) -> dict[str, Any]:
    """A copy of ``spec`` with integer values for the keys ``names``, as Ganeti's
    ForceDictType does (``TypeEnforcementError`` otherwise)."""
    if not isinstance(spec, dict):
        raise errors.TypeEnforcementError(f"Expected dictionary, got '{spec}'")
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key not in names:
            raise errors.TypeEnforcementError(f"Unknown parameter '{key}'")
        try:
            out[key] = int(value)
        except (TypeError, ValueError):
            raise errors.TypeEnforcementError(
                f"'{key}' (value {value}) is not a valid integer"
            ) from None
    return out


def force_int_specs(spec: Any) -> dict[str, Any]:
    """``spec`` with the integer values of an instance specification."""
    return force_ints(spec, ISPECS_PARAMETERS)


def _missing(spec: dict[str, Any], keyname: str) -> None:
    missing = [p for p in ISPECS_PARAMETERS if p not in spec]
    if missing:
        raise errors.ConfigurationError(
            f"Missing instance specs parameters for {keyname}: {comma_join(missing)}"
        )


def _check_ispecs(policy: dict[str, Any], check_std: bool) -> None:
    """Ganeti's InstancePolicy.CheckISpecSyntax."""
    if ISPECS_MINMAX not in policy:
        return
    if check_std and ISPECS_STD not in policy:
        raise errors.ConfigurationError(f"Missing key in ipolicy: {ISPECS_STD}")
    std = policy.get(ISPECS_STD) or {}
    if check_std:
        _missing(std, ISPECS_STD)
    if not policy[ISPECS_MINMAX]:
        raise errors.ConfigurationError("Empty minmax specifications")
    std_is_good = False
    for pair in policy[ISPECS_MINMAX]:
        missing = [k for k in ISPECS_MINMAX_KEYS if k not in pair]
        if missing:
            raise errors.ConfigurationError(
                f"Missing instance specification: {comma_join(missing)}"
            )
        for key, spec in pair.items():
            _missing(spec, key)
        pair_std_ok = True
        for name in ISPECS_PARAMETERS:
            low, high = pair[ISPECS_MIN][name], pair[ISPECS_MAX][name]
            if low > high:
                raise errors.ConfigurationError(
                    f"Invalid specification of min/max values for {name}: {low}/{high}"
                )
            if check_std:
                pair_std_ok = pair_std_ok and low <= std.get(name, low) <= high
        std_is_good = std_is_good or pair_std_ok
    if not std_is_good:
        raise errors.ConfigurationError("Invalid std specifications")


def check_syntax(policy: dict[str, Any], check_std: bool) -> None:
    """Ganeti's InstancePolicy.CheckParameterSyntax; raises ConfigurationError."""
    _check_ispecs(policy, check_std)
    if IPOLICY_DTS in policy:
        templates = policy[IPOLICY_DTS]
        if not templates:
            raise errors.ConfigurationError(
                "Instance policy must contain at least one disk template"
            )
        wrong = sorted(set(templates) - set(DISK_TEMPLATES))
        if wrong:
            raise errors.ConfigurationError(f"Invalid disk template(s) {comma_join(wrong)}")
    for key in IPOLICY_PARAMETERS:
        if key in policy:
            _to_float(key, policy[key], errors.ConfigurationError, "key")
    wrong_keys = sorted(set(policy) - IPOLICY_ALL_KEYS)
    if wrong_keys:
        raise errors.ConfigurationError(f"Invalid keys in ipolicy: {comma_join(wrong_keys)}")


def _to_float(key: str, value: Any, error: type[errors.GenericError], what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        text = f"Invalid value for {what} '{key}': '{value}', error: {err}"
        if error is errors.OpPrereqError:
            raise errors.OpPrereqError(text, C.ECODE_INVAL) from None
        raise error(text) from None


def _updated_value(key: str, value: Any, old: dict[str, Any], group_policy: bool) -> Any:
    """The new value of one key of a policy change (checked, typed)."""
    if key in IPOLICY_PARAMETERS:
        return _to_float(key, value, errors.OpPrereqError, "attribute")
    if key == ISPECS_MINMAX:
        if not isinstance(value, list):
            raise errors.OpPrereqError(
                f"Invalid instance policy: {ISPECS_MINMAX} must be a list of"
                f" {{min, max}} specifications, got {value!r}",
                C.ECODE_INVAL,
            )
        pairs = []
        for pair in value:
            if not isinstance(pair, dict):
                raise errors.TypeEnforcementError(f"Expected dictionary, got '{pair}'")
            pairs.append({k: force_int_specs(spec) for k, spec in pair.items()})
        return pairs
    if key == ISPECS_STD:
        if group_policy:
            raise errors.OpPrereqError(
                f"{key} cannot appear in group instance specs", C.ECODE_INVAL
            )
        if not isinstance(value, dict):
            raise errors.TypeEnforcementError(f"Expected dictionary, got '{value}'")
        return force_int_specs({**old.get(key, {}), **value})
    if isinstance(value, str) or not isinstance(value, Iterable):
        # Ganeti takes list(value): a string would become its letters.
        value = list(str(value))
    return list(value)


def updated_ipolicy(
    old: dict[str, Any], change: dict[str, Any], group_policy: bool = False
) -> dict[str, Any]:
    """``old`` with ``change`` applied and checked (Ganeti's GetUpdatedIPolicy).

    An empty value or ``"default"`` removes a key of a group's policy and is
    refused for the cluster's, whose policy is always complete.
    """
    policy = copy.deepcopy(old)
    for key, value in change.items():
        if key not in IPOLICY_ALL_KEYS:
            raise errors.OpPrereqError(f"Invalid key in new ipolicy: {key}", C.ECODE_INVAL)
        if not value or value in (VALUE_DEFAULT, [VALUE_DEFAULT]):
            if not group_policy:
                raise errors.OpPrereqError(
                    f"Can't unset ipolicy attribute '{key}' on the cluster'", C.ECODE_INVAL
                )
            policy.pop(key, None)
            continue
        policy[key] = _updated_value(key, value, old, group_policy)
    try:
        check_syntax(policy, not group_policy)
    except errors.ConfigurationError as err:
        text = f"Invalid instance policy: {err.message}"
        raise errors.OpPrereqError(text, C.ECODE_INVAL) from None
    return policy


def check_vs_disk_templates(policy: dict[str, Any], enabled: Sequence[str]) -> None:
    """Every template the policy allows must be enabled on the cluster."""
    not_enabled = [dt for dt in policy[IPOLICY_DTS] if canonical_template(dt) not in enabled]
    if not_enabled:
        raise errors.OpPrereqError(
            "The following disk templates are allowed by the ipolicy, but not enabled on"
            f" the cluster: {comma_join(not_enabled)}",
            C.ECODE_INVAL,
        )


# Violations
def _minmax_violation(name: str, qualifier: str, pair: dict[str, Any], value: Any) -> str | None:
    if value is None or value == VALUE_AUTO:
        return None
    high = pair[ISPECS_MAX].get(name, value)
    low = pair[ISPECS_MIN].get(name, value)
    if value > high or low > value:
        fqn = f"{name}/{qualifier}" if qualifier else name
        return f"{fqn} value {value} is not in range [{low}, {high}]"
    return None


def spec_violations(
    policy: dict[str, Any],
    mem_size: int | None,
    cpu_count: int | None,
    disk_sizes: Sequence[int],
    nic_count: int | None,
    spindle_use: int | None,
    disk_types: Sequence[str],
) -> list[str]:
    """What of these specs the policy refuses (Ganeti's ComputeIPolicySpecViolation).

    The disk count is ``len(disk_sizes)``; ``None`` values are not checked.
    Of several ``minmax`` pairs, the one with the fewest violations counts.
    """
    tests: list[tuple[str, str, Any]] = [
        (ISPEC_MEM_SIZE, "", mem_size),
        (ISPEC_CPU_COUNT, "", cpu_count),
        (ISPEC_NIC_COUNT, "", nic_count),
        (ISPEC_SPINDLE_USE, "", spindle_use),
        *((ISPEC_DISK_SIZE, str(idx), size) for idx, size in enumerate(disk_sizes)),
    ]
    # A policy written by Ganeti's tools allows drbd: Corral's mirrored.
    allowed = [canonical_template(dt) for dt in policy[IPOLICY_DTS]]
    out = []
    if disk_sizes:
        tests.append((ISPEC_DISK_COUNT, "", len(disk_sizes)))
    elif DT_DISKLESS not in allowed:
        # The disk count does not apply to diskless instances; the template does.
        out.append(
            f"Disk template diskless is not allowed (allowed templates {comma_join(allowed)})"
        )
    forbidden = sorted(set(disk_types) - set(allowed))
    if forbidden:
        out.append(
            f"Disk template {comma_join(forbidden)} is not allowed"
            f" (allowed templates: {comma_join(allowed)})"
        )
    fewest: list[str] | None = None
    for pair in policy[ISPECS_MINMAX]:
        found = [e for e in (_minmax_violation(n, q, pair, v) for n, q, v in tests) if e]
        if fewest is None or len(found) < len(fewest):
            fewest = found
    return out + (fewest or [])


def instance_spec_violations(
    policy: dict[str, Any], ispec: dict[str, Any], disk_types: Sequence[str]
) -> list[str]:
    """Violations of an instance specification (Ganeti's
    ComputeIPolicyInstanceSpecViolation): ``ispec`` has the ``ISPEC_*`` keys,
    ``disk-size`` a list of sizes; missing keys are not checked."""
    return spec_violations(
        policy,
        ispec.get(ISPEC_MEM_SIZE),
        ispec.get(ISPEC_CPU_COUNT),
        ispec.get(ISPEC_DISK_SIZE, []),
        ispec.get(ISPEC_NIC_COUNT, 0),
        ispec.get(ISPEC_SPINDLE_USE),
        disk_types,
    )


def disk_sizes_violations(
    policy: dict[str, Any], disk_sizes: Sequence[int], disk_types: Sequence[str]
) -> list[str]:
    """Violations of the disks alone: sizes, count and templates."""
    return spec_violations(policy, None, None, disk_sizes, None, None, disk_types)


def instance_violations(
    policy: dict[str, Any], beparams: dict[str, Any], disks: Sequence[tuple[int, str]], nics: int
) -> list[str]:
    """Violations of an existing instance: its filled backend parameters, its
    disks as ``(size, template)`` and its number of NICs."""
    return spec_violations(
        policy,
        beparams.get("maxmem"),
        beparams.get("vcpus"),
        [size for size, _ in disks],
        nics,
        beparams.get("spindle_use"),
        [template for _, template in disks],
    )
