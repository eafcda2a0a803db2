"""gnt-instance move: options, question and opcode as Ganeti 3.0.2's client."""

from __future__ import annotations

import argparse

from corral import constants as C
from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def cmd_move(opts: argparse.Namespace) -> int:
    (name,) = opts.instance
    if not opts.force and not common.confirm(
        f"Instance {name} will be moved. This requires a shutdown of the instance. Continue?"
    ):
        return C.EXIT_FAILURE
    op = {
        "OP_ID": "OP_INSTANCE_MOVE",
        "instance_name": name,
        "target_node": opts.node,
        "compress": opts.compress,
        "shutdown_timeout": opts.shutdown_timeout,
        "ignore_consistency": opts.ignore_consistency,
        "ignore_ipolicy": opts.ignore_ipolicy,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def add_command(sub: Any) -> None:
    """Register ``move`` on gnt-instance's subparsers."""
    p = common.add_command(
        sub,
        "move",
        cmd_move,
        "Move instance to an arbitrary node (only for instances of type file and lv)",
    )
    common.add_args(p, "instance", "INSTANCE", 1, 1)
    common.add_force(p)
    p.add_argument("-n", "--node", metavar="<node>", help="Target node")
    p.add_argument("--compress", default="none", help="The compression mode to use")
    p.add_argument("--shutdown-timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT)
    p.add_argument("--ignore-consistency", action="store_true")
    p.add_argument("--ignore-ipolicy", action="store_true")
    common.add_submit_options(p)
