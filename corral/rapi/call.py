"""One RAPI request as its handler sees it: path items, query, body, masterd."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from corral.rapi.errors import bad_request
from corral.rapi.luxi import LuxiPool

# Ganeti's reason trail sources (constants.OPCODE_REASON_SRC_*).
REASON_SRC_USER = "gnt:user"
REASON_SRC_RLIB2 = "gnt:library:rlib2"

_MISSING: Any = object()


@dataclass
class Call:
    """What a handler needs; the argument helpers answer 400 as Ganeti's do."""

    resource: str  # Ganeti's rlib2 name, e.g. "instances_name_startup"
    items: tuple[str, ...]
    query: dict[str, list[str]]
    body: Any
    luxi: LuxiPool

    def int_arg(self, name: str, default: int = 0) -> int:
        values = self.query.get(name)
        if not values:
            return default
        try:
            return int(values[0])
        except ValueError:
            raise bad_request(f"Invalid value for the '{name}' parameter") from None

    def str_arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        """A ``0``/``1`` query argument (any integer, as Ganeti)."""
        return bool(self.int_arg(name))

    @property
    def bulk(self) -> bool:
        return self.flag("bulk")

    @property
    def dry_run(self) -> bool:
        return self.flag("dry-run")

    @property
    def force(self) -> bool:
        return self.flag("force")

    @property
    def lock(self) -> bool:
        return self.flag("lock")

    def body_dict(self) -> dict[str, Any]:
        """The body, which must be a JSON object (none counts as empty)."""
        if self.body is None:
            return {}
        body: dict[str, Any] = check_type(self.body, dict, "Body contents")
        return body

    def param(self, name: str, default: Any = _MISSING, kind: type | None = None) -> Any:
        """A body parameter (Ganeti's CheckParameter)."""
        body = self.body_dict()
        if name not in body:
            if default is _MISSING:
                raise bad_request(f"Required parameter '{name}' is missing")
            return default
        value = body[name]
        return value if kind is None else check_type(value, kind, f"'{name}' parameter")

    def reason(self) -> list[list[Any]]:
        """Ganeti's reason trail for an opcode submitted through RAPI."""
        trail: list[list[Any]] = []
        user_reason = self.str_arg("reason")
        if user_reason:
            trail.append([REASON_SRC_USER, user_reason, time.time_ns()])
        trail.append([f"{REASON_SRC_RLIB2}:{self.resource}", "", time.time_ns()])
        return trail


def check_type(value: Any, kind: type, what: str) -> Any:
    """``value`` if it is a ``kind``, else 400 with Ganeti's wording."""
    # JSON true/false are not numbers here.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_request(
            f"{what}: Type is '{type(value).__name__}', but '{kind.__name__}' is expected"
        )
    return value
