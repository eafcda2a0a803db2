"""gnt-cluster epo: the emergency power-off of nodes (or of node groups, or of
the whole cluster), and ``--on``, the recovery, as Ganeti 3.0.2's.

Off: every instance on the nodes is shut down without the shutdown being
remembered (the instances stay marked up), then the nodes that have an
out-of-band program are powered off through it (OP_OOB_COMMAND power-off).
On: those nodes are powered on, then each instance is started as soon as
every node it lives on answers on noded's port again (nodes are waited for
up to 15 minutes).  The master is never powered off or on: it is left for
the operator, and only ``--all`` may include it.

Two deliberate differences, where Ganeti 3.0.2's code contradicts its manual:
its ``--on`` sends power-off where it means power-on (``_EpoOn`` calls
``_OobPower(..., False)``), Corral powers the nodes on; with ``--all``, it
asks to power off the master too when the master has a program (and so fails
after the instances are down), Corral leaves the master on.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

from corral import constants as C
from corral.cli import common
from corral.cli.instance_multi import confirm_operation
from corral.cli.jobexec import JobExecutor
from corral.cli.node_power import add_oob_timeout, add_power_delay
from corral.luxi.client import Client
from corral.nicesort import nice_sort

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

PING_INTERVAL = 30.0  # s between two rounds of pings to the nodes still down
PING_TIMEOUT = 1.0  # s: one ping (a TCP connection to noded's port)
REACHABLE_TIMEOUT = 15 * 60.0  # s: how long nodes are waited for
NODE_FIELDS = ["name", "master", "pinst_list", "sinst_list", "powered", "offline", "pip"]


def _instances(opts: argparse.Namespace, names: list[str], start: bool) -> bool:
    """Start or shut down (not remembered) the instances, one job each;
    whether all of them succeeded."""
    if start:
        submit, done, doing = "startup", "started", "starting"
    else:
        submit, done, doing = "shutdown", "stopped", "stopping"
    jobs = JobExecutor(common.get_client(), opts)
    for name in names:
        print(f"Submit {submit} of instance {name}")
        op: dict[str, Any]
        if start:
            op = {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": name}
        else:
            op = {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": name,
                  "timeout": opts.shutdown_timeout, "no_remember": True}  # fmt: skip
        jobs.queue_job(name, op)
    results = jobs.get_results()
    bad = sum(not ok for ok, _ in results)
    if bad:
        print(f"There were errors while {doing} instances:\n{bad} error(s) out of"
              f" {len(results)} instance(s)", file=sys.stderr)  # fmt: skip
        return False
    print(f"All instances have been {done} successfully")
    return True


def _power(opts: argparse.Namespace, nodes: list[str], on: bool) -> bool:
    """Power the nodes on or off through their program; whether all of them were."""
    op = {"OP_ID": "OP_OOB_COMMAND", "node_names": nodes,
          "command": C.OOB_POWER_ON if on else C.OOB_POWER_OFF, "ignore_status": True,
          "timeout": opts.oob_timeout, "power_delay": opts.power_delay}  # fmt: skip
    ok = True
    for (_, name), (status, _) in common.submit_or_send(opts, op):
        if status != C.RS_NORMAL:
            ok = False
            print(f"There was a problem changing power for {name}, please investigate",
                  file=sys.stderr)  # fmt: skip
    return ok


def _reachable(address: str, port: int) -> bool:
    """Whether noded's port on ``address`` accepts a connection (Ganeti's TcpPing)."""
    try:
        with socket.create_connection((address, port), timeout=PING_TIMEOUT):
            return True
    except OSError:
        return False


class _Waiter:
    """The nodes still down, and what to do each time one more is up."""

    def __init__(self, addresses: dict[str, str], port: int, on_up: Any) -> None:
        self.addresses = addresses
        self.port = port
        self.on_up = on_up  # called with the set of nodes up; False: it failed
        self.down = set(addresses)
        self.up: set[str] = set()

    def wait(self, seconds: float) -> None:
        """Ping the nodes down until one answers, or sleep the rest of ``seconds``."""
        start = time.monotonic()
        for node in nice_sort(self.down):
            if _reachable(self.addresses[node], self.port):
                print(f"Node {node} became available")
                self.up.add(node)
                self.down.discard(node)
                return
        time.sleep(max(0.0, start + seconds - time.monotonic()))

    def run(self) -> bool:
        """Ganeti's _RunWhenNodesReachable: whether every node came up and every
        action succeeded."""
        success = True
        deadline = time.monotonic() + REACHABLE_TIMEOUT
        while True:
            if not self.on_up(self.up):
                success = False
            if not self.down:
                return success
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                print("Time exceeded while waiting for nodes to become reachable again:\n"
                      f"  - {'  - '.join(self.down)}", file=sys.stderr)  # fmt: skip
                return False
            self.wait(min(PING_INTERVAL, remaining))


def _epo_on(opts: argparse.Namespace, client: Client, found: dict[str, Any]) -> int:
    if found["nodes"] and not _power(opts, found["nodes"], True):
        print("Not all nodes seem to get back up, investigate and start manually if needed",
              file=sys.stderr)  # fmt: skip
    waiting = dict(found["instances"])

    def start_ready(up: set[str]) -> bool:
        """Start the instances all of whose nodes are up."""
        ready = [name for name, nodes in waiting.items() if nodes <= up]
        for name in ready:
            del waiting[name]
        return _instances(opts, ready, True) if ready else True

    print("Waiting until all nodes are available again")
    (port,) = client.call("QueryConfigValues", ["noded_port"])
    if not _Waiter(found["addresses"], port, start_ready).run():
        print("Please investigate and start stopped instances manually", file=sys.stderr)
        return C.EXIT_FAILURE
    return C.EXIT_SUCCESS


def _epo_off(opts: argparse.Namespace, found: dict[str, Any]) -> int:
    if not _instances(opts, list(found["instances"]), False):
        print("Please investigate and stop instances manually before continuing", file=sys.stderr)
        return C.EXIT_FAILURE
    if not found["nodes"] or _power(opts, found["nodes"], False):
        return C.EXIT_SUCCESS
    return C.EXIT_FAILURE


def _survey(opts: argparse.Namespace, rows: list[list[Any]]) -> dict[str, Any] | None:
    """From the nodes' rows: the nodes to power, each instance's nodes (those
    that must be up before it starts; the master is), every node's address;
    None if the master is in the way."""
    nodes: list[str] = []
    instances: dict[str, set[str]] = {}
    for name, master, pinsts, sinsts, powered, offline, _ in rows:
        if not offline:
            for inst in pinsts + sinsts:
                if inst not in instances:
                    instances[inst] = set() if master else {name}
                elif not master:
                    instances[inst].add(name)
        if master and opts.on:
            continue  # the master runs this command: it is on
        if master and not opts.show_all:
            print(f"{name} is the master node, please do a master-failover to another node not"
                  " affected by the EPO or use --all if you intend to shutdown the whole"
                  " cluster", file=sys.stderr)  # fmt: skip
            return None
        if powered is None:
            print(f"Node {name} does not support out-of-band handling, it can not be handled"
                  " in a fully automated manner")  # fmt: skip
        elif powered == opts.on:
            print(f"Node {name} is already in desired power state, skipping")
        elif (not offline or powered) and not master:
            nodes.append(name)
    addresses = {row[0]: row[6] for row in rows}
    return {"nodes": nodes, "instances": instances, "addresses": addresses}


def cmd_epo(opts: argparse.Namespace) -> int:
    if opts.groups and opts.show_all:
        print("Only one of --groups or --all are allowed", file=sys.stderr)
        return C.EXIT_FAILURE
    if opts.args and opts.show_all:
        print("Arguments in combination with --all are not allowed", file=sys.stderr)
        return C.EXIT_FAILURE
    client = common.get_client()
    names = opts.args
    if opts.groups:
        names = [node for (members,) in client.call("QueryGroups", opts.args, ["node_list"], False)
                 for node in members]  # fmt: skip
    rows = client.call("QueryNodes", names, NODE_FIELDS, False)
    found = _survey(opts, rows)
    if found is None:
        return C.EXIT_FAILURE
    if not (opts.force or confirm_operation([row[0] for row in rows], "nodes", "epo")):
        return C.EXIT_FAILURE
    return _epo_on(opts, client, found) if opts.on else _epo_off(opts, found)


def add_command(sub: Any) -> None:
    """``epo``."""
    p = common.add_command(sub, "epo", cmd_epo, "Performs an emergency power-off on given args")
    common.add_args(p, "args", "[args]", 0, None)
    common.add_force(p)
    p.add_argument("--on", action="store_true", help="Recover from an EPO")
    p.add_argument("--groups", action="store_true",
                   help="Arguments are node groups instead of nodes")  # fmt: skip
    p.add_argument("--all", dest="show_all", action="store_true",
                   help="Show info on all instances on the cluster. This can take a long time"
                   " to run, use wisely")  # fmt: skip
    add_oob_timeout(p)
    p.add_argument("--shutdown-timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT,
                   help="Maximum time (in minutes) to wait for instance shutdown")  # fmt: skip
    add_power_delay(p)
