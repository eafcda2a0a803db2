"""An instance's OS as the master sends it to a node: the OS's full name and
its merged parameters, each with its visibility.

What must be kept out of logs, job results and displays follows from the data:
a private or secret parameter's value is a :class:`Private`, which redacts
itself when printed, formatted or represented, refuses to be pickled, and is
revealed only by the two places that need it (the scripts' environment and the
wire to the node that runs them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn, final

from corral import constants as C
from corral import errors
from corral.rpc.wire import OsParamWire, OsSpecWire


class Visibility(StrEnum):
    """Who may see a parameter's value (Ganeti's osparams, osparams_private and
    osparams_secret)."""

    PUBLIC = "public"
    PRIVATE = "private"  # kept in the configuration, redacted wherever shown
    SECRET = "secret"  # given to one job only, never kept


@final
class Private:
    """A value shown as ``<redacted>`` wherever it is printed; :meth:`reveal`
    is the only way to it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself: for the scripts that need it, never for display."""
        return self._value

    def __str__(self) -> str:
        return C.REDACTED

    def __repr__(self) -> str:
        return f"Private({C.REDACTED!r})"

    def __format__(self, spec: str) -> str:
        return format(C.REDACTED, spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Private) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a private value cannot be pickled")


@dataclass(frozen=True, slots=True)
class OsParam:
    """One parameter: public ones hold their text, the others a :class:`Private`."""

    value: str | Private
    visibility: Visibility

    @classmethod
    def of(cls, value: Any, visibility: Visibility) -> OsParam:
        """The parameter with ``value`` as the scripts see it (text)."""
        text = value.reveal() if isinstance(value, Private) else str(value)
        hidden = visibility is not Visibility.PUBLIC
        return cls(Private(text) if hidden else text, visibility)

    @property
    def hidden(self) -> bool:
        return self.visibility is not Visibility.PUBLIC

    def reveal(self) -> str:
        """The value, private or not."""
        return self.value.reveal() if isinstance(self.value, Private) else self.value


@dataclass(frozen=True)
class OsSpec:
    """An OS (``name+variant``) with the parameters its scripts get."""

    name: str
    params: Mapping[str, OsParam]

    @classmethod
    def public(cls, name: str, values: Mapping[str, Any]) -> OsSpec:
        """An OS whose parameters are all public."""
        return cls(name, {k: OsParam.of(v, Visibility.PUBLIC) for k, v in values.items()})

    def script_values(self) -> dict[str, str]:
        """Every value, revealed: what the scripts' environment holds."""
        return {key: param.reveal() for key, param in self.params.items()}

    def hidden_values(self) -> list[str]:
        """The private and secret values: what no log may show."""
        return [param.reveal() for param in self.params.values() if param.hidden]

    def shown(self) -> dict[str, str]:
        """The parameters as displays show them: hidden ones redacted."""
        return {key: str(param.value) for key, param in self.params.items()}

    def to_wire(self) -> OsSpecWire:
        """The spec as a node call carries it (over mutual TLS, values in clear)."""
        return {
            "name": self.name,
            "params": {
                key: {"value": param.reveal(), "visibility": param.visibility.value}
                for key, param in self.params.items()
            },
        }

    @classmethod
    def from_wire(cls, wire: OsSpecWire) -> OsSpec:
        """The spec a node call carried; OpExecError when it is malformed."""
        params = wire.get("params") if isinstance(wire, dict) else None
        name = wire.get("name") if isinstance(wire, dict) else None
        if not isinstance(name, str) or not isinstance(params, dict):
            raise errors.OpExecError("Malformed OS spec: expected a name and parameters")
        return cls(name, {key: _param(key, entry) for key, entry in params.items()})


def _param(key: str, entry: OsParamWire) -> OsParam:
    value = entry.get("value") if isinstance(entry, dict) else None
    visibility = entry.get("visibility") if isinstance(entry, dict) else None
    if not isinstance(value, str) or visibility not in tuple(Visibility):
        raise errors.OpExecError(
            f"Malformed OS parameter {key!r}: expected a text value and one of"
            f" {', '.join(Visibility)} as its visibility"
        )
    return OsParam.of(value, Visibility(visibility))
