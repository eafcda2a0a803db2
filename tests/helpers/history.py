"""A record of concurrent client calls on keys, for the linearizability
checker (tests/helpers/linearizability.py).

Each call is two events, as in Jepsen: its *invoke* (process, key, operation
and arguments, time) and its *completion*:

- ``ok`` with the call's result;
- ``fail``: the call certainly did not take effect (a Conflict or FencedOut
  refusal made before anything was written);
- ``info``: nobody knows (a timeout, a lost connection).  The call may have
  taken effect at any time after its invoke, or never: it stays pending for
  ever, and so does a call whose completion was never recorded (its client
  died).

Times are ``time.monotonic_ns()``: one clock for every process of the
machine, so histories recorded by several processes (each saves its own file
of JSON lines) merge into one (:func:`load`).  Recording takes a lock and
appends to a list: safe from several threads and cheap inside an event loop.

Typical use, inside a client's coroutine::

    with history.call("client-3", key, "put", refusals=(Conflict,),
                      value=7, expected=version) as call:
        call.ok(await store.put(key, 7, fence, version))
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any


class Status(StrEnum):
    """How a call ended (Jepsen's names)."""

    OK = "ok"
    FAIL = "fail"
    INFO = "info"


INVOKE = "invoke"


@dataclass(frozen=True)
class Operation:
    """One call as the checker sees it: ``completed`` is None while (and if
    for ever) no completion was recorded, and then ``status`` is INFO."""

    id: str
    process: str
    key: str
    f: str
    args: Mapping[str, Any]
    invoked: int
    status: Status
    result: Any = None
    error: str = ""
    completed: int | None = None

    def __str__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in self.args.items())
        outcome = {
            Status.OK: f"ok {self.result!r}",
            Status.FAIL: f"fail ({self.error})",
            Status.INFO: f"unknown ({self.error or 'no answer'})",
        }[self.status]
        return f"{self.process}: {self.f}({args}) -> {outcome}"


class Call:
    """One call under way; say once how it ended."""

    def __init__(self, history: History, op_id: str) -> None:
        self._history = history
        self.id = op_id
        self.status: Status | None = None

    def ok(self, result: Any = None) -> None:
        """It took effect (or read) and answered ``result`` (JSON-able)."""
        self._end(Status.OK, {"result": result})

    def fail(self, error: str) -> None:
        """It certainly did not take effect: refused with ``error`` (a reason
        such as the exception's class name, which models may read)."""
        self._end(Status.FAIL, {"error": error})

    def unknown(self, error: str) -> None:
        """Nobody knows whether it took effect (``error`` says why)."""
        self._end(Status.INFO, {"error": error})

    def _end(self, status: Status, fields: dict[str, Any]) -> None:
        if self.status is not None:
            raise RuntimeError(f"call {self.id} already ended ({self.status})")
        self.status = status
        self._history.append({"type": str(status), "id": self.id, **fields})


class History:
    """The calls of the clients of one process (thread-safe)."""

    def __init__(self, source: str | None = None) -> None:
        # Ids stay unique when the histories of several processes merge.
        self.source = source or uuid.uuid4().hex[:8]
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._numbers = itertools.count(1)

    def append(self, event: dict[str, Any]) -> None:
        """Add one event, stamped with the time now."""
        with self._lock:
            self._events.append({**event, "time": time.monotonic_ns()})

    def invoke(self, process: str, key: str, f: str, **args: Any) -> Call:
        """A call of ``f(**args)`` on ``key`` by ``process`` starts now."""
        with self._lock:
            op_id = f"{self.source}:{next(self._numbers)}"
        self.append(
            {"type": INVOKE, "id": op_id, "process": process, "key": key, "f": f, "args": args}
        )
        return Call(self, op_id)

    @contextmanager
    def call(
        self,
        process: str,
        key: str,
        f: str,
        refusals: tuple[type[BaseException], ...] = (),
        **args: Any,
    ) -> Iterator[Call]:
        """Record the call the body makes: the body says ``ok``; an exception
        of ``refusals`` ends it as ``fail`` (and is swallowed: a refusal is an
        answer); any other ends it as unknown and goes on."""
        call = self.invoke(process, key, f, **args)
        try:
            yield call
        except refusals as err:
            call.fail(type(err).__name__)
            return
        except BaseException as err:
            call.unknown(f"{type(err).__name__}: {err}")
            raise
        if call.status is None:
            raise RuntimeError(f"call {call.id} ({f} on {key!r}) ended without an outcome")

    def events(self) -> list[dict[str, Any]]:
        """The events so far, in the order they were recorded."""
        with self._lock:
            return list(self._events)

    def operations(self) -> list[Operation]:
        """The calls so far (see :func:`operations`)."""
        return operations(self.events())

    def save(self, path: Path) -> None:
        """Write the events as JSON lines (one file per process)."""
        path.write_text("".join(json.dumps(event) + "\n" for event in self.events()))


def load(paths: Iterable[Path]) -> list[Operation]:
    """The calls recorded in these files (:meth:`History.save`), merged."""
    events: list[dict[str, Any]] = []
    for path in paths:
        events.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return operations(events)


def operations(events: Iterable[dict[str, Any]]) -> list[Operation]:
    """Invoke and completion events paired into calls, by invoke time.
    ValueError if an id is invoked twice or ends without an invoke."""
    invokes: dict[str, dict[str, Any]] = {}
    ends: dict[str, dict[str, Any]] = {}
    for event in events:
        table = invokes if event["type"] == INVOKE else ends
        if event["id"] in table:
            raise ValueError(f"call {event['id']} has two {event['type']} events")
        table[event["id"]] = event
    orphans = ends.keys() - invokes.keys()
    if orphans:
        raise ValueError(f"calls ended but never invoked: {sorted(orphans)[:5]}")
    return sorted(
        (_operation(start, ends.get(op_id)) for op_id, start in invokes.items()),
        key=lambda op: op.invoked,
    )


def _operation(start: dict[str, Any], end: dict[str, Any] | None) -> Operation:
    common = {
        "id": start["id"],
        "process": start["process"],
        "key": start["key"],
        "f": start["f"],
        "args": start["args"],
        "invoked": start["time"],
    }
    if end is None:
        return Operation(status=Status.INFO, **common)
    return Operation(
        status=Status(end["type"]),
        result=end.get("result"),
        error=end.get("error", ""),
        completed=end["time"],
        **common,
    )
