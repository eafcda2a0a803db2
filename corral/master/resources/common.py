"""Fields several resources share, defined as luxid defines them.

The object fields (uuid, serial_no, ctime, mtime, tags, forthcoming) name the
kind of object in their descriptions ("Instance UUID", "Node object serial
number, ..."), and the per-parameter fields (``be/maxmem``, ``ndp/ssh_port``)
take their title and kind from the parameter's tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from corral import constants as C
from corral.query.fields import NODATA, Field, Unavailable

# The only items a query asks for by name, or None for all (see resources.query).
Names = frozenset[str] | None

Getter = Callable[[Any], Any]

# A parameter's value type (Ganeti's VType) as the kind of its query field.
_PARAM_KINDS: dict[str, str] = {
    "string": C.QFT_OTHER,
    "maybe-string": C.QFT_OTHER,
    "bool": C.QFT_BOOL,
    "size": C.QFT_UNIT,
    "int": C.QFT_NUMBER,
    "float": C.QFT_NUMBER_FLOAT,
}


def object_fields(kind: str, get: Getter = lambda row: row.obj) -> list[Field]:
    """uuid, ctime, mtime, serial_no and tags of the row's config object;
    ``kind`` ("Instance", "Node", "Group") is how the descriptions name it."""
    return [
        Field("uuid", "UUID", C.QFT_TEXT, f"{kind} UUID", lambda r: get(r).uuid),
        Field("ctime", "CTime", C.QFT_TIMESTAMP, "Creation timestamp", lambda r: get(r).ctime),
        Field("mtime", "MTime", C.QFT_TIMESTAMP, "Modification timestamp", lambda r: get(r).mtime),
        Field(
            "serial_no",
            "SerialNo",
            C.QFT_NUMBER,
            f"{kind} object serial number, incremented on each modification",
            lambda r: get(r).serial_no,
        ),
        Field("tags", "Tags", C.QFT_OTHER, "Tags", lambda r: sorted(get(r).tags)),
    ]


def alias_fields(fields: list[Field], aliases: Iterable[tuple[str, str]]) -> list[Field]:
    """``fields`` and, for each ``(alias, name)``, the field ``name`` again under
    the name ``alias`` (same title, kind, description and value)."""
    by_name = {f.name: f for f in fields}
    return [*fields, *(replace(by_name[name], name=alias) for alias, name in aliases)]


def forthcoming_field(kind: str) -> Field:
    """Whether the object is only planned.  Corral does not reserve objects
    ahead of their creation, so every object it has exists."""
    return Field(
        "forthcoming", "Forthcoming", C.QFT_BOOL, f"whether the {kind} is forthcoming", _false
    )


def _false(row: Any) -> bool:
    return False


def param_fields(
    prefix: str,
    group_name: str,
    types: dict[str, str],
    titles: dict[str, str],
    params: Getter,
    missing: Unavailable = NODATA,
) -> list[Field]:
    """One field per parameter: ``prefix/name``, titled from ``titles`` (the
    field's name otherwise), its kind from the parameter's type.

    ``params`` gives a row's filled parameters; a parameter missing there has
    no data (``missing`` says how).
    """
    return [
        Field(
            f"{prefix}/{name}",
            titles.get(name, f"{prefix}/{name}"),
            _PARAM_KINDS[types[name]],
            f'The "{name}" {group_name} parameter',
            _param_getter(params, name, missing),
        )
        for name in sorted(types)
    ]


def _param_getter(params: Getter, name: str, missing: Unavailable) -> Getter:
    def getter(row: Any) -> Any:
        return params(row).get(name, missing)

    return getter
