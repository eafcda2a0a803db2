"""Backend, NIC and hypervisor parameters: names, types, defaults, parsing.

Values arrive as strings from the command line (``-B memory=512M``) or typed
from luxi/RAPI; ``check_params`` turns both into the declared types and
refuses unknown names with a clear message.
"""

from __future__ import annotations

import re
from typing import Any

from corral import constants as C
from corral import errors
from corral import hvparams as HV
from corral import paramtypes as PT
from corral.hvparams.foreign import PARAMS as FOREIGN_HV_PARAMS

# The value that resets a parameter to its default (Ganeti's VALUE_DEFAULT).
VALUE_DEFAULT = "default"

# Types
T_SIZE = PT.SIZE  # MiB, with an optional m/g/t unit
T_INT = PT.INT
T_BOOL = PT.BOOL
T_STRING = PT.STRING

BE_TYPES = {
    "maxmem": T_SIZE,
    "minmem": T_SIZE,
    "vcpus": T_INT,
    "auto_balance": T_BOOL,
    "always_failover": T_BOOL,
    "spindle_use": T_INT,
}
BE_DEFAULTS: dict[str, Any] = {
    "always_failover": False,
    "auto_balance": True,
    "maxmem": 128,
    "minmem": 128,
    "spindle_use": 1,
    "vcpus": 1,
}
NIC_MODES = ("bridged", "routed", "openvswitch")
NIC_TYPES = {"mode": T_STRING, "link": T_STRING, "vlan": T_STRING}
NIC_DEFAULTS: dict[str, Any] = {"mode": "bridged", "link": "xen-br0", "vlan": ""}
# Declared in corral.hvparams, one table per hypervisor (types are Ganeti's VTYPE
# names, which T_STRING/T_INT/T_BOOL are; "maybe-string" converts as a string).
HV_TYPES = HV.TYPES
HV_DEFAULTS = HV.DEFAULTS
check_filled_hvparams = HV.check_filled

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mMgGtT]?)[bB]?\s*$")
_UNIT = {"": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_size(value: Any, what: str = "size") -> int:
    """MiB of a disk from ``512``, ``512M``, ``1.5G``, ``2T`` (rounded up to
    whole MiB); a number is taken as given, as Ganeti's masterd takes a disk's
    size (its commands round it: corral.paramtypes.parse_unit)."""
    if isinstance(value, bool):
        raise errors.OpPrereqError(f"Invalid {what} {value!r}", C.ECODE_INVAL)
    if isinstance(value, int):
        if value < 0:
            raise errors.OpPrereqError(f"Invalid {what} {value}: negative", C.ECODE_INVAL)
        return value
    match = _SIZE_RE.match(str(value))
    if match is None:
        raise errors.OpPrereqError(
            f"Invalid {what} '{value}': use a number of MiB, optionally with an m, g or t"
            " suffix (e.g. 512m, 10g)",
            C.ECODE_INVAL,
        )
    mib = float(match.group(1)) * _UNIT[match.group(2).lower()]
    return int(-(-mib // 1))


def _parameter_size(key: str, value: Any) -> int:
    """MiB, rounded up to a multiple of 4 through every door, as Ganeti's
    masterd converts a size parameter (ForceDictType: ParseUnit)."""
    try:
        if isinstance(value, bool):
            raise errors.UnitParseError("Invalid format")
        return PT.parse_unit(value)
    except errors.UnitParseError as err:
        raise errors.OpPrereqError(
            f"Invalid value for '{key}' '{value}' ({err}): use a number of MiB, optionally"
            " with an m, g or t suffix (e.g. 512m, 10g)",
            C.ECODE_INVAL,
        ) from None


def _convert(kind: str, key: str, value: Any) -> Any:
    if kind == T_SIZE:
        return _parameter_size(key, value)
    if kind == T_INT:
        if isinstance(value, bool):
            raise errors.OpPrereqError(f"'{key}' must be an integer, got {value!r}", C.ECODE_INVAL)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise errors.OpPrereqError(
                f"'{key}' must be an integer, got {value!r}", C.ECODE_INVAL
            ) from None
    if kind == T_BOOL:
        # Ganeti's ForceDictType: a text must say true or false (any case);
        # anything else counts by its truth ("" and 0 are false, 1 is true).
        if isinstance(value, str) and value:
            if value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise errors.OpPrereqError(
                f"'{key}' must be true or false, got {value!r}", C.ECODE_INVAL
            )
        return bool(value)
    return "" if value is None else str(value)


def check_params(
    values: dict[str, Any], types: dict[str, str], what: str, allow_none: bool = False
) -> dict[str, Any]:
    """Typed copies of ``values``; unknown names refused. Where changes are
    allowed, None and Ganeti's ``"default"`` mean "reset" (returned as None)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in types:
            raise errors.OpPrereqError(
                f"Unknown {what} parameter '{key}'; known: {', '.join(sorted(types))}",
                C.ECODE_INVAL,
            )
        if allow_none and (value is None or value == VALUE_DEFAULT):
            out[key] = None
            continue
        out[key] = _convert(types[key], key, value)
    return out


def upgrade_beparams(values: dict[str, Any]) -> dict[str, Any]:
    """The legacy ``memory`` sets both ``maxmem`` and ``minmem``."""
    values = dict(values)
    if "memory" in values:
        memory = values.pop("memory")
        values.setdefault("maxmem", memory)
        values.setdefault("minmem", memory)
    return values


def check_beparams(values: dict[str, Any], allow_none: bool = False) -> dict[str, Any]:
    checked = check_params(upgrade_beparams(values), BE_TYPES, "backend", allow_none)
    maxmem, minmem = checked.get("maxmem"), checked.get("minmem")
    if maxmem is not None and minmem is not None and minmem > maxmem:
        raise errors.OpPrereqError(
            f"Minimum memory ({minmem}) is larger than maximum memory ({maxmem})", C.ECODE_INVAL
        )
    return checked


def check_hvparams(
    hypervisor: str, values: dict[str, Any], allow_none: bool = False
) -> dict[str, Any]:
    """Typed copies of ``values``, each checked alone (see corral.hvparams); the
    checks across parameters need the filled ones: check_filled_hvparams."""
    types = HV_TYPES.get(hypervisor)
    if types is None:
        raise errors.OpPrereqError(f"Unknown hypervisor '{hypervisor}'", C.ECODE_INVAL)
    checked = check_params(values, types, f"{hypervisor} hypervisor", allow_none)
    HV.check_values(hypervisor, checked)
    return checked


def check_os_hvparams(hypervisor: str, values: dict[str, Any]) -> dict[str, Any]:
    """OS-specific hypervisor parameters, typed: checked as :func:`check_hvparams`
    for a hypervisor Corral runs; for Ganeti's others, their names and types
    (Ganeti stores them; Corral has no use for them)."""
    names = FOREIGN_HV_PARAMS.get(hypervisor)
    if names is None:
        return check_hvparams(hypervisor, values)
    types = {name: PT.HV_PARAMETER_TYPES[name] for name in names}
    return check_params(values, types, f"{hypervisor} hypervisor")


def fill(defaults: dict[str, Any], *overrides: dict[str, Any]) -> dict[str, Any]:
    """Defaults overridden in order; a None value means "use the default"."""
    out = dict(defaults)
    for override in overrides:
        for key, value in override.items():
            if value is not None:
                out[key] = value
    return out


def apply_changes(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Instance-level updates: None or Ganeti's ``"default"`` removes the
    override (Ganeti's GetUpdatedParams)."""
    out = dict(current)
    for key, value in changes.items():
        if value is None or value == VALUE_DEFAULT:
            out.pop(key, None)
        else:
            out[key] = value
    return out
