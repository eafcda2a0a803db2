"""gnt-node power and health: the nodes' out-of-band program, through
OP_OOB_COMMAND, with Ganeti 3.0.2's options, questions and output."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral.cli import common
from corral.cli.instance_multi import confirm_operation
from corral.cli.table import format_result_error, generate_table

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # A successful node's rows, from its name and its program's answer.
    RowMaker = Callable[[str, Any], list[list[str]]]

POWER_COMMANDS = ("on", "off", "cycle", "status")
# Power commands asked about first, and given nodes only.
ASKED = (C.OOB_POWER_OFF, C.OOB_POWER_CYCLE)
HEADERS = ["Node", "Status"]


def _print_table(opts: argparse.Namespace, rows: list[list[str]]) -> None:
    """The rows as Ganeti's GenerateTable prints a node and a status column."""
    headers = None if opts.no_headers else HEADERS
    if opts.separator is None:
        lines = generate_table(headers, rows)
    else:
        lines = [opts.separator.join(row) for row in ([headers] if headers else []) + rows]
    for line in lines:
        print(line)


def _node_rows(answer: list[Any], text: RowMaker) -> tuple[list[list[str]], int]:
    """One or more rows per node of OP_OOB_COMMAND's answer (``text`` makes a
    successful entry's rows), and how many nodes failed."""
    rows: list[list[str]] = []
    failed = 0
    for (_, name), (status, payload) in answer:
        if status == C.RS_NORMAL:
            rows += text(name, payload)
        else:
            failed += 1
            rows.append([name, format_result_error(status)])
    return rows, failed


def _power_text(command: str) -> RowMaker:
    def text(name: str, payload: Any) -> list[list[str]]:
        if command == C.OOB_POWER_STATUS:
            return [[name, "powered" if payload[C.OOB_POWER_STATUS_POWERED] else "unpowered"]]
        return [[name, "invoked"]]  # nothing to show but that it ran

    return text


def cmd_power(opts: argparse.Namespace) -> int:
    subcommand, *nodes = opts.args
    if subcommand not in POWER_COMMANDS:
        print(f"power subcommand {subcommand} not supported.", file=sys.stderr)
        return C.EXIT_FAILURE
    command = f"power-{subcommand}"
    if command in ASKED:
        if not nodes:
            print("Please provide at least one node for this command", file=sys.stderr)
            return C.EXIT_FAILURE
        if not opts.force and not confirm_operation(nodes, "nodes", f"power {subcommand}"):
            return C.EXIT_FAILURE
    ops: list[dict[str, Any]] = []
    if command == C.OOB_POWER_OFF and not opts.ignore_status:
        # As Ganeti: the nodes are marked offline first, in the same job.
        ops += [
            {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, "offline": True,
             "auto_promote": opts.auto_promote}
            for node in nodes
        ]  # fmt: skip
    ops.append(
        {"OP_ID": "OP_OOB_COMMAND", "node_names": nodes, "command": command,
         "ignore_status": opts.ignore_status, "timeout": opts.oob_timeout,
         "power_delay": opts.power_delay}
    )  # fmt: skip
    generic = common.common_op_fields(opts)
    client = common.get_client()
    # As Ganeti's: the job is always waited for (--submit and --print-jobid are
    # accepted and have no effect), and only the last opcode's answer shown.
    job_id = client.submit_job([{**generic, **op} for op in ops])
    answer = common.poll_job(client, job_id)[-1]
    rows, failed = _node_rows(answer, _power_text(command))
    _print_table(opts, rows)
    return C.EXIT_FAILURE if failed else C.EXIT_SUCCESS


def _health_text(name: str, items: list[list[str]]) -> list[list[str]]:
    rows = [[name if index == 0 else "", f"{item}={status}"] for index, (item, status) in
            enumerate(items)]  # fmt: skip
    return rows or [[name, ""]]  # no item at all: Ganeti's command fails there


def cmd_health(opts: argparse.Namespace) -> int:
    op = {"OP_ID": "OP_OOB_COMMAND", "node_names": opts.nodes, "command": C.OOB_HEALTH,
          "timeout": opts.oob_timeout}  # fmt: skip
    rows, failed = _node_rows(common.submit_or_send(opts, op), _health_text)
    _print_table(opts, rows)
    return C.EXIT_FAILURE if failed else C.EXIT_SUCCESS


def add_oob_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--oob-timeout", type=int, default=C.OOB_TIMEOUT,
                        help="Maximum time to wait for out-of-band helper")  # fmt: skip


def add_power_delay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--power-delay", type=float, default=C.OOB_POWER_DELAY,
                        help="Time in seconds to wait between power-ons")  # fmt: skip


def _table_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    parser.add_argument("--separator", help="Separator between output fields")
    add_oob_timeout(parser)


def add_commands(sub: Any) -> None:
    """``power`` and ``health``."""
    p = common.add_command(sub, "power", cmd_power,
                           "Change power state of node by calling out-of-band helper.")  # fmt: skip
    common.add_args(p, "args", "on|off|cycle|status [NODE...]", 1, None)
    common.add_submit_options(p, dry_run=False)
    common.add_force(p)
    p.add_argument("--auto-promote", action="store_true",
                   help="Automatically promote master candidates")  # fmt: skip
    p.add_argument("--ignore-status", action="store_true",
                   help="Ignore the Node(s) offline status (potentially DANGEROUS)")  # fmt: skip
    add_power_delay(p)
    _table_options(p)
    p = common.add_command(sub, "health", cmd_health,
                           "List health of node(s) using out-of-band")  # fmt: skip
    common.add_args(p, "nodes", "NODE", 0, None)
    _table_options(p)
    common.add_priority_option(p)
