"""gnt-instance failover and migrate: options, questions and opcodes as
Ganeti 3.0.2's client."""

from __future__ import annotations

import argparse

from corral import constants as C
from corral import errors
from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def _check_target(opts: argparse.Namespace) -> None:
    if opts.iallocator and opts.dst_node:
        raise errors.OpPrereqError(
            "Specify either an iallocator (-I), or a target node (-n) but not both",
            C.ECODE_INVAL,
        )


def cmd_failover(opts: argparse.Namespace) -> int:
    (name,) = opts.instance
    _check_target(opts)
    if not opts.force:
        question = (
            f"Failover will happen to image {name}. This requires a shutdown of the"
            " instance. Continue?"
        )
        if not common.confirm(question):
            return C.EXIT_FAILURE
    if opts.ignore_consistency and not common.confirm(
        f"To failover instance {name}, the source node must be marked offline first."
        " Is this already the case?"
    ):
        return C.EXIT_FAILURE
    # As Ganeti's client: --cleanup is accepted and not passed on.
    op = {
        "OP_ID": "OP_INSTANCE_FAILOVER",
        "instance_name": name,
        "ignore_consistency": opts.ignore_consistency,
        "shutdown_timeout": opts.shutdown_timeout,
        "iallocator": opts.iallocator,
        "target_node": opts.dst_node,
        "ignore_ipolicy": opts.ignore_ipolicy,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_migrate(opts: argparse.Namespace) -> int:
    (name,) = opts.instance
    _check_target(opts)
    if not opts.force:
        if opts.cleanup:
            question = (
                f"Instance {name} will be recovered from a failed migration. Note that the"
                " migration procedure (including cleanup)"
            )
        else:
            question = f"Instance {name} will be migrated. Note that migration"
        question += (
            " might impact the instance if anything goes wrong (e.g. due to bugs in the"
            " hypervisor). Continue?"
        )
        if not common.confirm(question):
            return C.EXIT_FAILURE
    if not opts.live and opts.migration_mode is not None:
        raise errors.OpPrereqError(
            "Only one of the --non-live and --migration-mode options can be passed",
            C.ECODE_INVAL,
        )
    op = {
        "OP_ID": "OP_INSTANCE_MIGRATE",
        "instance_name": name,
        "mode": C.HT_MIGRATION_NONLIVE if not opts.live else opts.migration_mode,
        "cleanup": opts.cleanup,
        "iallocator": opts.iallocator,
        "target_node": opts.dst_node,
        "allow_failover": opts.allow_failover,
        "allow_runtime_changes": opts.allow_runtime_chgs,
        "ignore_ipolicy": opts.ignore_ipolicy,
        "ignore_hvversions": opts.ignore_hvversions,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def _target_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--target-node", dest="dst_node", metavar="NODE")
    p.add_argument("-I", "--iallocator", metavar="<NAME>")
    p.add_argument("--ignore-ipolicy", action="store_true")
    p.add_argument("--cleanup", action="store_true")


def add_commands(sub: Any) -> None:
    """Register ``failover`` and ``migrate`` on gnt-instance's subparsers."""
    p = common.add_command(
        sub,
        "failover",
        cmd_failover,
        "Stops the instance, changes its primary node and (if it was originally running)"
        " starts it on the new node",
    )
    common.add_args(p, "instance", "INSTANCE", 1, 1)
    common.add_force(p)
    p.add_argument("--ignore-consistency", action="store_true")
    p.add_argument("--shutdown-timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT)
    _target_options(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "migrate", cmd_migrate, "Migrate instance to another node")
    common.add_args(p, "instance", "INSTANCE", 1, 1)
    common.add_force(p)
    p.add_argument("--non-live", dest="live", action="store_false", default=True)
    p.add_argument(
        "--migration-mode", choices=[C.HT_MIGRATION_LIVE, C.HT_MIGRATION_NONLIVE], default=None
    )
    _target_options(p)
    p.add_argument("--allow-failover", action="store_true")
    p.add_argument("--ignore-hvversions", action="store_true")
    p.add_argument(
        "--no-runtime-changes", dest="allow_runtime_chgs", action="store_false", default=True
    )
    common.add_submit_options(p)
