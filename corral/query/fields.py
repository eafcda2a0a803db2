"""Field definitions and the ``Query``/``QueryFields`` result format.

A result is ``{"fields": [fielddef...], "data": [[[status, value]...]...]}``
where a field definition is ``{"name", "title", "kind", "doc"}``, as Ganeti's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from corral import constants as C
from corral.nicesort import luxid_key
from corral.query.filter import compile_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Field:
    """One queryable field of a resource."""

    name: str
    title: str
    kind: str
    doc: str
    getter: Callable[[Any], Any]
    # What the getter needs from the resource (e.g. store columns), so only that is loaded.
    needs: tuple[str, ...] = ()

    def definition(self) -> dict[str, str]:
        return {"name": self.name, "title": self.title, "kind": self.kind, "doc": self.doc}


def unknown_definition(name: str) -> dict[str, str]:
    return {"name": name, "title": name, "kind": C.QFT_UNKNOWN, "doc": f"Unknown field '{name}'"}


class FieldSet:
    """The fields of one resource, by name."""

    def __init__(self, fields: Iterable[Field]) -> None:
        self.fields = {f.name: f for f in fields}

    def needs(self, names: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for name in names:
            field = self.fields.get(name)
            if field is not None:
                out.update(field.needs)
        return out

    def definitions(self, names: list[str] | None) -> list[dict[str, str]]:
        if not names:  # all, in luxid's (Haskell niceSort) order
            fields = sorted(self.fields.values(), key=lambda f: luxid_key(f.name))
            return [f.definition() for f in fields]
        return self._selected(names)

    def _selected(self, names: list[str]) -> list[dict[str, str]]:
        return [
            self.fields[n].definition() if n in self.fields else unknown_definition(n)
            for n in names
        ]

    def query(self, names: list[str], qfilter: Any, items: Iterable[Any]) -> dict[str, Any]:
        """Evaluate a query over ``items`` into Ganeti's result form."""
        matches = compile_filter(qfilter, self.value_getter)
        selected = list(items)
        if qfilter:
            selected = [item for item in selected if matches(item)]
        # Column by column: one comprehension per field costs far less than a
        # Python loop per cell when a query returns thousands of rows.
        columns = [_column(self.fields.get(name), selected) for name in names]
        if columns:
            data = [list(row) for row in zip(*columns, strict=True)]
        else:
            data = [[] for _ in selected]
        # Exactly the requested fields (even none), so rows and definitions match.
        return {"fields": self._selected(names), "data": data}

    def value_getter(self, name: str) -> Callable[[Any], Any]:
        from corral import errors

        field = self.fields.get(name)
        if field is None:
            raise errors.QueryFilterParseError(f"Unknown field '{name}' in the query filter")
        getter = field.getter

        def value(item: Any) -> Any:
            got = getter(item)
            return got.value if isinstance(got, Unavailable) else got

        return value


class Unavailable:
    """A cell without data; its status says why (RS_NODATA, RS_UNAVAIL, RS_OFFLINE)."""

    __slots__ = ("status", "value")

    def __init__(self, status: int) -> None:
        self.status = status
        self.value = None


NODATA = Unavailable(C.RS_NODATA)
UNAVAIL = Unavailable(C.RS_UNAVAIL)
OFFLINE = Unavailable(C.RS_OFFLINE)


def plain(value: Any) -> Any:
    """A getter's value for APIs without cell statuses (QueryJobs): None if unavailable."""
    return None if isinstance(value, Unavailable) else value


def cell(value: Any) -> list[Any]:
    if isinstance(value, Unavailable):
        return [value.status, None]
    return [C.RS_NORMAL, value]


def _column(field: Field | None, items: list[Any]) -> list[list[Any]]:
    """The cells of one field for every item (all "unknown" for an unknown field)."""
    if field is None:
        return [[C.RS_UNKNOWN, None] for _ in items]
    normal = C.RS_NORMAL
    return [
        [normal, value] if value.__class__ is not Unavailable else [value.status, None]
        for value in map(field.getter, items)
    ]
