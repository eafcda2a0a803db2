"""Parsing gnt-instance's ``--disk``, ``--net``, ``-B``, ``-H`` and ``-O`` options."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cli.common import parse_kv

_UNITS = {"": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_size(text: str, what: str) -> int:
    """MiB from ``512``, ``512m``, ``1g``, ``1.5G``, ``2t``."""
    value = text.strip().lower().rstrip("b")
    unit = value[-1:] if value[-1:] in ("m", "g", "t") else ""
    number = value[: len(value) - len(unit)]
    try:
        mib = float(number) * _UNITS[unit]
    except ValueError:
        raise errors.OpPrereqError(
            f"Invalid {what} '{text}': use a number of MiB, optionally with an m, g or t suffix",
            C.ECODE_INVAL,
        ) from None
    if mib <= 0:
        raise errors.OpPrereqError(f"Invalid {what} '{text}': must be positive", C.ECODE_INVAL)
    return int(-(-mib // 1))


def _indexed(spec: str, what: str) -> tuple[str, dict[str, Any]]:
    """``0:size=1g,mode=rw`` → ``("0", {...})``; ``add:size=1g`` → ``("add", {...})``."""
    head, sep, rest = spec.partition(":")
    if not sep:
        return head, {}
    return head, parse_kv(rest)


def disks_for_add(specs: list[str] | None, os_size: str | None) -> list[dict[str, Any]]:
    """``--disk N:size=...`` options (or ``-s SIZE``) as the opcode's disk list."""
    if os_size and specs:
        raise errors.OpPrereqError("Give either --disk or -s, not both", C.ECODE_INVAL)
    if os_size:
        return [{"size": parse_size(os_size, "disk size")}]
    disks: dict[int, dict[str, Any]] = {}
    for spec in specs or []:
        index, params = _indexed(spec, "disk")
        try:
            idx = int(index)
        except ValueError:
            raise errors.OpPrereqError(f"Invalid disk index in '{spec}'", C.ECODE_INVAL) from None
        if "size" not in params:
            raise errors.OpPrereqError(f"Missing size for disk {idx} ('{spec}')", C.ECODE_INVAL)
        params["size"] = parse_size(str(params["size"]), f"size of disk {idx}")
        disks[idx] = params
    if disks and sorted(disks) != list(range(len(disks))):
        raise errors.OpPrereqError("Disk indices must be 0, 1, 2, ... without gaps", C.ECODE_INVAL)
    return [disks[i] for i in sorted(disks)]


def nics_for_add(specs: list[str] | None, no_nics: bool) -> list[dict[str, Any]]:
    if no_nics:
        if specs:
            raise errors.OpPrereqError("Give either --net or --no-nics", C.ECODE_INVAL)
        return []
    if not specs:
        return [{}]
    nics: dict[int, dict[str, Any]] = {}
    for spec in specs:
        index, params = _indexed(spec, "NIC")
        try:
            nics[int(index)] = params
        except ValueError:
            raise errors.OpPrereqError(f"Invalid NIC index in '{spec}'", C.ECODE_INVAL) from None
    if sorted(nics) != list(range(len(nics))):
        raise errors.OpPrereqError("NIC indices must be 0, 1, 2, ... without gaps", C.ECODE_INVAL)
    return [nics[i] for i in sorted(nics)]


def modifications(specs: list[str] | None, what: str) -> list[list[Any]]:
    """``add:k=v``, ``N:add,k=v``, ``N:remove``, ``remove``, ``N:modify,k=v``, ``N:k=v``
    as ``[op, index, params]`` entries."""
    out: list[list[Any]] = []
    for spec in specs or []:
        head, params = _indexed(spec, what)
        action = None
        for name in ("add", "remove", "modify"):
            if params.pop(name, None) is True:
                action = name
        if head in ("add", "remove"):
            out.append([head, -1, params])
            continue
        try:
            index = int(head)
        except ValueError:
            raise errors.OpPrereqError(
                f"Invalid {what} modification '{spec}'", C.ECODE_INVAL
            ) from None
        out.append([action or "modify", index, params])
    return out


def hv_params(values: list[str] | None) -> tuple[str | None, dict[str, Any]]:
    """``-H hv[:k=v,...]`` → ``(hypervisor or None, params)``."""
    if not values:
        return None, {}
    hypervisor, params = None, {}
    for item in values:
        head, sep, rest = item.partition(":")
        if sep or "=" not in head:
            hypervisor = head
            params.update(parse_kv(rest))
        else:
            params.update(parse_kv(item))
    return hypervisor, params


def os_params(text: str | None) -> dict[str, Any]:
    """``-O k=v,k2=v2`` (``-k`` removes a setting: value None)."""
    return parse_kv(text or "")
