"""gnt-node evacuate, failover and migrate: questions, jobs and summaries as
Ganeti 3.0.2's client (their opcodes fail until their logical units exist)."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.jobexec import JobExecutor
from corral.nicesort import nice_sort

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# The key of the job ids in the result of an opcode that submits jobs.
JOB_IDS_KEY = "jobs"


def _query(fields: list[str], names: list[str]) -> list[Any]:
    rows: list[Any] = common.get_client().call("QueryNodes", names, fields, False)
    return rows


def _follow(opts: argparse.Namespace, result: Any) -> int:
    """Wait for the jobs an evacuate or migrate opcode submitted; count failures."""
    jex = JobExecutor(common.get_client(), opts)
    for ok, job_id in result[JOB_IDS_KEY]:
        jex.add_job_id(None, ok, job_id)
    return len([row for row in jex.get_results() if not row[0]])


def cmd_evacuate(opts: argparse.Namespace) -> int:
    if opts.dst_node is not None:
        print(
            "New secondary node given (disabling iallocator), hence evacuating secondary"
            " instances only.",
            file=sys.stderr,
        )
        opts.secondary_only, opts.primary_only = True, False
    if opts.secondary_only and opts.primary_only:
        raise errors.OpPrereqError(
            "Only one of the --primary-only and --secondary-only options can be passed",
            C.ECODE_INVAL,
        )
    mode = (
        "primary-only" if opts.primary_only else "secondary-only" if opts.secondary_only else "all"
    )
    fields = [f for f, skip in (("pinst_list", opts.secondary_only),
                                ("sinst_list", opts.primary_only)) if not skip]  # fmt: skip
    instances = {name for row in _query(fields, opts.node) for names in row for name in names}
    if not instances:
        print(f"No instances to evacuate on node(s) {', '.join(opts.node)}, exiting.",
              file=sys.stderr)  # fmt: skip
        return C.EXIT_SUCCESS
    question = (
        f"Relocate instance(s) {', '.join(nice_sort(instances))} from node(s)"
        f" {', '.join(opts.node)}?"
    )
    if not (opts.force or common.confirm(question)):
        return C.EXIT_CONFIRMATION
    op = {"OP_ID": "OP_NODE_EVACUATE", "node_name": opts.node[0], "mode": mode,
          "remote_node": opts.dst_node, "iallocator": opts.iallocator,
          "early_release": opts.early_release,
          "ignore_soft_errors": opts.ignore_soft_errors}  # fmt: skip
    bad = _follow(opts, common.submit_or_send(opts, op))
    if bad:
        print(f"There were {bad} errors during the evacuation.")
        return C.EXIT_FAILURE
    print("All instances evacuated successfully.")
    return C.EXIT_SUCCESS


def cmd_failover(opts: argparse.Namespace) -> int:
    ((node, pinst),) = _query(["name", "pinst_list"], opts.node)[:1]
    if not pinst:
        print(f"No primary instances on node {node}, exiting.", file=sys.stderr)
        return C.EXIT_SUCCESS
    pinst = nice_sort(pinst)
    names = ",".join(f"'{name}'" for name in pinst)
    if not opts.force and not common.confirm(f"Fail over instance(s) {names}?"):
        return 2
    jex = JobExecutor(common.get_client(), opts)
    for name in pinst:
        jex.queue_job(name, {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": name,
                             "ignore_consistency": opts.ignore_consistency,
                             "iallocator": opts.iallocator})  # fmt: skip
    results = jex.get_results()
    bad = len([row for row in results if not row[0]])
    if bad:
        print(f"There were errors during the failover:\n{bad} error(s) out of"
              f" {len(results)} instance(s).")  # fmt: skip
    else:
        print(f"All {len(results)} instance(s) failed over successfully.")
    return C.EXIT_SUCCESS


def cmd_migrate(opts: argparse.Namespace) -> int:
    ((node, pinst),) = _query(["name", "pinst_list"], opts.node)
    if not pinst:
        print(f"No primary instances on node {node}, exiting.")
        return C.EXIT_SUCCESS
    if not (opts.force or common.confirm(f"Migrate instance(s) {', '.join(nice_sort(pinst))}?")):
        return C.EXIT_CONFIRMATION
    if not opts.live and opts.migration_mode is not None:
        raise errors.OpPrereqError(
            "Only one of the --non-live and --migration-mode options can be passed",
            C.ECODE_INVAL,
        )
    mode = "non-live" if not opts.live else opts.migration_mode
    op = {"OP_ID": "OP_NODE_MIGRATE", "node_name": opts.node[0], "mode": mode,
          "iallocator": opts.iallocator, "target_node": opts.dst_node,
          "allow_runtime_changes": opts.allow_runtime_chgs,
          "ignore_ipolicy": opts.ignore_ipolicy}  # fmt: skip
    bad = _follow(opts, common.submit_or_send(opts, op))
    if bad:
        print(f"There were {bad} errors during the node migration.")
        return C.EXIT_FAILURE
    print("All instances migrated successfully.")
    return C.EXIT_SUCCESS


def add_commands(sub: Any) -> None:
    """Register ``evacuate``, ``failover`` and ``migrate`` on gnt-node's subparsers."""
    p = common.add_command(sub, "evacuate", cmd_evacuate, "Relocate the instances from a node")
    common.add_args(p, "node", "NODE", 1, 1)
    common.add_force(p)
    p.add_argument("-I", "--iallocator")
    p.add_argument("--ignore-soft-errors", action="store_true", default=False)
    p.add_argument("-n", "--new-secondary", dest="dst_node")
    p.add_argument("--early-release", action="store_true")
    p.add_argument("-p", "--primary-only", action="store_true")
    p.add_argument("-s", "--secondary-only", action="store_true")
    common.add_submit_options(p, dry_run=False)
    p = common.add_command(sub, "failover", cmd_failover, "Fail over a node's primary instances")
    common.add_args(p, "node", "NODE", 1, 1)
    common.add_force(p)
    p.add_argument("--ignore-consistency", action="store_true")
    p.add_argument("-I", "--iallocator")
    common.add_priority_option(p)
    p = common.add_command(sub, "migrate", cmd_migrate,
                           "Migrate all the primary instance on a node away from it")  # fmt: skip
    common.add_args(p, "node", "NODE", 1, 1)
    common.add_force(p)
    p.add_argument("--non-live", dest="live", action="store_false", default=True)
    p.add_argument("--migration-mode", choices=["live", "non-live"])
    p.add_argument("-n", "--target-node", dest="dst_node")
    p.add_argument("-I", "--iallocator")
    p.add_argument("--ignore-ipolicy", action="store_true")
    p.add_argument("--no-runtime-changes", dest="allow_runtime_chgs", action="store_false",
                   default=True)  # fmt: skip
    common.add_submit_options(p, dry_run=False)
