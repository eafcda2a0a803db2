"""gnt-node list-drbd: the DRBD minors of a node, asked of the local node's
confd as Ganeti 3.0.2 asks it (CONFD_REQ_NODE_DRBD), with its table and
messages.  Corral has no DRBD: a known node has no minors, so the table is
its header alone (nothing with --no-headers)."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral.cli import common
from corral.cli.table import format_table

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

HEADERS = ["Node", "Minor", "Instance", "Disk", "Role", "PeerNode"]
RIGHT = [False, True, False, False, False, False]  # the minor is a number


def _valid_rows(answer: Any) -> bool:
    """Whether ``answer`` has the shape of Ganeti's HTNodeDrbd."""
    kinds = (str, int, str, str, str, str)
    return isinstance(answer, list) and all(
        isinstance(row, list)
        and len(row) == len(kinds)
        and all(isinstance(value, kind) for value, kind in zip(row, kinds, strict=True))
        for row in answer
    )


def cmd_list_drbd(opts: argparse.Namespace) -> int:
    """Ask the local confd for the node's minors; print them as Ganeti does."""
    from corral.confd import client, protocol
    from corral.paths import root_from_env

    root = root_from_env()
    try:
        reply = client.ask(
            client.read_key(root),
            client.local_endpoint(root),
            protocol.Request.NODE_DRBD,
            opts.node[0],
        )
    except client.ConfdError as err:
        print(f"Did not receive all expected confd replies: {err}", file=sys.stderr)
        return C.EXIT_FAILURE
    if reply.status != protocol.Status.OK:
        print(f"Query gave non-ok status '{reply.status}': {reply.answer}", file=sys.stderr)
        return C.EXIT_FAILURE
    if not _valid_rows(reply.answer):
        print(f"Invalid response from server: got {reply.answer}", file=sys.stderr)
        return C.EXIT_FAILURE
    rows = [[str(value) for value in row] for row in sorted(reply.answer)]
    headers = None if opts.no_headers else HEADERS
    for line in format_table(headers, rows, RIGHT, opts.separator):
        print(line)
    return C.EXIT_SUCCESS


def add_commands(sub: Any) -> None:
    """``list-drbd``."""
    p = common.add_command(sub, "list-drbd", cmd_list_drbd,
                           "Query the list of used DRBD minors on the given node")  # fmt: skip
    common.add_args(p, "node", "NODE", 1, 1)
    p.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    p.add_argument("--separator", help="Separator between output fields")
