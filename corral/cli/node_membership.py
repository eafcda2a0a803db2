"""gnt-node add, remove and join-token (node membership; gnt_node calls
:func:`add_commands`).

``join-token`` is Corral's: nodes join with a one-time token instead of SSH.
"""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.instance_specs import ident_key_val, key_val
from corral.cli.optvalues import boolean

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from corral.luxi.client import Client

# Ganeti's SSH options: accepted at their defaults only (Corral does no SSH
# set-up).  --no-ssh-key-check is accepted: with no SSH, there is no host key
# fingerprint to check (the join token authenticates both sides).
_SSH_OPTIONS = (("force_join", False, "--force-join"),
                ("node_setup", True, "--no-node-setup"))  # fmt: skip


def _existing(client: Client, name: str) -> list[object] | None:
    """``[name, sip, master]`` of the node ``name`` if the cluster has it."""
    try:
        rows = client.query(C.QR_NODE, ["name", "sip", "master"], ["=", "name", name])["data"]
    except errors.OpPrereqError:  # as Ganeti's: an unknown name is not in the cluster
        return None
    return [value for _, value in rows[0]] if rows else None


def cmd_add(opts: argparse.Namespace) -> int:
    (node,) = opts.node
    for dest, default, option in _SSH_OPTIONS:
        if getattr(opts, dest) != default:
            raise errors.OpPrereqError(
                f"Option {option} is about the SSH set-up, which Corral does not do (nodes"
                " join with a token from 'gnt-node join-token'); leave it out",
                C.ECODE_INVAL,
            )
    client = common.get_client()
    existing = _existing(client, node)
    sip = opts.secondary_ip
    if opts.readd:
        if existing is None:
            print(f"Node {node} not in the cluster - please retry without '--readd'",
                  file=sys.stderr)  # fmt: skip
            return C.EXIT_FAILURE
        if existing[2]:
            print(f"Node {node} is the master, cannot readd", file=sys.stderr)
            return C.EXIT_FAILURE
        sip = existing[1]
    elif existing is not None:
        print(f"Node {node} already in the cluster (as {existing[0]}) - please retry with"
              " '--readd'", file=sys.stderr)  # fmt: skip
        return C.EXIT_FAILURE
    op = {
        "OP_ID": "OP_NODE_ADD",
        "node_name": node,
        "primary_ip": opts.node_ip,
        "secondary_ip": sip,
        "readd": opts.readd,
        "group": opts.nodegroup,
        "vm_capable": opts.vm_capable,
        "master_capable": opts.master_capable,
        "ndparams": opts.ndparams,
        "disk_state": dict(opts.disk_state) or None,
        "hv_state": dict(opts.hv_state) or None,
        "node_setup": opts.node_setup,
    }
    common.submit_or_send(argparse.Namespace(**{**vars(opts), "submit": False}), op, client)
    return C.EXIT_SUCCESS


def cmd_remove(opts: argparse.Namespace) -> int:
    (node,) = opts.node
    common.submit_or_send(opts, {"OP_ID": "OP_NODE_REMOVE", "node_name": node})
    return C.EXIT_SUCCESS


def cmd_join_token(opts: argparse.Namespace) -> int:
    """Print a one-time join token (the master keeps only its hash)."""
    with common.get_client() as client:
        print(client.call("CreateJoinToken", opts.ttl))
    return C.EXIT_SUCCESS


def _add_add(sub: object) -> None:
    p = common.add_command(sub, "add", cmd_add, "Add a node to the cluster")
    common.add_args(p, "node", "<node-name>", 1, 1)
    p.add_argument("-s", "--secondary-ip", dest="secondary_ip", metavar="ADDRESS")
    p.add_argument("--readd", action="store_true", help="Readd old node after replacing it")
    p.add_argument("--node-ip", dest="node_ip", metavar="ADDRESS",
                   help="The node's address (when its name does not resolve)")  # fmt: skip
    p.add_argument("--no-ssh-key-check", dest="ssh_key_check", action="store_false")
    p.add_argument("--force-join", dest="force_join", action="store_true")
    p.add_argument("--no-node-setup", dest="node_setup", action="store_false")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("-g", "--node-group", dest="nodegroup", metavar="<nodegroup>")
    p.add_argument("--master-capable", dest="master_capable", type=boolean)
    p.add_argument("--vm-capable", dest="vm_capable", type=boolean)
    p.add_argument("--node-parameters", dest="ndparams", type=key_val("--node-parameters"))
    p.add_argument("--hypervisor-state", dest="hv_state", action="append", default=[],
                   type=ident_key_val("--hypervisor-state"))  # fmt: skip
    p.add_argument("--disk-state", dest="disk_state", action="append", default=[],
                   type=ident_key_val("--disk-state"))  # fmt: skip
    common.add_priority_option(p)


def add_commands(sub: object) -> None:
    """Register ``add``, ``remove`` and ``join-token`` on gnt-node's subparsers."""
    _add_add(sub)
    p = common.add_command(sub, "remove", cmd_remove, "Removes a node from the cluster")
    common.add_args(p, "node", "<node-name>", 1, 1)
    common.add_submit_options(p)
    p = common.add_command(sub, "join-token", cmd_join_token,
                           "Print a one-time token with which a new node joins")  # fmt: skip
    p.add_argument("--ttl", type=int, default=3600, metavar="SECONDS",
                   help="How long the token is valid (default 3600 s)")  # fmt: skip
    common.add_args(p, "args", "", 0, 0)
