"""gnt-cluster master-failover: make the node it runs on the master.

Run on a master candidate of a cluster whose stores live in etcd: its
masterd, standing by (corral.master.standby), asks the master to hand the
mastership over; the master ends its work and releases the lease, this
node's masterd takes it and starts as the master.  The command returns once
this node's masterd answers as the master.  A one-node cluster (SQLite) has
no other candidate to hand over to.  ``--no-voting``, for a candidate that
survived most of the others: see corral.master.rescue.
"""

from __future__ import annotations

import argparse
import sys
import time

from corral import constants as C
from corral import errors
from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# Seconds the new master gets to start (the old one ends its running jobs first).
TAKEOVER_TIMEOUT = 120.0
POLL_INTERVAL = 0.05  # s between two looks at this node's masterd
_NO_VOTING_QUESTION = (
    "This will perform the failover even if most other nodes are down, or if this node"
    " is outdated. This is dangerous as it can lead to a non-consistent cluster. Check"
    " the gnt-cluster(8) man page before proceeding. Continue?"
)


def cmd_master_failover(opts: argparse.Namespace) -> int:
    """Hand the mastership over to this node (Ganeti's words where it has them)."""
    if opts.no_voting and not opts.yes_do_it and not common.ask_user(_NO_VOTING_QUESTION):
        return C.EXIT_FAILURE
    try:
        answer = common.get_client().call("TakeMastership", bool(opts.no_voting))
    except errors.NoMasterError as err:
        raise errors.OpPrereqError(
            "This node runs no master daemon standing by: only the master candidates of a"
            f" cluster with etcd members do ({err})",
            C.ECODE_STATE,
        ) from None
    if answer["new_master"] is None:
        print(
            "Master-failover with voting is only possible if the majority of nodes are"
            " still healthy; use the --no-voting option after ensuring by other means that"
            f" you won't end up in a dual-master scenario. Unhealthy nodes: {answer['unhealthy']}",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    for warning in answer["warnings"]:
        print(warning, file=sys.stderr)
    _wait_for_master(str(answer["new_master"]))
    return C.EXIT_SUCCESS


def _wait_for_master(name: str) -> None:
    """Until this node's masterd answers as the master ``name``."""
    deadline = time.monotonic() + TAKEOVER_TIMEOUT
    while True:
        try:
            (master,) = common.get_client().call("QueryConfigValues", ["master_node"])
            if master == name:
                return
        except (errors.GenericError, OSError):
            pass  # standing by still, or starting as the master
        if time.monotonic() > deadline:
            raise errors.OpExecError(
                f"{name} did not become the master within {TAKEOVER_TIMEOUT:g} s;"
                " see corral-masterd's log on this node and on the master"
            )
        time.sleep(POLL_INTERVAL)


def add_command(sub: Any) -> None:
    """``master-failover`` (alias ``masterfailover``)."""
    p = common.add_command(
        sub,
        "master-failover",
        cmd_master_failover,
        "Makes the current node the master",
        aliases=["masterfailover"],
    )
    p.add_argument("--no-voting", dest="no_voting", action="store_true",
                   help="Skip node agreement check (dangerous)")  # fmt: skip
    p.add_argument("--yes-do-it", dest="yes_do_it", action="store_true",
                   help="Override interactive check for --no-voting")  # fmt: skip
    p.add_argument("--ignore-offline-nodes", dest="ignore_offline_nodes", action="store_true",
                   help="Ignores offline nodes for master failover voting")  # fmt: skip
    common.add_args(p, "args", "", 0, 0)
