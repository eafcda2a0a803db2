"""Field types of the opcodes, named after Ganeti's (``NonEmptyString``, ...).

Values arrive decoded from JSON, so every tuple of Ganeti's declarations is a
list here; strict validation keeps ``true`` out of integer fields and ``1``
out of boolean ones, as Ganeti's own type checks do.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from corral import constants as C
from corral.hypervisors import HypervisorName
from corral.storage.templates import DiskTemplateName
from corral.storage_names import canonical_template

NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]
# A disk's index, as Ganeti's (its instances have at most 16 disks).
DiskIndex = Annotated[int, Field(ge=0, lt=16)]
Params = dict[str, Any]
# A dict of parameter dicts keyed by a name (hypervisor, OS, disk template).
NestedParams = dict[str, dict[str, Any]]
IntPair = Annotated[list[int], Field(min_length=2, max_length=2)]

# An OS name is ``name`` or ``name+variant``: ``name`` is the OS's directory in
# the search path (what the OS discovery accepts), the variant a line of its
# variants list; neither has "/", spaces or control characters.
_OS_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(\+[A-Za-z0-9_.+-]+)?\Z")


def check_os_name(name: str) -> str:
    """``name`` if it can be an OS name (ValueError otherwise)."""
    if not _OS_NAME_RE.match(name):
        raise ValueError(
            f"{name!r} is not an OS name: use 'name' or 'name+variant' of letters, digits,"
            " '.', '_' and '-'"
        )
    return name


def _canonical_template(value: Any) -> Any:
    return canonical_template(value) if isinstance(value, str) else value


OsName = Annotated[str, AfterValidator(check_os_name)]
# Parameter dicts keyed by OS name (os_hvp, osparams of the cluster).
OsNestedParams = dict[OsName, dict[str, Any]]

# A template an instance uses or a cluster enables: Ganeti's name of one that
# Corral serves with its own (drbd) is taken as Corral's (mirrored).
DiskTemplate = Annotated[DiskTemplateName, BeforeValidator(_canonical_template)]
# The key of a template's disk parameters: as given (drbd's are DRBD's own).
DiskParamsTemplate = DiskTemplateName
Hypervisor = HypervisorName
FileDriver = Literal["blktap2", "blktap", "loop"]
TagKind = Literal["instance", "node", "cluster", "network", "nodegroup"]
NIC_PARAM_KEYS = ("bridge", "vlan", "mac", "name", "ip", "network", "link", "mode")
DiskParams = dict[NonEmptyStr, NonEmptyStr | int]
VerifyErrorCode = Literal[
    "EINSTANCEFAULTYDISK", "EINSTANCEMISSINGDISK", "ENODEFILESTORAGEPATHUNUSABLE",
    "ECLUSTERCLIENTCERT", "ENODESSH", "ENODEDRBDHELPER", "ECLUSTERDANGLINGNODES",
    "ECLUSTERFILECHECK", "ENODEOOBPATH", "ENODEHOOKS", "EINSTANCEDOWN",
    "ECLUSTERDANGLINGINST", "EINSTANCELAYOUT", "ENODEFILECHECK",
    "ENODEGLUSTERSTORAGEPATHUNUSABLE", "EGROUPDIFFERENTPVSIZE", "ENODESETUP",
    "ENODEUSERSCRIPTS", "EINSTANCEWRONGNODE", "ECLUSTERCFG", "ENODEDRBDVERSION", "ENODEHV",
    "EEXTAGS", "EINSTANCEMISSINGCFGPARAMETER", "ENODEORPHANINSTANCE", "ECLUSTERCERT",
    "EINSTANCEUNSUITABLENODE", "ENODEVERSION", "ENODEOS", "ENODEORPHANLV",
    "EINSTANCESPLITGROUPS", "EINSTANCEPOLICY", "ENODETIME", "ENODEN1", "ENODEDRBD",
    "EINSTANCEBADNODE", "ENODERPC", "ENODEFILESTORAGEPATHS", "ENODELVM",
    "ENODESHAREDFILESTORAGEPATHUNUSABLE", "ENODENET",
    "ECLUSTERETCD", "ENODEETCD",  # Corral's own: the etcd members
]  # fmt: skip
VerifySkipCheck = Literal["nplusone_mem"]

NOT_BUILT_KEY = "corral_not_built"

_DEVICE_ACTIONS = ("add", "detach", "remove", "attach", "modify")
_LEGACY_ACTIONS = ("attach", "add", "detach", "remove")


def not_built(default: Any = None, *also: Any) -> Any:
    """A field of Ganeti's that Corral does not implement yet.

    It is accepted when null, at Ganeti's ``default`` or at one of ``also``
    (values that ask for no change, such as an empty dict of updates), and
    refused otherwise: never accepted and ignored.
    """
    extra: Any = {NOT_BUILT_KEY: [default, *also]}
    if isinstance(default, dict | list):
        factory = dict if isinstance(default, dict) else list
        return Field(default_factory=factory, json_schema_extra=extra)
    return Field(default=default, json_schema_extra=extra)


def same_value(value: Any, allowed: Any) -> bool:
    """Equality that keeps ``False``, ``0`` and ``0.0`` apart, as JSON does."""
    return type(value) is type(allowed) and bool(value == allowed)


def _check_device_mods(mods: list[Any], what: str, params_check: Any) -> list[Any]:
    """Ganeti's shapes for ``nics``/``disks`` of OP_INSTANCE_SET_PARAMS: entries
    ``[action, index_or_name, params]`` or the legacy ``[action_or_index, params]``."""
    for mod in mods:
        if not isinstance(mod, list) or len(mod) not in (2, 3):
            raise ValueError(f"each {what} change is [action, index, params]; got {mod!r}")
        if len(mod) == 3:
            action, index, params = mod
            if action not in _DEVICE_ACTIONS:
                raise ValueError(f"{what} action must be one of {', '.join(_DEVICE_ACTIONS)}")
            if isinstance(index, bool) or not isinstance(index, int | str):
                raise ValueError(f"{what} index must be an integer or a name; got {index!r}")
        else:
            first, params = mod
            legacy_index = isinstance(first, int) and not isinstance(first, bool) and first >= 0
            if first not in _LEGACY_ACTIONS and not legacy_index:
                raise ValueError(
                    f"{what} change starts with an action or a device index; got {first!r}"
                )
        params_check(params, what)
    return mods


def _nic_params(params: Any, what: str) -> Any:
    if not isinstance(params, dict) or not all(
        key in NIC_PARAM_KEYS and (value is None or isinstance(value, str))
        for key, value in params.items()
    ):
        raise ValueError(
            f"{what} parameters are a dict of {', '.join(NIC_PARAM_KEYS)}"
            f" to strings or null; got {params!r}"
        )
    return params


def _disk_params(params: Any, what: str) -> None:
    if not isinstance(params, dict) or not all(
        isinstance(key, str)
        and key
        and (
            (isinstance(value, str) and value)
            or (isinstance(value, int) and not isinstance(value, bool))
        )
        for key, value in params.items()
    ):
        raise ValueError(
            f"{what} parameters are a dict of names to non-empty strings or integers;"
            f" got {params!r}"
        )


NicParams = Annotated[dict[str, str | None], AfterValidator(lambda v: _nic_params(v, "NIC"))]
NicMods = Annotated[list[Any], AfterValidator(lambda v: _check_device_mods(v, "NIC", _nic_params))]
DiskMods = Annotated[
    list[Any], AfterValidator(lambda v: _check_device_mods(v, "disk", _disk_params))
]


def _check_recreate_disks(value: list[Any]) -> list[Any]:
    """Ganeti's RecreateDisksInfo: disk indexes, or ``[index, params]`` pairs."""
    out = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            out.append([item, {}])
        elif (
            isinstance(item, list | tuple)
            and len(item) == 2
            and isinstance(item[0], int)
            and not isinstance(item[0], bool)
            and item[0] >= 0
            and isinstance(item[1], dict)
        ):
            out.append([item[0], dict(item[1])])
        else:
            raise ValueError(f"each disk is an index or [index, parameters]; got {item!r}")
    return out


RecreateDisks = Annotated[list[Any], AfterValidator(_check_recreate_disks)]


def _check_priority(value: int) -> int:
    if value not in C.OP_PRIO_SUBMIT_VALID:
        valid = ", ".join(str(p) for p in sorted(C.OP_PRIO_SUBMIT_VALID))
        raise ValueError(f"priority must be one of {valid} (high, normal, low)")
    return value


SubmitPriority = Annotated[int, AfterValidator(_check_priority)]
