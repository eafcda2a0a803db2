"""Node calls that describe a node and run its hooks, tests and out-of-band program."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import JsonObject, NodeInfo, StorageUnitWire


def _delay_timeout(args: Sequence[Any]) -> float:
    # test_delay must not time out before its own delay is over.  A bad duration
    # gets a short timeout: the node refuses it at once.
    try:
        return float(args[0]) + 5.0
    except (TypeError, ValueError):
        return float(C.RPC_TMO_URGENT)


@node_call(C.RPC_TMO_URGENT, effect=READS)
def version() -> int:
    """The node's protocol version."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def node_info(storage_units: list[StorageUnitWire]) -> NodeInfo:
    """Memory, CPU and the space of the given storage units."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def node_capabilities(storage_units: list[StorageUnitWire]) -> JsonObject:
    """Hypervisors the node can run, disk templates it can serve (with these
    as the cluster's storage units): see :mod:`corral.capabilities`."""


@node_call(C.RPC_TMO_NORMAL, effect=READS)
def node_verify(checks: dict[str, Any], node_name: str) -> JsonObject:
    """Node checks, by name (:mod:`corral.rpc.node_verify`): the answer has one
    key per check the node knows, and the node's version, clock and certificate."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def hooks_runner(hpath: str, phase: str, env: dict[str, str]) -> list[list[Any]]:
    """Run the hooks of ``hpath`` in ``phase``: ``[[relpath, hkr, output], ...]``."""


@node_call(_delay_timeout, effect=READS)
def test_delay(duration: float) -> None:
    """Sleep (for tests)."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def upload_file(
    file_name: str,
    data: str,
    mode: int,
    uid: int | str | None,
    gid: int | str | None,
    atime: float | None,
    mtime: float | None,
) -> None:
    """Write one of the cluster's distributed files (``data``: base64)."""


def _oob_timeout(args: Sequence[Any]) -> float:
    # The answer of a program killed at its own timeout must still arrive.
    try:
        return float(args[3]) + 10.0
    except (TypeError, ValueError):
        return float(C.RPC_TMO_URGENT)


@node_call(_oob_timeout, effect=CHANGES)
def run_oob(oob_program: str, command: str, node_name: str, timeout: int) -> Any:
    """Run the out-of-band program ``<oob_program> <command> <node_name>`` (an
    absolute path, below the node's root), killed after ``timeout`` seconds:
    the JSON it prints, or None if it prints nothing."""
