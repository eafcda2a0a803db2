"""An N-node cluster on one machine, for tests, benchmarks and the demo.

Node K runs under ``<root>/nodeK`` on its own address ``127.A.B.K`` (one /24
of the loopback network picked at random, the same port on every node).
Node 1 is the master (``gnt-cluster init``); the others start corral-noded
without a cluster, each with a one-time join token, and join through
OP_NODE_ADD (what ``gnt-node add`` submits), all jobs submitted at once::

    bed = testbed.up(Path("/tmp/bed"), nodes=5)
    try:
        bed.gnt("node", "list")
    finally:
        bed.down()

or ``python -m corral.testbed up --nodes 5 --root DIR`` / ``down --root DIR``.

``network`` puts the nodes elsewhere than on loopback: anything with
``address(k)`` and ``wrap(k, argv)`` (node K's address, and a command run on
node K), e.g. one network namespace per node (``tests/helpers/netns.py``).
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import corral
from corral import constants as C
from corral.cli.common import poll_job
from corral.luxi.client import Client
from corral.paths import ROOT_ENV, Paths
from corral.process.daemons import start_daemon, stop_daemon

REPO_ROOT = Path(corral.__file__).resolve().parent.parent
DAEMONS = ("corral-rapi", "corral-masterd", "corral-noded", "corral-metad")
CLUSTER_NAME = "cluster.example.com"
MAX_NODES = 250
Wrap = Callable[[list[str]], list[str]]
# Parallel start-ups of noded (each imports aiohttp and cryptography).
_STARTERS = 8


def node_name(index: int) -> str:
    return f"node{index}.example.com"


class Network(Protocol):
    """Where the nodes of a bed live."""

    def address(self, node: int) -> str:
        """Node ``node``'s address (nodes are numbered from 1)."""
        ...

    def wrap(self, node: int, argv: list[str]) -> list[str]:
        """``argv`` as run on node ``node``."""
        ...


@dataclass(frozen=True)
class Loopback:
    """Nodes on ``<prefix>.K`` of the loopback network, all in this network stack."""

    prefix: str

    def address(self, node: int) -> str:
        return f"{self.prefix}.{node}"

    def wrap(self, node: int, argv: list[str]) -> list[str]:
        return argv


@dataclass
class BedNode:
    """One node of the bed: its number, name, address and root."""

    index: int
    name: str
    address: str
    paths: Paths


@dataclass
class Testbed:
    """A running bed: ``nodes[0]`` is the master."""

    root: Path
    port: int
    network: Network
    nodes: list[BedNode] = field(default_factory=list)

    @property
    def master(self) -> BedNode:
        return self.nodes[0]

    def env(self, node: BedNode | None = None) -> dict[str, str]:
        """The environment of a command on ``node`` (default: the master)."""
        return daemon_env((node or self.master).paths)

    def gnt(
        self, command: str, *args: str, node: BedNode | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``gnt-<command> args`` on ``node`` (default: the master)."""
        argv = [sys.executable, "-m", f"corral.cli.gnt_{command}", *args]
        return subprocess.run(
            self.network.wrap((node or self.master).index, argv),
            env={**os.environ, **self.env(node)},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def client(self) -> Client:
        """A luxi client on the master's socket."""
        return Client(self.master.paths.master_socket, timeout=120)

    def node(self, name: str) -> BedNode:
        return next(n for n in self.nodes if n.name == name)

    def add_nodes(self, count: int) -> list[BedNode]:
        """Start ``count`` more nodes and join them; the new ones."""
        first = len(self.nodes) + 1
        if first + count - 1 > MAX_NODES:
            raise ValueError(f"At most {MAX_NODES} nodes on one bed")
        new = [
            BedNode(k, node_name(k), self.network.address(k), Paths(self.root / f"node{k}"))
            for k in range(first, first + count)
        ]
        tokens = [make_token(self.master.paths) for _ in new]

        def start(node: BedNode, token: str) -> None:
            start_joining(
                node.paths,
                node.address,
                self.port,
                token,
                functools.partial(self.network.wrap, node.index),
            )

        with ThreadPoolExecutor(_STARTERS) as pool:
            list(pool.map(start, new, tokens))
        self.nodes += new
        join(self.client(), [(n.name, n.address) for n in new])
        return new

    def down(self) -> None:
        """Stop every daemon of the bed."""
        down(self.root)


def daemon_env(paths: Paths) -> dict[str, str]:
    """The environment for Corral's daemons and commands on ``paths``."""
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {ROOT_ENV: str(paths.root), "PYTHONPATH": python_path}


def make_token(master: Paths, ttl: int = 3600) -> str:
    """A join token of the cluster whose master runs on ``master``."""
    with Client(master.master_socket) as client:
        token: str = client.call("CreateJoinToken", ttl)
    return token


def start_joining(
    paths: Paths, address: str, port: int, token: str | None, wrap: Wrap = lambda argv: argv
) -> None:
    """Start corral-noded without a cluster on ``paths``, waiting to join with
    ``token``; ``wrap(argv)`` runs it elsewhere (see :class:`Network`).  The
    token goes through a 0600 file, never the command line (``ps`` shows that)."""
    paths.root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "corral.daemons.noded", "-b", address, "-p", str(port)]
    if not token:
        start_daemon(wrap(cmd), daemon_env(paths), timeout=60)
        return
    fd, name = tempfile.mkstemp(dir=paths.root, prefix=".join-token-")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        start_daemon(wrap([*cmd, "--join-token-file", name]), daemon_env(paths), timeout=60)
    finally:
        os.unlink(name)


def join(client: Client, nodes: Sequence[tuple[str, str]], **fields: object) -> None:
    """OP_NODE_ADD for each ``(name, address)``, submitted at once; raise on a failure."""
    jobs = [
        [{"OP_ID": "OP_NODE_ADD", "node_name": name, "primary_ip": address, **fields}]
        for name, address in nodes
    ]
    submitted = client.submit_many_jobs(jobs)
    for ok, job_id in submitted:
        if not ok:
            raise RuntimeError(f"Cannot submit OP_NODE_ADD: {job_id}")
    for _, job_id in submitted:
        poll_job(client, int(job_id), feedback=None)


def _free_prefix(port: int | None) -> tuple[str, int]:
    """A 127.A.B prefix whose .1 address is free on ``port`` (chosen if None)."""
    for _ in range(100):
        prefix = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((f"{prefix}.1", port or 0))
            except OSError:
                continue
            return prefix, int(sock.getsockname()[1])
    raise RuntimeError("No free loopback address for a test bed")


def up(
    root: Path,
    nodes: int = 3,
    *,
    port: int | None = None,
    init_args: Sequence[str] = (),
    network: Network | None = None,
) -> Testbed:
    """Start a bed of ``nodes`` nodes under ``root`` (on loopback unless
    ``network`` says otherwise); on failure nothing keeps running."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"A bed has 1 to {MAX_NODES} nodes, not {nodes}")
    root = root.absolute()
    if network is None:
        prefix, port = _free_prefix(port)
        network = Loopback(prefix)
    master = BedNode(1, node_name(1), network.address(1), Paths(root / "node1"))
    # Each node has a network stack of its own: the default port is free on all.
    bed = Testbed(root, port or C.DEFAULT_NODED_PORT, network, [master])
    master.paths.root.mkdir(parents=True, exist_ok=True)
    try:
        init = bed.gnt(
            "cluster", "init", "--node-name", master.name, "--node-ip", master.address,
            "--noded-port", str(bed.port), *init_args, CLUSTER_NAME,
        )  # fmt: skip
        if init.returncode != 0:
            raise RuntimeError(f"gnt-cluster init failed: {init.stderr.strip()}")
        if nodes > 1:
            bed.add_nodes(nodes - 1)
    except BaseException:
        bed.down()
        raise
    return bed


def down(root: Path) -> None:
    """Stop the daemons of every node root under ``root``."""
    for node_root in sorted(Path(root).absolute().glob("node*")):
        paths = Paths(node_root)
        for daemon in DAEMONS:
            stop_daemon(paths, daemon)


def main(argv: list[str] | None = None) -> int:
    """``python -m corral.testbed up --nodes N --root DIR`` or ``down --root DIR``."""
    parser = argparse.ArgumentParser(prog="python -m corral.testbed", description=__doc__)
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--root", required=True, type=Path, help="directory of the node roots")
    parser.add_argument("--nodes", type=int, default=3, help="how many nodes (up)")
    parser.add_argument("--port", type=int, help="noded port (default: a free one)")
    opts = parser.parse_args(argv)
    if opts.action == "down":
        down(opts.root)
        return C.EXIT_SUCCESS
    bed = up(opts.root, opts.nodes, port=opts.port)
    for node in bed.nodes:
        print(f"{node.name} {node.address}:{bed.port} CORRAL_ROOT={node.paths.root}")
    return C.EXIT_SUCCESS


if __name__ == "__main__":
    sys.exit(main())
