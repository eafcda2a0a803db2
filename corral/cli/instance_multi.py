"""Instance commands that act on a selection of instances: startup, shutdown,
reboot and reinstall, with Ganeti's selection modes (``--all``, ``--node``,
``--tags``...), its confirmation when several instances are affected, and
its job executor's output.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.jobexec import JobExecutor
from corral.luxi.client import Client

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

CLUSTER = "cluster"
NODES_BOTH = "nodes"
NODES_PRI = "nodes-pri"
NODES_SEC = "nodes-sec"
NODES_BOTH_BY_TAGS = "nodes-by-tags"
NODES_PRI_BY_TAGS = "nodes-pri-by-tags"
NODES_SEC_BY_TAGS = "nodes-sec-by-tags"
INSTANCES = "instances"
INSTANCES_BY_TAGS = "instances-by-tags"

_NODE_MODES = {
    NODES_BOTH: (True, True, False),
    NODES_PRI: (True, False, False),
    NODES_SEC: (False, True, False),
    NODES_BOTH_BY_TAGS: (True, True, True),
    NODES_PRI_BY_TAGS: (True, False, True),
    NODES_SEC_BY_TAGS: (False, True, True),
}
# option, mode, help: Ganeti's selection options.
SELECTION_OPTIONS = (
    ("--primary", NODES_PRI, "Filter by nodes (primary only)"),
    ("--secondary", NODES_SEC, "Filter by nodes (secondary only)"),
    ("--node", NODES_BOTH, "Filter by nodes (primary and secondary)"),
    ("--all", CLUSTER, "Select all instances in the cluster"),
    ("--instance", INSTANCES, "Filter by instance name [default]"),
    ("--node-tags", NODES_BOTH_BY_TAGS, "Filter by node tag"),
    ("--pri-node-tags", NODES_PRI_BY_TAGS, "Filter by primary node tag"),
    ("--sec-node-tags", NODES_SEC_BY_TAGS, "Filter by secondary node tag"),
    ("--tags", INSTANCES_BY_TAGS, "Filter by instance tag"),
)


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """``--all``, ``--node``, ``--tags``... and ``--force-multiple``."""
    for option, mode, help_text in SELECTION_OPTIONS:
        parser.add_argument(
            option, dest="multi_mode", action="store_const", const=mode, help=help_text
        )
    parser.add_argument(
        "--force-multiple",
        dest="force_multi",
        action="store_true",
        help="Do not ask for confirmation when more than one instance is affected",
    )


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, C.ECODE_INVAL)


def expand_names(client: Client, mode: str, names: list[str]) -> list[str]:
    """The instances a selection names, as Ganeti's commands find them."""
    if mode == CLUSTER:
        if names:
            raise _invalid("Cluster filter mode takes no arguments")
        return [row[0] for row in client.call("QueryInstances", [], ["name"], False)]
    if mode in _NODE_MODES:
        primary, secondary, by_tags = _NODE_MODES[mode]
        if not names:
            raise _invalid("No node tags passed" if by_tags else "No node names passed")
        if by_tags:
            fields = ["name", "pinst_list", "sinst_list", "tags"]
            rows = client.call("QueryNodes", [], fields, False)
            rows = [row for row in rows if set(row[3]) & set(names)]
        else:
            rows = client.call("QueryNodes", names, ["name", "pinst_list", "sinst_list"], False)
        chosen = [row[1] for row in rows] if primary else []
        chosen += [row[2] for row in rows] if secondary else []
        return list(itertools.chain(*chosen))
    if mode == INSTANCES:
        if not names:
            raise _invalid("No instance names passed")
        return [row[0] for row in client.call("QueryInstances", names, ["name"], False)]
    if mode == INSTANCES_BY_TAGS:
        if not names:
            raise _invalid("No instance tags passed")
        rows = client.call("QueryInstances", [], ["name", "tags"], False)
        return [row[0] for row in rows if set(row[1]) & set(names)]
    raise _invalid(f"Unknown mode '{mode}'")


def confirm_operation(names: list[str], list_type: str, text: str, extra: str = "") -> Any:
    """Ganeti's ConfirmOperation: the question lists the affected items (past
    twenty of them, a ``v`` choice shows the list first)."""
    message = (
        f"The {text} will operate on {len(names)} {list_type}.\n{extra}Do you want to continue?"
    )
    affected = f"\nAffected {list_type}:\n" + "\n".join(f"  {name}" for name in names)
    choices: list[tuple[str, Any, str]] = [
        ("y", True, f"Yes, execute the {text}"),
        ("n", False, f"No, abort the {text}"),
    ]
    if len(names) <= 20:
        return common.ask_user(message + affected, choices)
    choices.insert(1, ("v", "v", f"View the list of affected {list_type}"))
    choice = common.ask_user(message, choices)
    if choice == "v":
        choices.pop(1)
        choice = common.ask_user(message + affected, choices)
    return choice


def many_ops(
    opts: argparse.Namespace,
    operation: str,
    make_op: Callable[[str, argparse.Namespace], dict[str, Any]],
) -> int:
    """Run ``make_op``'s opcode for every selected instance (Ganeti's
    GenericManyOps): one job each, confirmed first when several are affected."""
    mode = opts.multi_mode or INSTANCES
    client = common.get_client()
    names = expand_names(client, mode, opts.instances)
    if not names:
        if mode == CLUSTER:
            print("Cluster is empty, no instances to shutdown")
            return C.EXIT_SUCCESS
        raise _invalid("Selection filter does not match any instances")
    multi = mode != INSTANCES or len(names) > 1
    if multi and not opts.force_multi and not confirm_operation(names, "instances", operation):
        return C.EXIT_FAILURE
    executor = JobExecutor(client, opts, verbose=multi)
    for name in names:
        executor.queue_job(name, make_op(name, opts))
    results = executor.wait_or_show(not opts.submit)
    return int(not all(ok for ok, _ in results))


def _select_os(opts: argparse.Namespace) -> str | None:
    """The OS chosen from a numbered list of the cluster's (None: aborted)."""
    op = {"OP_ID": "OP_OS_DIAGNOSE", "output_fields": ["name", "variants"], "names": []}
    print("Available OS templates:")
    choices: list[tuple[str, Any, str]] = []
    waiting = argparse.Namespace(**{**vars(opts), "submit": False})
    for name, variants in common.submit_or_send(waiting, op):
        for entry in [f"{name}+{v}" for v in variants] if variants else [name]:
            print(f"{len(choices):>3}: {entry}")
            choices.append((str(len(choices)), entry, entry))
    choices.append(("x", None, "Exit gnt-instance reinstall"))
    chosen: str | None = common.ask_user("Enter OS template number (or x to abort):", choices)
    return chosen


def _os_change(opts: argparse.Namespace) -> str:
    return f"change the OS to '{opts.os}'" if opts.os is not None else "keep the same OS"


def reinstall(opts: argparse.Namespace, make_op: Callable[[str], dict[str, Any]]) -> int:
    """``gnt-instance reinstall``: confirmed unless forced, several at once with
    ``--force-multiple``."""
    mode = opts.multi_mode or INSTANCES
    client = common.get_client()
    names = expand_names(client, mode, opts.instances)
    if not names:
        raise _invalid("Selection filter does not match any instances")
    if opts.select_os:
        opts.os = _select_os(opts)
        if opts.os is None:
            print("User aborted reinstall, exiting", file=sys.stderr)
            return C.EXIT_FAILURE
    multi = mode != INSTANCES or len(names) > 1
    if multi:
        warning = (
            f"Note: this will remove *all* data for the below instances! It will"
            f" {_os_change(opts)}.\n"
        )
        if not (opts.force_multi or confirm_operation(names, "instances", "reinstall", warning)):
            return C.EXIT_FAILURE
    elif not (opts.force or opts.force_multi):
        question = (
            f"This will reinstall the instance '{names[0]}' (and {_os_change(opts)}) which"
            " removes all data. Continue?"
        )
        if not common.confirm(question):
            return C.EXIT_FAILURE
    executor = JobExecutor(client, opts, verbose=multi)
    for name in names:
        executor.queue_job(name, make_op(name))
    results = executor.wait_or_show(not opts.submit)
    return C.EXIT_SUCCESS if all(ok for ok, _ in results) else C.EXIT_FAILURE
