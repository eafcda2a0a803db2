"""The row of a hypervisor parameter table, and the per-value checks rows use.

A :class:`Check` says what Ganeti's ``hv_base`` check tuples say: whether a
value is required, what it must look like (tested on the master, cheaply) and
what must hold for it on a node (tested where the instance runs).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# Ganeti's value types (constants.VTYPE_*), the names corral.params uses too.
VTYPE_STRING = "string"
VTYPE_MAYBE_STRING = "maybe-string"
VTYPE_INT = "int"
VTYPE_BOOL = "bool"

Test = Callable[[Any], bool]


def unspecified(value: Any) -> bool:
    """Ganeti's "no value" (``_IsParamValueUnspecified``): None or the empty string."""
    return value is None or value == ""


@dataclass(frozen=True)
class Check:
    """One parameter's checks. ``hint`` tells the user what to give instead."""

    test: Test | None = None
    hint: str = ""
    required: bool = False
    on_node: Test | None = None
    node_hint: str = ""


@dataclass(frozen=True)
class HvParam:
    """One hypervisor parameter: Ganeti's name, type and default, its check, and
    whether Corral implements it (``built``); ``only``, when not empty, lists the
    values Corral implements (the others are refused as not built)."""

    name: str
    type: str
    default: Any
    check: Check
    built: bool
    only: tuple[Any, ...] = ()

    def implements(self, value: Any) -> bool:
        """Whether Corral runs an instance with this value (the compatibility
        rule: a parameter not built only takes Ganeti's default)."""
        if value is None or value == self.default:
            return True
        return self.built and (not self.only or value in self.only)


NO_CHECK = Check()


def one_of(choices: Iterable[Any], required: bool) -> Check:
    """The value must be one of ``choices`` (Ganeti's ``ParamInSet``)."""
    allowed = tuple(choices)
    return Check(lambda v: v in allowed, "use one of " + ", ".join(map(str, allowed)), required)


def is_norm_abs_path(value: Any) -> bool:
    """An absolute, normalised path (Ganeti's ``IsNormAbsPath``)."""
    return isinstance(value, str) and os.path.isabs(value) and os.path.normpath(value) == value


_URL_RE = re.compile(r"(https?|ftps?)://")


def is_url(value: Any) -> bool:
    """An HTTP(S) or FTP(S) URL (Ganeti's ``IsUrl``: the scheme is enough)."""
    return isinstance(value, str) and _URL_RE.match(value) is not None


def _int_test(test: Callable[[int], bool]) -> Test:
    return lambda v: isinstance(v, int) and test(v)


_PATH_HINT = "use an absolute, normalized path"
_OPTIONAL = ", or '' for none"


def file_check(required: bool) -> Check:
    """A file that must exist on the node."""
    return Check(
        is_norm_abs_path,
        _PATH_HINT + ("" if required else _OPTIONAL),
        required,
        os.path.isfile,
        "does not exist or is not a file",
    )


FILE_OR_URL_OPT = Check(
    lambda v: is_norm_abs_path(v) or is_url(v),
    _PATH_HINT + " or a http(s)/ftp(s) URL" + _OPTIONAL,
    False,
    lambda v: os.path.isfile(v) or is_url(v),
    "does not exist or is not a file",
)
DIR_OPT = Check(
    is_norm_abs_path, _PATH_HINT + _OPTIONAL, False, os.path.isdir, "is not a directory"
)
# Ganeti's _NET_PORT_CHECK: 0 < x < 65535, so 65535 itself is refused.
NET_PORT_REQ = Check(_int_test(lambda v: 0 < v < 65535), "use a port from 1 to 65534", True)
NON_NEGATIVE_REQ = Check(_int_test(lambda v: v >= 0), "use a number of 0 or more", True)
NON_NEGATIVE_OPT = Check(_int_test(lambda v: v >= 0), "use a number of 0 or more")
VIRTIO_NET_QUEUES_OPT = Check(_int_test(lambda v: 0 < v < 9), "use 1 to 8 queues")
MIGRATION_MODES = ("live", "non-live")
MIGRATION_MODE_REQ = one_of(MIGRATION_MODES, required=True)


def int_range(low: int, high: int, hint: str) -> Check:
    """An optional integer from ``low`` to ``high``."""
    return Check(_int_test(lambda v: low <= v <= high), hint)


def _cpu_mask_ok(mask: str) -> bool:
    # Ganeti's ParseCpuMask: "a,b-c"; an empty mask or part is accepted.
    for part in mask.split(",") if mask else ():
        bounds = part.split("-")
        if len(bounds) > 2:
            return False
        try:
            if int(bounds[0]) > int(bounds[-1]):
                return False
        except ValueError:
            return False
    return True


def multi_cpu_mask_ok(value: Any) -> bool:
    """Ganeti's multiple CPU mask: per-vCPU masks separated by ':', each 'all' or 'a,b-c'."""
    if not isinstance(value, str):
        return False
    return all(part == "all" or _cpu_mask_ok(part) for part in value.split(":"))


MULTI_CPU_MASK_OPT = Check(
    multi_cpu_mask_ok,
    "use CPU numbers and ranges such as 0-2,5, one such mask per vCPU separated by ':', or 'all'",
)
