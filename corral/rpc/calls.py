"""The table of node RPC calls: the one place where a call is declared.

Each call has a name (the URL path on noded), a timeout and its positional
argument names.  The client validates arguments against the table; noded
dispatches to the handler registered under the same name
(:mod:`corral.node.handlers`).  Adding a call is one line here and one handler.

Stdlib only: masterd's startup and the CLI may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from corral import constants as C
from corral import errors

TimeoutFn = Callable[[Sequence[Any]], float]


@dataclass(frozen=True)
class RpcCall:
    """One RPC call: ``timeout`` is seconds, or a function of the arguments."""

    name: str
    timeout: float | TimeoutFn
    args: tuple[str, ...]
    doc: str = ""

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


def _delay_timeout(args: Sequence[Any]) -> float:
    # test_delay must not time out before its own delay is over.  A bad duration
    # gets a short timeout: the node refuses it at once.
    try:
        return float(args[0]) + 5.0
    except (TypeError, ValueError):
        return float(C.RPC_TMO_URGENT)


_TABLE = (
    RpcCall("version", C.RPC_TMO_URGENT, (), "The node's protocol version"),
    RpcCall("node_info", C.RPC_TMO_URGENT, ("storage_units",), "Memory, CPU and storage"),
    RpcCall(
        "node_capabilities",
        C.RPC_TMO_URGENT,
        ("storage_units",),
        "Hypervisors the node can run, disk templates it can serve",
    ),
    RpcCall("node_verify", C.RPC_TMO_NORMAL, ("checks", "node_name"), "Node checks"),
    RpcCall("hooks_runner", C.RPC_TMO_NORMAL, ("hpath", "phase", "env"), "Run hooks"),
    RpcCall("test_delay", _delay_timeout, ("duration",), "Sleep (for tests)"),
    RpcCall("export_list", C.RPC_TMO_FAST, (), "The exports kept on the node"),
    RpcCall(
        "upload_file",
        C.RPC_TMO_NORMAL,
        ("file_name", "data", "mode", "uid", "gid", "atime", "mtime"),
        "Write one of the cluster's distributed files",
    ),
)

_OS_TABLE = (
    RpcCall("os_diagnose", C.RPC_TMO_FAST, (), "Every OS definition in the search path"),
    RpcCall(
        "os_validate",
        C.RPC_TMO_FAST,
        ("os_name", "osparams", "debug", "secret_names"),
        "Check OS parameters against parameters.list and the verify script",
    ),
    RpcCall(
        "instance_os_add",
        C.RPC_TMO_1DAY,
        ("inst", "osparams", "reinstall", "debug", "secret_names"),
        "Run the OS create script",
    ),
    RpcCall(
        "instance_run_rename",
        C.RPC_TMO_SLOW,
        ("inst", "old_name", "osparams", "debug", "secret_names"),
        "Run the OS rename script",
    ),
)
_INSTANCE_TABLE = (
    RpcCall("instance_start", C.RPC_TMO_NORMAL, ("inst", "paused"), "Start an instance"),
    RpcCall(
        "instance_shutdown", C.RPC_TMO_NORMAL, ("hypervisor", "name", "timeout"), "Stop an instance"
    ),
    RpcCall(
        "instance_reboot",
        C.RPC_TMO_NORMAL,
        ("inst", "reboot_type", "timeout"),
        "Reboot an instance",
    ),
    RpcCall(
        "instance_rename",
        C.RPC_TMO_FAST,
        ("hypervisor", "old_name", "new_name"),
        "Let the hypervisor follow an instance rename",
    ),
    RpcCall(
        "all_instances_info", C.RPC_TMO_URGENT, ("hypervisors",), "Running instances per hypervisor"
    ),
    RpcCall(
        "hypervisor_validate_params",
        C.RPC_TMO_NORMAL,
        ("hvname", "hvparams"),
        "Check hypervisor parameters against the node (files, users, QEMU)",
    ),
    RpcCall(
        "hypervisor_info",
        C.RPC_TMO_URGENT,
        ("hypervisor", "storage_unit"),
        "Memory and storage as the hypervisor and storage see them",
    ),
)


def _all_calls() -> tuple[RpcCall, ...]:
    # The topic tables import RpcCall from here: imported once it is defined.
    from corral.rpc.calls_admin import ADMIN_CALLS
    from corral.rpc.calls_console import CONSOLE_CALLS
    from corral.rpc.calls_fanout import FANOUT_CALLS
    from corral.rpc.calls_impexp import IMPEXP_CALLS
    from corral.rpc.calls_membership import MEMBERSHIP_CALLS
    from corral.rpc.calls_migration import MIGRATION_CALLS
    from corral.rpc.calls_storage import STORAGE_CALLS
    from corral.rpc.calls_transfer import TRANSFER_CALLS

    return (
        *_TABLE,
        *_OS_TABLE,
        *_INSTANCE_TABLE,
        *STORAGE_CALLS,
        *ADMIN_CALLS,
        *FANOUT_CALLS,
        *MEMBERSHIP_CALLS,
        *MIGRATION_CALLS,
        *TRANSFER_CALLS,
        *CONSOLE_CALLS,
        *IMPEXP_CALLS,
    )


CALLS: dict[str, RpcCall] = {call.name: call for call in _all_calls()}


def get_call(name: str) -> RpcCall:
    """The call named ``name``; ProgrammerError if there is none."""
    try:
        return CALLS[name]
    except KeyError:
        raise errors.ProgrammerError(f"Unknown RPC call {name!r}") from None
