"""gnt-cluster command and copyfile: Ganeti's, carried over noded's mutual
TLS where Ganeti uses root ssh (Corral has no ssh between nodes).

As Ganeti's, they run in the command itself, not as jobs: masterd names the
online nodes (a note names the offline ones skipped), then the command calls
each node's noded in turn with the cluster's client certificate
(:mod:`corral.cli.noded_client`), one node after the other as Ganeti does (a
command that restarts a service never runs on two nodes at once), with the
fence token of that masterd: they act for it, and a node that a newer master
has called refuses them (:mod:`corral.rpc.fencing`).  What a
node does is in :mod:`corral.node.handlers.operator`.  Options, output and
exit codes are Ganeti's; a node that cannot be reached shows its error where
ssh's would be, with ssh's return code 255.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.table import names_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    import ssl
    from typing import Any

    from corral.luxi.client import Client

# What Ganeti's ssh returns when it cannot reach the node.
SSH_FAILURE = 255
# scp -p keeps these mode bits (set-id and permission bits, not the sticky bit).
COPIED_MODE_BITS = 0o6777
_SEPARATOR = "------------------------------------------------"


def online_nodes(
    client: Client,
    names: list[str],
    group: str | None,
    *,
    filter_master: bool = False,
    secondary_ips: bool = False,
) -> list[tuple[str, str]]:
    """Ganeti's GetOnlineNodes: ``(name, address)`` of the online nodes among
    ``names`` (all if none) in ``group``, maybe without the master; with
    ``secondary_ips`` the name shown and the address are the secondary IP."""
    parts: list[Any] = []
    if names:
        parts.append(names_filter("name", names))
    if group is not None:
        parts.append(["|", ["==", "group", group], ["==", "group.uuid", group]])
    if filter_master:
        parts.append(["!", ["?", "master"]])
    qfilter = None if not parts else parts[0] if len(parts) == 1 else ["&", *parts]
    result = client.call("Query", C.QR_NODE, ["name", "offline", "pip", "sip"], qfilter)
    rows = [[value for _status, value in row] for row in result["data"]]
    offline = [name for name, is_offline, _pip, _sip in rows if is_offline]
    if offline:
        print(f"Note: skipping offline node(s): {', '.join(offline)}", file=sys.stderr)
    if secondary_ips:
        return [(sip, sip) for _name, is_offline, _pip, sip in rows if not is_offline]
    return [(name, pip) for name, is_offline, pip, _sip in rows if not is_offline]


def _client_tls(root: str) -> ssl.SSLContext:
    from corral.cli import noded_client  # here: it loads ssl and http.client

    try:
        return noded_client.tls_context(root)
    except noded_client.NodeCallError as err:
        raise errors.OpPrereqError(
            f"{err}; gnt-cluster command and copyfile run as root on the master node",
            C.ECODE_ENVIRON,
        ) from None


def _run_on(
    ctx: ssl.SSLContext, address: str, port: int, command: str, fence: int | None
) -> tuple[str, int]:
    """The command's output (standard output, then standard error, as Ganeti's
    RunResult.output) and exit code on one node."""
    from corral.cli import noded_client

    try:
        result = noded_client.call(
            ctx, address, port, "run_command", [command], C.CLUSTER_COMMAND_CALL_TIMEOUT, fence
        )
    except noded_client.NodeCallError as err:
        return f"{err}\n", SSH_FAILURE
    return result["stdout"] + result["stderr"], result["exit_code"]


def _show(name: str, output: str, code: int, machine_names: bool) -> None:
    print(_SEPARATOR)
    if machine_names:
        for line in output.splitlines():
            print(f"{name}: {line}")
    else:
        print(f"node: {name}")
        print(output)
    print(f"return code = {code}", flush=True)


def cmd_command(opts: argparse.Namespace) -> int:
    """Run a shell command on the online nodes, the master last."""
    command = " ".join(opts.args)
    root = common.cluster_root()
    client = common.get_client()
    try:
        nodes = online_nodes(client, opts.nodes, opts.nodegroup)
        master, port, fence = client.call(
            "QueryConfigValues", ["master_node", "noded_port", "fence_token"]
        )
    finally:
        client.close()
    nodes.sort(key=lambda node: node[0] == master)  # the master last, as Ganeti
    ctx = _client_tls(root)
    # A command's bytes that are not UTF-8 come back as lone surrogates: as they were.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="surrogateescape")
    for name, address in nodes:
        output, code = _run_on(ctx, address, port, command, fence)
        if opts.failure_only and code == C.EXIT_SUCCESS:
            continue
        _show(name, output, code, opts.show_machine_names)
    return C.EXIT_SUCCESS


def _read_source(filename: str) -> tuple[bytes, os.stat_result]:
    """The file to copy and its status; OpPrereqError if it is no regular
    file (Ganeti's scp fails on every node then) or too large."""
    try:
        fd = os.open(filename, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block
    except OSError as err:
        raise errors.OpPrereqError(
            f"Cannot read '{filename}': {err.strerror}", C.ECODE_INVAL
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.OpPrereqError(
                f"'{filename}' is not a regular file; copyfile copies one file", C.ECODE_INVAL
            )
        if st.st_size > C.CLUSTER_COPY_MAX_SIZE:
            raise errors.OpPrereqError(
                f"'{filename}' has {st.st_size} bytes; copyfile copies files of up to"
                f" {C.CLUSTER_COPY_MAX_SIZE >> 20} MiB",
                C.ECODE_INVAL,
            )
        with os.fdopen(os.dup(fd), "rb") as source:
            return source.read(C.CLUSTER_COPY_MAX_SIZE + 1), st
    finally:
        os.close(fd)


def _wire_name(root: str, filename: str) -> tuple[str, bool]:
    """The path sent and whether it lies below this master's root (test
    clusters: it lands below each node's root, as Ganeti's virtual clusters
    exchange their roots)."""
    if root != "/" and os.path.commonpath([root, filename]) == root:
        return "/" + os.path.relpath(filename, root), True
    return filename, False


def cmd_copyfile(opts: argparse.Namespace) -> int:
    """Copy a file of the master to the other online nodes."""
    import base64

    from corral.cli import noded_client  # here: it loads ssl and http.client

    filename = os.path.abspath(opts.args[0])
    if not os.path.exists(filename):
        raise errors.OpPrereqError(f"No such filename '{filename}'", C.ECODE_INVAL)
    root = common.cluster_root()
    content, st = _read_source(filename)
    client = common.get_client()
    try:
        nodes = online_nodes(
            client,
            opts.nodes,
            opts.nodegroup,
            filter_master=True,
            secondary_ips=opts.use_replication_network,
        )
        port, fence = client.call("QueryConfigValues", ["noded_port", "fence_token"])
    finally:
        client.close()
    ctx = _client_tls(root)
    wire_name, in_root = _wire_name(root, filename)
    args = [
        wire_name,
        in_root,
        base64.b64encode(content).decode("ascii"),
        st.st_mode & COPIED_MODE_BITS,
        int(st.st_atime),
        int(st.st_mtime),
    ]
    for name, address in nodes:
        try:
            noded_client.call(ctx, address, port, "copy_file", args, C.RPC_TMO_NORMAL, fence)
        except noded_client.NodeCallError as err:
            print(f"Copy of file {filename} to node {name}:{port} failed: {err}", file=sys.stderr)
    return C.EXIT_SUCCESS


def _add_node_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--node",
        dest="nodes",
        action="append",
        default=[],
        metavar="<node>",
        help="Use only this node (can be used multiple times, if not given defaults to all nodes)",
    )
    parser.add_argument(
        "-g", "--node-group", dest="nodegroup", metavar="<nodegroup>",
        help="Node group (name or uuid)",
    )  # fmt: skip


def add_commands(sub: Any) -> None:
    """Register ``copyfile`` and ``command`` on gnt-cluster's subparsers."""
    p = common.add_command(
        sub, "copyfile", cmd_copyfile, "Copies a file to all (or only some) nodes"
    )
    _add_node_options(p)
    p.add_argument(
        "--use-replication-network",
        dest="use_replication_network",
        action="store_true",
        help="Whether to use the replication network for talking to the nodes",
    )
    common.add_args(p, "args", "<filename>", 1, 1)
    p = common.add_command(
        sub, "command", cmd_command, "Runs a command on all (or only some) nodes"
    )
    _add_node_options(p)
    p.add_argument(
        "-M", "--show-machine-names", dest="show_machine_names", action="store_true",
        help="Show machine name for every line in output",
    )  # fmt: skip
    p.add_argument(
        "--failure-only",
        dest="failure_only",
        action="store_true",
        help="Hide successful results and show failures only (determined by the exit code)",
    )
    common.add_args(p, "args", "<command>", 1, None)
