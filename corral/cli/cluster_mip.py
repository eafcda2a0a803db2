"""gnt-cluster activate-master-ip / deactivate-master-ip, as Ganeti's: one
opcode each, run on the master node (its noded runs the setup script)."""

from __future__ import annotations

import argparse

from corral import constants as C
from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

_DEACTIVATE_QUESTION = (
    "This will disable the master IP. All the open connections to the master IP will be"
    " closed. To reach the master you will need to use its node IP. Continue?"
)


def cmd_activate(opts: argparse.Namespace) -> int:
    """OP_CLUSTER_ACTIVATE_MASTER_IP."""
    common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_ACTIVATE_MASTER_IP"})
    return C.EXIT_SUCCESS


def cmd_deactivate(opts: argparse.Namespace) -> int:
    """OP_CLUSTER_DEACTIVATE_MASTER_IP, once confirmed (or with --yes)."""
    if not opts.confirm and not common.ask_user(_DEACTIVATE_QUESTION):
        return C.EXIT_FAILURE
    common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_DEACTIVATE_MASTER_IP"})
    return C.EXIT_SUCCESS


def add_commands(sub: Any) -> None:
    """``activate-master-ip`` and ``deactivate-master-ip``."""
    p = common.add_command(sub, "activate-master-ip", cmd_activate, "Activates the master IP")
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(sub, "deactivate-master-ip", cmd_deactivate, "Deactivates the master IP")
    p.add_argument("--yes", dest="confirm", action="store_true", help="Do not ask for confirmation")
    common.add_args(p, "args", "", 0, 0)
