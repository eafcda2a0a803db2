"""gnt-instance activate-disks, deactivate-disks, recreate-disks and
replace-disks, with Ganeti 3.0.2's options and output."""

from __future__ import annotations

import argparse

from corral import constants as C
from corral import errors
from corral import paramtypes as T
from corral.cli import common
from corral.cli.instance_specs import ident_key_val

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def cmd_activate_disks(opts: argparse.Namespace) -> int:
    """Assemble the disks; ``node:disk/N:path`` per disk."""
    op = {
        "OP_ID": "OP_INSTANCE_ACTIVATE_DISKS",
        "instance_name": opts.instance[0],
        "ignore_size": opts.ignore_size,
        "wait_for_sync": opts.wait_for_sync,
    }
    for host, iv_name, path in common.submit_or_send(opts, op):
        print(f"{host}:{iv_name}:{path}")
    return C.EXIT_SUCCESS


def cmd_deactivate_disks(opts: argparse.Namespace) -> int:
    op = {
        "OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS",
        "instance_name": opts.instance[0],
        "force": opts.force,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def _recreate_disks(given: list[tuple[str, Any]] | None) -> list[list[Any]]:
    """``--disk N:size=S,mode=M`` options as ``[index, params]`` (sizes in MiB)."""
    disks = []
    for ident, params in given or []:
        if not isinstance(params, dict):
            raise errors.OpPrereqError(
                f"Invalid disk/{ident} value: expected dict, got {params}", C.ECODE_INVAL
            )
        try:
            index = int(ident)
        except ValueError:
            raise errors.OpPrereqError(f"Invalid disk index '{ident}'", C.ECODE_INVAL) from None
        params = dict(params)
        if "size" in params:
            # As Ganeti's: a bad unit is not caught ("Unhandled Ganeti error").
            params["size"] = T.parse_unit(params["size"])
        if "spindles" in params:
            try:
                params["spindles"] = int(params["spindles"])
            except ValueError as err:
                raise errors.OpPrereqError(
                    f"Invalid spindles for disk {index}: {err}", C.ECODE_INVAL
                ) from None
        disks.append([index, params])
    return disks


def cmd_recreate_disks(opts: argparse.Namespace) -> int:
    nodes: list[str] = []
    if opts.node:
        if opts.iallocator:
            raise errors.OpPrereqError(
                "At most one of either --nodes or --iallocator can be passed", C.ECODE_INVAL
            )
        pnode, _, snode = opts.node.partition(":")
        nodes = [pnode, snode] if snode else [pnode]
    op = {
        "OP_ID": "OP_INSTANCE_RECREATE_DISKS",
        "instance_name": opts.instance[0],
        "disks": _recreate_disks(opts.disks),
        "nodes": nodes,
        "iallocator": opts.iallocator,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def _replace_mode(opts: argparse.Namespace, disks: list[int]) -> str:
    """The replacement mode the options ask for (Ganeti's checks and words)."""
    given = [opts.on_primary, opts.on_secondary, opts.auto, opts.dst_node is not None,
             opts.iallocator is not None]  # fmt: skip
    if given.count(True) != 1:
        raise errors.OpPrereqError(
            "One and only one of the -p, -s, -a, -n and -I options must be passed",
            C.ECODE_INVAL,
        )
    if opts.on_primary:
        return C.REPLACE_DISK_PRI
    if opts.on_secondary:
        return C.REPLACE_DISK_SEC
    if opts.auto:
        if disks:
            raise errors.OpPrereqError(
                "Cannot specify disks when using automatic mode", C.ECODE_INVAL
            )
        return C.REPLACE_DISK_AUTO
    return C.REPLACE_DISK_CHG


def cmd_replace_disks(opts: argparse.Namespace) -> int:
    """Replace the copies of a mirrored instance's disks."""
    disks: list[int] = []
    if opts.disks is not None:
        try:
            disks = [int(index) for index in opts.disks.split(",")]
        except ValueError as err:
            raise errors.OpPrereqError(f"Invalid disk index passed: {err}", C.ECODE_INVAL) from None
    op = {
        "OP_ID": "OP_INSTANCE_REPLACE_DISKS",
        "instance_name": opts.instance[0],
        "disks": disks,
        "remote_node": opts.dst_node,
        "mode": _replace_mode(opts, disks),
        "iallocator": opts.iallocator,
        "early_release": opts.early_release,
        "ignore_ipolicy": opts.ignore_ipolicy,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def add_commands(sub: Any) -> None:
    """Register the four commands with Ganeti's options."""
    p = common.add_command(
        sub, "activate-disks", cmd_activate_disks, "Activate an instance's disks"
    )
    common.add_submit_options(p, dry_run=False)
    p.add_argument("--ignore-size", action="store_true", help="Ignore the recorded size")
    p.add_argument("--wait-for-sync", action="store_true", help="Wait for the disks to sync")
    common.add_args(p, "instance", "<instance-name>", 1, 1)
    p = common.add_command(
        sub, "deactivate-disks", cmd_deactivate_disks, "Deactivate an instance's disks"
    )
    common.add_force(p)
    common.add_submit_options(p)
    common.add_args(p, "instance", "[-f] <instance-name>", 1, 1)
    p = common.add_command(
        sub, "recreate-disks", cmd_recreate_disks, "Recreate an instance's disks"
    )
    p.add_argument("--disk", dest="disks", action="append", type=ident_key_val("--disk"))
    p.add_argument("-n", "--node", help="Target node and optional secondary node")
    p.add_argument("-I", "--iallocator", help="Select nodes for the instance automatically")
    common.add_submit_options(p)
    common.add_args(p, "instance", "<instance-name>", 1, 1)
    p = common.add_command(
        sub, "replace-disks", cmd_replace_disks, "Replaces disks for the instance"
    )
    on = " (applies only to internally mirrored disk templates, e.g. mirrored)"
    for flags, text in (
        (("-a", "--auto"), "Automatically replace faulty disks" + on),
        (("--early-release",), "Release the locks on the secondary node(s) early"),
        (("-p", "--on-primary"), "Replace the disk(s) on the primary node" + on),
        (("-s", "--on-secondary"), "Replace the disk(s) on the secondary node" + on),
        (("--ignore-ipolicy",), "Ignore instance policy violations"),
    ):
        p.add_argument(*flags, action="store_true", help=text)
    p.add_argument("--disks", help="Comma-separated list of disks indices to act on")
    p.add_argument("-I", "--iallocator", help="Select new secondary for the instance")
    p.add_argument("-n", "--new-secondary", dest="dst_node", help="Specifies the new secondary")
    common.add_submit_options(p)
    common.add_args(p, "instance", "[-s|-p|-a|-n NODE|-I NAME] <instance-name>", 1, 1)
