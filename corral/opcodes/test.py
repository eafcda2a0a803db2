"""Opcodes for testing the job machinery."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr, NonNegInt, Params


def haskell_double(value: float) -> str:
    """``value`` as Haskell's ``show`` prints a Double (luxid's job summaries):
    ``2.0``, ``0.5``, but ``1.0e-2`` and ``1.0e7`` outside [0.1, 10^7)."""
    if value == 0:
        return "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(float(value))
    if 0.1 <= magnitude < 1e7:
        return sign + repr(magnitude)
    exact = Decimal(repr(magnitude)).normalize()
    digits = "".join(map(str, exact.as_tuple().digits))
    return f"{sign}{digits[0]}.{digits[1:] or '0'}e{exact.adjusted()}"


class OpTestDelay(OpCode):
    """Sleep for a while on the master and/or on nodes."""

    OP_ID = "OP_TEST_DELAY"

    # Ganeti's type is any float; a negative delay is refused at submission.
    duration: float = Field(ge=0)
    on_master: bool = True
    on_nodes: list[NonEmptyStr] = Field(default_factory=list)
    on_node_uuids: list[NonEmptyStr] | None = None
    repeat: NonNegInt = 0
    interruptible: bool = False
    no_locks: bool = True

    def summary_value(self) -> str | None:
        return haskell_double(self.duration)


class OpTestJqueue(OpCode):
    """Exercise the job queue: lock notifications, log messages, failure."""

    OP_ID = "OP_TEST_JQUEUE"

    notify_waitlock: bool = False
    notify_exec: bool = False
    log_messages: list[str] = Field(default_factory=list)
    fail: bool = False


class OpTestOsParams(OpCode):
    """Show the secret OS parameters given (a test of their way to the master)."""

    OP_ID = "OP_TEST_OS_PARAMS"
    SECRET_FIELDS = ("osparams_secret",)

    osparams_secret: Params | None = None
