"""How a node call is declared: once, as a typed signature shared by master and node.

::

    @node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
    def instance_start(inst: InstanceWire, paused: bool) -> None:
        \"\"\"Start an instance.\"\"\"

makes ``instance_start`` a :class:`NodeCall`: its name is the URL path on
noded, its parameters are the arguments (sent as a JSON list, in order), its
return type is the payload of a success.  The master builds a request by
calling it (``instance_start(desc, paused=False)``: mypy checks the
arguments) and hands the request to the client, which returns the typed
payload; noded registers the handler with ``@rpc_handler(instance_start)``
(mypy checks the handler's parameters and result against the same
signature) and checks the arguments against the declared types at its door.

Every call says what it does to the node (:class:`Effect`): a query that
only ``READS`` is never fenced; a call that ``CHANGES`` the node carries the
master's fence token, which the node refuses when it has seen a newer one
(:mod:`corral.rpc.fencing`); the one call that ``RESCUES`` a masterless
cluster carries none.  There is no default: whoever declares a call
classifies it.

Stdlib only: the declarations are imported by masterd and noded alike.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

from corral import errors

P = ParamSpec("P")
R = TypeVar("R")

TimeoutFn = Callable[[Sequence[Any]], float]


class Effect(enum.Enum):
    """What a node call does to its node."""

    # Answers from the node's state and changes nothing there: a deposed
    # master may still ask (its answer acts on nothing); never fenced.
    READS = "reads"
    # Changes the node, or runs what may (scripts, programs, hypervisors):
    # carries the master's fence token; refused if the node saw a newer one.
    CHANGES = "changes"
    # Changes the node so that a master candidate may take the mastership
    # when no master can act (``master-failover --no-voting``): nobody holds
    # a token then, so never fenced; declared cluster_client_only.
    RESCUES = "rescues"


READS = Effect.READS
CHANGES = Effect.CHANGES
RESCUES = Effect.RESCUES


class NodeCall(Generic[P, R]):
    """One node call: its name, timeout (seconds, or a function of the
    arguments), what it does to the node (``effect``), argument names and
    typed signature.

    ``cluster_client_only``: noded takes the call only from the cluster's
    client certificate (masterd's, which only root on the master can read),
    not from the other nodes' certificates (see :mod:`corral.node.peer`).
    """

    __slots__ = (
        "args",
        "cluster_client_only",
        "doc",
        "effect",
        "name",
        "signature",
        "timeout",
    )

    def __init__(
        self,
        signature: Callable[P, R],
        timeout: float | TimeoutFn,
        *,
        effect: Effect,
        cluster_client_only: bool = False,
    ) -> None:
        self.signature = signature
        self.effect = effect
        self.name: str = signature.__name__
        code = signature.__code__
        self.args: tuple[str, ...] = code.co_varnames[: code.co_argcount]
        self.timeout = timeout
        self.cluster_client_only = cluster_client_only
        self.doc = (signature.__doc__ or "").strip()

    @property
    def fenced(self) -> bool:
        """Whether the call carries the master's fence token (and a node may refuse it)."""
        return self.effect is Effect.CHANGES

    def __repr__(self) -> str:
        return f"<node call {self.name}({', '.join(self.args)})>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Request[R]:
        """The request of this call with these arguments."""
        if kwargs:
            return Request(self, self.check_args([*args, *self._ordered(len(args), kwargs)]))
        return Request(self, self.check_args(args))

    def _ordered(self, given: int, kwargs: dict[str, Any]) -> list[Any]:
        try:
            values = [kwargs.pop(name) for name in self.args[given:]]
        except KeyError as err:
            raise errors.ProgrammerError(f"RPC call {self.name}: no argument {err}") from None
        if kwargs:
            raise errors.ProgrammerError(f"RPC call {self.name}: unknown {', '.join(kwargs)}")
        return values

    def timeout_for(self, args: Sequence[Any]) -> float:
        """The timeout, in seconds, of this call with these arguments."""
        if callable(self.timeout):
            return float(self.timeout(args))
        return float(self.timeout)

    def check_args(self, args: Sequence[Any]) -> list[Any]:
        """The arguments as a list; raise ProgrammerError on a wrong count."""
        if len(args) != len(self.args):
            raise errors.ProgrammerError(
                f"RPC call {self.name} takes {len(self.args)} arguments "
                f"({', '.join(self.args) or 'none'}), got {len(args)}"
            )
        return list(args)


class Request(Generic[R]):
    """A node call with its arguments, ready to be sent to any node."""

    __slots__ = ("args", "call")

    def __init__(self, call: NodeCall[..., R], args: list[Any]) -> None:
        self.call = call
        self.args = args

    def __repr__(self) -> str:
        return f"<request {self.call.name}>"


def node_call(
    timeout: float | TimeoutFn, *, effect: Effect, cluster_client_only: bool = False
) -> Callable[[Callable[P, R]], NodeCall[P, R]]:
    """Declare the decorated signature as a node call with this timeout, what
    it does to the node (``effect``) and access (see :class:`NodeCall`)."""

    if effect is Effect.RESCUES and not cluster_client_only:
        raise errors.ProgrammerError("A call that rescues a masterless cluster is masterd's only")

    def declare(signature: Callable[P, R]) -> NodeCall[P, R]:
        return NodeCall(signature, timeout, effect=effect, cluster_client_only=cluster_client_only)

    return declare
