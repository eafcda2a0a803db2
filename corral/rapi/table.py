"""How RAPI resources are declared: a path, and per HTTP method its handler,
the access it needs and the opcode it submits (for the description)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.rapi.call import Call
from corral.rapi.errors import HttpError
from corral.rapi.opinput import depends_of, fill_opcode

Handler = Callable[[Call], Awaitable[Any]]
# Inputs of an opcode resource: the body part (checked as the opcode's fields,
# renamed) and the static part (from the path and query, not overridable).
OpInputs = Callable[[Call], tuple[Any, dict[str, Any]]]

READ = "read"
WRITE = "write"
# Who may call a method: OPEN needs no credentials unless the daemon runs with
# --require-authentication; the others need a user with one of the rights.
OPEN: frozenset[str] = frozenset()
READERS = frozenset({READ, WRITE})
WRITERS = frozenset({WRITE})

# What a path's placeholders match, as Ganeti's connector (no '%', so an
# encoded slash or any other escape never reaches a handler).
_PLACEHOLDERS = {
    "name": r"[\w._-]+",
    "job_id": r"\d{1,18}",  # beyond, no job (and no 64-bit number for masterd)
    "disk": r"\d+",
}


@dataclass(frozen=True)
class Method:
    """One HTTP method of a resource."""

    handler: Handler
    access: frozenset[str]
    summary: str
    # The opcode a job is submitted with, if the method submits one.
    opcode: str | None = None
    # What the answer is: "job" (a job id) or "data".
    returns: str = "data"


@dataclass(frozen=True)
class Resource:
    """A path such as ``/2/instances/{instance_name}/startup`` and its methods."""

    name: str  # Ganeti's rlib2 resource name, e.g. "instances_name_startup"
    path: str
    methods: Mapping[str, Method]
    pattern: re.Pattern[str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        regex = re.sub(r"\{(\w+)\}", lambda m: f"({_PLACEHOLDERS[_kind(m.group(1))]})", self.path)
        object.__setattr__(self, "pattern", re.compile(f"^{regex}$"))

    @property
    def placeholders(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)


def _kind(placeholder: str) -> str:
    return placeholder if placeholder in _PLACEHOLDERS else "name"


def method(handler: Handler, summary: str, access: frozenset[str] = OPEN) -> Method:
    """A method answered by ``handler`` itself."""
    return Method(handler, access, summary)


def opcode(
    op_id: str,
    summary: str,
    inputs: OpInputs | None = None,
    *,
    rename: dict[str, str] | None = None,
    forbidden: tuple[str, ...] = (),
    access: frozenset[str] = WRITERS,
) -> Method:
    """A method submitting a one-opcode job and answering its id."""
    get_inputs = inputs or (lambda call: (call.body, {}))

    async def submit(call: Call) -> Any:
        body, static = get_inputs(call)
        _check_forbidden(call, forbidden)
        if isinstance(body, dict):
            body = {**body, **depends_of(call)}
        op = fill_opcode(op_id, body, {"reason": call.reason(), **static}, rename)
        return await call.luxi.submit_job([op])

    return Method(submit, access, summary, opcode=op_id, returns="job")


def _check_forbidden(call: Call, forbidden: tuple[str, ...]) -> None:
    given = set(call.query) | set(call.body if isinstance(call.body, dict) else ())
    for name in forbidden:
        if name in given:
            raise HttpError(403, f"The parameter {name} cannot be set via RAPI")
