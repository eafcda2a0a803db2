"""What a node call gives back: a node's outcome, or the error of a failed call.

One convention for every call (as qemu.qmp's precise errors): a failure is a
:class:`NodeCallError` naming the node, the call and the node's message, its
text always ``"<what the caller did>: <why the node failed>"``:

- ``await rpc.run(node, request, "Could not start instance")``: the payload,
  or that error (with ``ecode``, an OpPrereqError with that code: a check
  failed before anything changed, Ganeti's ``Raise(prereq=True)``);
- ``await rpc.attempt(node, request, warn, "Could not remove disk")``: a
  failure is only reported through ``warn`` (Ganeti's warn-and-continue);
- ``rpc.results(nodes, request)``: each node's :class:`RpcResult`, whose
  ``get``, ``report`` and ``value`` do the same per node.

A node that refused a call for its master's fence token (a newer master has
called it: :mod:`corral.rpc.fencing`) fails it with :class:`MasterDeposed`,
a NodeCallError, whether the caller asked for an ``ecode`` or not: nothing
was changed, and the master that made the call must not act any more.

Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from corral import errors

R = TypeVar("R")


class NodeTarget(Protocol):
    """A node as calls address it: its uuid (the key of results) and address."""

    @property
    def uuid(self) -> str: ...

    @property
    def primary_ip(self) -> str: ...


class NodeAddress(NamedTuple):
    """A :class:`NodeTarget` from a uuid (or any key) and an address."""

    uuid: str
    primary_ip: str


class NodeCallError(errors.OpExecError):
    """A node call failed: ``node`` (its key), ``call``, the node's message
    ``fail_msg`` and whether the node could not be reached at all (``offline``).

    Its message is ``"<what>: <fail_msg>"`` (what the caller was doing, then
    why it failed), as Ganeti words these errors; it travels as OpExecError.
    """

    def __init__(
        self, node: str, call: str, fail_msg: str, *, offline: bool = False, what: str = ""
    ) -> None:
        message = f"{what}: {fail_msg}" if what else fail_msg
        super().__init__(message.strip())
        self.node = node
        self.call = call
        self.fail_msg = fail_msg
        self.offline = offline


class MasterDeposed(NodeCallError):
    """A node refused a call that changes it: a newer master (a newer fence
    token) has called that node, so the master that made this call was
    deposed.  Nothing was changed on the node.

    Corral's own (Ganeti has no fencing of node calls); it travels as
    OpExecError, its message saying what happened.
    """


class RpcResult(Generic[R]):
    """The outcome of one call on one node.

    ``fail_msg`` is None on success, never empty on failure; ``offline`` is True
    when the node could not be reached at all (connection refused or timed
    out); ``deposed`` when the node refused the caller's fence token
    (:class:`MasterDeposed`).  ``payload`` is the
    answer of a success (reading it from a failure raises NodeCallError).
    """

    __slots__ = ("_payload", "call", "deposed", "fail_msg", "node", "offline")

    def __init__(
        self,
        node: str,
        call: str,
        payload: Any = None,
        fail_msg: str | None = None,
        offline: bool = False,
        deposed: bool = False,
    ) -> None:
        self.node = node
        self.call = call
        self._payload = payload
        self.fail_msg = fail_msg
        self.offline = offline
        self.deposed = deposed

    def __repr__(self) -> str:
        outcome = f"failed: {self.fail_msg!r}" if self.failed else f"payload={self._payload!r:.80}"
        return f"<RpcResult {self.call} on {self.node} {outcome}>"

    @property
    def failed(self) -> bool:
        """Whether the call failed (the node was unreachable or returned an error)."""
        return self.fail_msg is not None

    @property
    def payload(self) -> R:
        """The node's answer; NodeCallError if the call failed."""
        return self.get()

    @property
    def value(self) -> R | None:
        """The node's answer, None if the call failed (a query shows no value)."""
        return None if self.fail_msg is not None else self._payload

    def get(self, what: str = "", ecode: str | None = None) -> R:
        """The node's answer; NodeCallError (``"<what>: <fail_msg>"``) if the
        call failed, or OpPrereqError with ``ecode`` if one is given (never for
        a refused fence token: MasterDeposed)."""
        if self.fail_msg is not None:
            if ecode is not None and not self.deposed:
                raise errors.OpPrereqError(self.error(what).message, ecode)
            raise self.error(what)
        payload: R = self._payload
        return payload

    def report(self, warn: Callable[[str], None], what: str = "") -> bool:
        """Whether the call succeeded; a failure goes to ``warn`` as the
        error's message (``"<what>: <fail_msg>"``)."""
        if self.fail_msg is not None:
            warn(self.error(what).message)
            return False
        return True

    def error(self, what: str = "") -> NodeCallError:
        """The error of this failed call, its message prefixed with ``what``."""
        assert self.fail_msg is not None, "the call succeeded"
        kind = MasterDeposed if self.deposed else NodeCallError
        return kind(self.node, self.call, self.fail_msg, offline=self.offline, what=what)
