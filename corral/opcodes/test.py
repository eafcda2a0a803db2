"""Opcodes for testing the job machinery."""

from __future__ import annotations

from pydantic import Field

from corral.opcodes.base import OpCode


class OpTestDelay(OpCode):
    """Sleep for a while on the master and/or on nodes."""

    OP_ID = "OP_TEST_DELAY"
    OP_DSC_FIELD = "duration"

    duration: float = Field(ge=0)
    on_master: bool = True
    on_nodes: list[str] = Field(default_factory=list)
    on_node_uuids: list[str] | None = None
    repeat: int = Field(default=0, ge=0)
    interruptible: bool = False
    no_locks: bool = True


class OpTestJqueue(OpCode):
    """Exercise the job queue: lock notifications, log messages, failure."""

    OP_ID = "OP_TEST_JQUEUE"

    notify_waitlock: bool = False
    notify_exec: bool = False
    log_messages: list[str] = Field(default_factory=list)
    fail: bool = False
