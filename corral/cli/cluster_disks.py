"""gnt-cluster verify-disks and repair-disk-sizes, with Ganeti 3.0.2's
options and output."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.errors_fmt import format_error
from corral.cli.jobexec import JobExecutor

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def cmd_verify_disks(opts: argparse.Namespace) -> int:
    """Verify each group's disks, activate those that need it, report missing ones."""
    client = common.get_client()
    op = {"OP_ID": "OP_CLUSTER_VERIFY_DISKS", "group_name": opts.nodegroup}
    result = common.submit_or_send(opts, op, client)
    jex = JobExecutor(client, opts)
    for ok, job_id in result["jobs"]:
        jex.add_job_id(None, ok, job_id)
    code = C.EXIT_SUCCESS
    for ok, job_result in jex.get_results():
        if not ok:
            print(f"Job failed: {job_result}")
            continue
        ((bad_nodes, instances, missing),) = job_result
        code |= _report(bad_nodes, missing)
        code |= _activate(opts, client, [name for name in instances if name not in missing])
        if not missing and not instances:
            print("No disks need to be activated.")
    return code


def _activate(opts: argparse.Namespace, client: Any, names: list[str]) -> int:
    """activate-disks for each instance that needs it (mirrored copies to resync)."""
    code = C.EXIT_SUCCESS
    for name in names:
        print(f"Activating disks for instance '{name}'")
        try:
            common.submit_or_send(
                opts, {"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": name}, client
            )
        except errors.GenericError as err:
            failed, message = format_error(err)
            code |= failed
            print(f"Error activating disks for instance {name}: {message}", file=sys.stderr)
    return code


def _report(bad_nodes: dict[str, str], missing: dict[str, list[list[str]]]) -> int:
    """One group's node errors and missing volumes, as Ganeti's VerifyDisks
    prints them."""
    code = C.EXIT_SUCCESS
    for node, text in bad_nodes.items():
        print(f"Error gathering data on node {node}: {text[-400:]}")
        print("You need to fix these nodes first before fixing instances")
        code = C.EXIT_FAILURE
    for name, volumes in missing.items():
        if all(node in bad_nodes for node, _ in volumes):
            print(f"Instance {name} cannot be verified as it lives on broken nodes")
            continue
        print(f"Instance {name} has missing logical volumes:")
        for node, volume in sorted(volumes):
            broken = "broken node " if node in bad_nodes else ""
            print(f"\t{broken}{node} /dev/{volume}")
    if missing:
        print(
            "You need to replace or recreate disks for all the above instances if this"
            " message persists after fixing broken nodes."
        )
        code = C.EXIT_FAILURE
    return code


def cmd_repair_disk_sizes(opts: argparse.Namespace) -> int:
    """Record the disks' sizes as their nodes measure them."""
    common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": opts.args})
    return C.EXIT_SUCCESS


def add_commands(sub: Any) -> None:
    """Register ``verify-disks`` and ``repair-disk-sizes`` with Ganeti's options."""
    p = common.add_command(
        sub, "verify-disks", cmd_verify_disks, "Does a check on the cluster disk status"
    )
    common.add_priority_option(p)
    p.add_argument("-g", "--node-group", dest="nodegroup", help="Node group (name or uuid)")
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(
        sub, "repair-disk-sizes", cmd_repair_disk_sizes, "Updates mismatches in recorded disk sizes"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="Only check the parameters, do not execute"
    )
    common.add_priority_option(p)
    common.add_args(p, "args", "[<instance-name>...]", 0, None)
