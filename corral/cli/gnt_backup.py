"""gnt-backup: export, import, list, list-fields and remove instance exports,
with Ganeti 3.0.2's options, output and exit codes.

``import`` takes gnt-instance add's options (instance_specs) with Ganeti's
import options instead of the add-only ones.  While an export or import job
runs, its progress lines become bars when standard output is a terminal
(:mod:`corral.cli.progress`).
"""

from __future__ import annotations

import argparse

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli import instance_specs as S
from corral.cli.errors_fmt import JobSubmitted
from corral.cli.table import generic_list, generic_list_fields, names_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

DEFAULT_FIELDS = ["node", "export"]


def _submit(opts: argparse.Namespace, op: dict[str, Any]) -> Any:
    """Submit ``op`` as a job (``--submit``: print its id) and follow it,
    showing transfer progress as bars on a terminal."""
    from corral.cli.progress import ProgressFeedback

    client = common.get_client()
    job_id = client.submit_job([{**common.common_op_fields(opts), **op}])
    if opts.print_jobid:
        print(job_id, flush=True)
    if opts.submit:
        raise JobSubmitted(job_id)
    return common.poll_job(client, job_id, ProgressFeedback())[0]


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    qfilter = names_filter("node", opts.nodes)
    return generic_list(common.get_client(), C.QR_EXPORT, fields, qfilter, opts)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_EXPORT, opts.fields, opts)


def cmd_export(opts: argparse.Namespace) -> int:
    """OP_BACKUP_EXPORT of one instance to a node of the cluster."""
    (name,) = opts.instance
    if not opts.node:
        raise errors.OpPrereqError("Target node must be specified", C.ECODE_INVAL)
    op = {
        "OP_ID": "OP_BACKUP_EXPORT",
        "instance_name": name,
        "target_node": opts.node,
        "compress": opts.transport_compression,
        "shutdown": opts.shutdown,
        "shutdown_timeout": opts.shutdown_timeout,
        "remove_instance": opts.remove_instance,
        "ignore_remove_failures": opts.ignore_remove_failures,
        "zero_free_space": opts.zero_free_space,
        "zeroing_timeout_fixed": opts.zeroing_timeout_fixed,
        "zeroing_timeout_per_mib": opts.zeroing_timeout_per_mib,
        "long_sleep": opts.long_sleep,
    }
    _submit(opts, op)
    return C.EXIT_SUCCESS


def cmd_import(opts: argparse.Namespace) -> int:
    """OP_INSTANCE_CREATE in import mode, from an export in the cluster."""
    (name,) = opts.instance
    _submit(opts, S.create_opcode(opts, name, mode="import"))
    return C.EXIT_SUCCESS


def cmd_remove(opts: argparse.Namespace) -> int:
    """OP_BACKUP_REMOVE: the named instance's exports, on every node."""
    (name,) = opts.instance
    _submit(opts, {"OP_ID": "OP_BACKUP_REMOVE", "instance_name": name})
    return C.EXIT_SUCCESS


def _list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    p.add_argument("--separator", help="Separator between output fields")


def _add_queries(sub: Any) -> None:
    p = common.add_command(
        sub, "list", cmd_list, "Lists instance exports available in the ganeti cluster"
    )
    common.add_args(p, "args", "", 0, 0)
    p.add_argument("-n", "--node", dest="nodes", action="append", default=[], metavar="<node>")
    p.add_argument("--units", choices=("h", "m", "g", "t"))
    common.add_list_options(p)
    p = common.add_command(
        sub, "list-fields", cmd_list_fields, "Lists all available fields for exports"
    )
    common.add_args(p, "fields", "[fields...]", 0, None)
    _list_options(p)


def _add_export(sub: Any) -> None:
    p = common.add_command(sub, "export", cmd_export, "Exports an instance to an image")
    common.add_args(p, "instance", "<instance-name>", 1, 1)
    common.add_force(p)
    p.add_argument("-n", "--node", metavar="<node>", help="Target node")
    p.add_argument("--transport-compression", default="none")
    p.add_argument("--noshutdown", dest="shutdown", action="store_false")
    p.add_argument("--shutdown-timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT)
    p.add_argument("--remove-instance", action="store_true")
    p.add_argument("--ignore-remove-failures", action="store_true")
    p.add_argument("--zero-free-space", action="store_true")
    p.add_argument("--zeroing-timeout-fixed", type=int)
    p.add_argument("--zeroing-timeout-per-mib", type=float)
    p.add_argument("--long-sleep", action="store_true")
    common.add_submit_options(p)


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-backup", "Manage instance exports")
    _add_queries(sub)
    _add_export(sub)
    p = common.add_command(sub, "import", cmd_import, "Imports an instance from an exported image")
    common.add_args(p, "instance", "<instance-name>", 1, 1)
    S.add_create_options(p, mode="import")
    common.add_submit_options(p)
    p = common.add_command(
        sub, "remove", cmd_remove, "Remove exports of named instance from the filesystem."
    )
    common.add_args(p, "instance", "<instance-name>", 1, 1)
    common.add_submit_options(p)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
