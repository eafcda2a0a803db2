"""Disk parameters (``-D template:key=value``): Ganeti 3.0.2's defaults and
types per disk template, and the checks it makes of cluster disk parameters.

None of Corral's disk templates (diskless, file, sharedfile, blockdev) has a
disk parameter in Ganeti; those that have some (plain, drbd, ext, rbd,
gluster) Corral does not build yet, so their parameters are accepted at
Ganeti's defaults only and a cluster always has the defaults.

Stdlib only and free of slow imports: the gnt-* commands convert ``-D``
values on their side, as Ganeti's do.
"""

from __future__ import annotations

from corral import constants as C
from corral import errors
from corral import paramtypes as PT
from corral import storage_names as N

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    DiskParams = dict[str, dict[str, Any]]
    GivenParams = Mapping[str, Mapping[str, Any]]

# Ganeti's DISK_DT_DEFAULTS: what a cluster initialised without -D has.
DISK_DT_DEFAULTS: dict[str, dict[str, Any]] = {
    N.DT_BLOCK: {},
    N.DT_DISKLESS: {},
    N.DT_DRBD: {
        "c-delay-target": 1,
        "c-fill-target": 0,
        "c-max-rate": 61440,
        "c-min-rate": 4096,
        "c-plan-ahead": 20,
        "data-stripes": 1,
        "disk-barriers": "n",
        "disk-custom": "",
        "dynamic-resync": False,
        "meta-barriers": False,
        "meta-stripes": 1,
        "metavg": "xenvg",
        "net-custom": "",
        "protocol": "C",
        "resync-rate": 61440,
    },
    N.DT_EXT: {"access": "kernelspace"},
    N.DT_FILE: {},
    N.DT_GLUSTER: {"access": "kernelspace", "host": "127.0.0.1", "port": 24007, "volume": "gv0"},
    N.DT_PLAIN: {"stripes": 1},
    N.DT_RBD: {"access": "kernelspace", "pool": "rbd"},
    N.DT_SHARED_FILE: {},
}
# Ganeti's DISK_DT_TYPES: one table for the parameters of every template.
DISK_DT_TYPES: dict[str, str] = {
    "access": PT.STRING,
    "c-delay-target": PT.INT,
    "c-fill-target": PT.INT,
    "c-max-rate": PT.INT,
    "c-min-rate": PT.INT,
    "c-plan-ahead": PT.INT,
    "data-stripes": PT.INT,
    "disk-barriers": PT.STRING,
    "disk-custom": PT.STRING,
    "dynamic-resync": PT.BOOL,
    "host": PT.STRING,
    "meta-barriers": PT.BOOL,
    "meta-stripes": PT.INT,
    "metavg": PT.STRING,
    "net-custom": PT.STRING,
    "pool": PT.STRING,
    "port": PT.INT,
    "protocol": PT.STRING,
    "resync-rate": PT.INT,
    "stripes": PT.INT,
    "volume": PT.STRING,
}
# Ganeti's DISK_VALID_ACCESS_MODES (a frozenset its messages join in hash order;
# listed sorted here).
ACCESS_MODES = ("kernelspace", "userspace")
# What Ganeti's LUClusterSetParams warns about when a template's parameters change.
CHANGE_WARNINGS: dict[str, tuple[str, ...]] = {
    N.DT_DRBD: (
        "Changing DRBD parameters only affects devices created in the future, not existing ones",
        "You need to shutdown and start (not reboot!) existing instances to adopt the changes",
        "Alternatively you can swap the secondary node by running `gnt-instance replace-disks"
        " --new-secondary $instance`",
    ),
}


def typed(diskparams: GivenParams) -> DiskParams:
    """A copy with each template's values converted to Ganeti's types (its
    ForceDictType with DISK_DT_TYPES): TypeEnforcementError as Ganeti's."""
    out = {}
    for template, params in diskparams.items():
        if not isinstance(params, dict):  # Ganeti's ForceDictType's first check
            raise errors.TypeEnforcementError(f"Expected dictionary, got '{params}'")
        converted = dict(params)
        PT.force_dict_type(converted, DISK_DT_TYPES)
        out[template] = converted
    return out


def check_options(diskparams: DiskParams, prefix: str) -> None:
    """Ganeti's VerifyDictOptions against the defaults, then its access mode
    check; OpPrereqError(ECODE_INVAL) as ``"<prefix>: <what>"``."""
    unknown = []
    for template, params in diskparams.items():
        if template not in DISK_DT_DEFAULTS:
            unknown.append(template)
        else:
            unknown += [f"{template}/{k}" for k in params if k not in DISK_DT_DEFAULTS[template]]
    if unknown:
        # Ganeti formats the inner OpPrereqError's arguments (message, code).
        inner = (f"Provided option keys not supported: {', '.join(unknown)}", C.ECODE_INVAL)
        raise errors.OpPrereqError(f"{prefix}: {inner}", C.ECODE_INVAL)
    for template, params in diskparams.items():
        access = params.get("access", ACCESS_MODES[0])
        if access not in ACCESS_MODES:
            raise errors.OpPrereqError(
                f"{prefix}: Invalid value of '{template}:access': '{access}' (expected one of"
                f" {', '.join(ACCESS_MODES)})",
                C.ECODE_INVAL,
            )


def check_implemented(diskparams: DiskParams) -> None:
    """Refuse a value other than Ganeti's default: the templates that have
    parameters are not built yet."""
    for template, params in diskparams.items():
        for key, value in params.items():
            default = DISK_DT_DEFAULTS[template][key]
            if value != default or type(value) is not type(default):
                raise errors.OpPrereqError(
                    f"Disk parameter '{template}:{key}' is not supported by Corral yet (it has"
                    f" no {template} disks); only Ganeti's default {default!r} is accepted"
                    f" (got {value!r})",
                    C.ECODE_INVAL,
                )


def check(diskparams: GivenParams, prefix: str) -> DiskParams:
    """The typed parameters after all of Ganeti's checks and Corral's."""
    values = typed(diskparams)
    check_options(values, prefix)
    check_implemented(values)
    return values


def change_warnings(templates: Iterable[str]) -> list[str]:
    """What a change of these templates' parameters is warned about."""
    return [text for template in templates for text in CHANGE_WARNINGS.get(template, ())]


def check_init(diskparams: GivenParams) -> DiskParams:
    """:func:`check` as ``gnt-cluster init`` makes it: Ganeti's bootstrap first
    refuses a template's keys that strictly include its defaults' keys."""
    values = typed(diskparams)
    for template, params in values.items():
        known = set(DISK_DT_DEFAULTS.get(template, params))
        if set(params) > known:
            raise errors.OpPrereqError(
                f"Invalid parameters for disk template {template}:"
                f" {', '.join(sorted(set(params) - known))}",
                C.ECODE_INVAL,
            )
    return check(values, "While verify diskparam options")
