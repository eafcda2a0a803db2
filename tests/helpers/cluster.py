"""Whole test clusters in temporary roots: real daemons, real commands.

Typical use::

    with running_cluster(tmp_path) as cl:
        out = cl.gnt("job", "list")          # runs gnt-job in a subprocess
        assert out.rc == 0
        client = cl.client()                 # a luxi client on masterd's socket
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from corral.luxi.client import Client
from corral.paths import ROOT_ENV, Paths
from corral.process.daemons import stop_daemon
from tests.helpers.noded import REPO_ROOT, free_port

# Test clusters allow any instance size and number, so that tests about other
# things can use small disks, no NICs and many instances on one node; Ganeti's
# default policy (a disk of 1 GiB at least, one NIC at least...) applies when
# ``init`` is given any policy option.
PERMISSIVE_IPOLICY = (
    "--ipolicy-bounds-specs",
    "min:cpu-count=0,disk-count=0,disk-size=0,memory-size=0,nic-count=0,spindle-use=0"
    "/max:cpu-count=1024,disk-count=16,disk-size=1073741824,memory-size=1073741824,"
    "nic-count=32,spindle-use=1024",
    # Many one-vCPU instances on one small node: the allocator would refuse them.
    "--ipolicy-vcpu-ratio",
    "1024",
)


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str


def unique_loopback() -> str:
    """A 127.x.y.z address that is unlikely to be used by another test run."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"


RAPI_PORT = 5080


@dataclass
class TestCluster:
    """A cluster (or an empty root) under ``paths.root``."""

    __test__: ClassVar[bool] = False  # not a test class, despite the name

    paths: Paths
    node_ip: str
    port: int
    cluster_name: str = "cluster.example.com"
    node_name: str = "node1.example.com"

    @property
    def env(self) -> dict[str, str]:
        python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        return {**os.environ, ROOT_ENV: str(self.paths.root), "PYTHONPATH": python_path}

    def gnt(
        self, command: str, *args: str, stdin: str | None = None, timeout: float = 120
    ) -> Result:
        """Run ``gnt-<command> args...`` in this root and capture its output."""
        module = f"corral.cli.gnt_{command}"
        proc = subprocess.run(
            [sys.executable, "-m", module, *args],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def init(self, *extra: str) -> Result:
        """``gnt-cluster init`` with ``extra`` options (see PERMISSIVE_IPOLICY)."""
        if not any(arg.startswith(("--ipolicy-", "--specs-")) for arg in extra):
            extra = (*PERMISSIVE_IPOLICY, *extra)
        return self.gnt(
            "cluster",
            "init",
            "--node-name",
            self.node_name,
            "--node-ip",
            self.node_ip,
            "--noded-port",
            str(self.port),
            *extra,
            self.cluster_name,
        )

    def client(self) -> Client:
        return Client(self.paths.master_socket, timeout=120)

    # corral-rapi: on the node's address, port 5080 (gnt-cluster init starts it).
    @property
    def rapi_url(self) -> str:
        return f"https://{self.node_ip}:{RAPI_PORT}"

    @property
    def rapi_ca(self) -> Path:
        """The RAPI's self-signed certificate, which clients trust as their CA."""
        return self.paths.rapi_pem

    def add_rapi_user(self, name: str, password: str, *rights: str) -> None:
        """Add a line to the RAPI users file (which corral-rapi re-reads)."""
        users = self.paths.rapi_users_file
        users.parent.mkdir(parents=True, exist_ok=True)
        with users.open("a") as out:
            out.write(f"{name} {{cleartext}}{password} {','.join(rights)}\n")

    def stop(self) -> None:
        """Stop the daemons (whatever state the cluster is in)."""
        stop_daemon(self.paths, "corral-rapi")
        stop_daemon(self.paths, "corral-masterd")
        stop_daemon(self.paths, "corral-noded")
        stop_daemon(self.paths, "corral-metad")

    def hook(self, hpath: str, phase: str, name: str, script: str) -> Path:
        """Install an executable hook script."""
        directory = self.paths.hooks_dir / f"{hpath}-{phase}.d"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.write_text(script)
        path.chmod(0o755)
        return path


def new_root(tmp_path: Path) -> TestCluster:
    """An empty root with a free address and port, not yet a cluster."""
    root = tmp_path / "root"
    root.mkdir(parents=True, exist_ok=True)
    address = unique_loopback()
    return TestCluster(Paths(root.absolute()), address, free_port(address))


@contextmanager
def running_cluster(tmp_path: Path, *init_args: str) -> Iterator[TestCluster]:
    """A freshly initialised single-node cluster, stopped afterwards."""
    cl = new_root(tmp_path)
    result = cl.init(*init_args)
    try:
        if result.rc != 0:
            raise AssertionError(f"gnt-cluster init failed: {result.stderr}")
        yield cl
    finally:
        cl.stop()
