"""A master in this process: masterd's parts, nodes served in-process.

The configuration, the durable state and the job queue (SQLite in the
master's root behind relays, unfenced unless asked: no mastership lease),
the lock manager and the
processor are masterd's own, assembled as :func:`corral.master.daemon.serve`
assembles them; the RPC client calls its
nodes through a :class:`corral.node.local.LocalTransport`, which runs the
real node handlers on each node's root.  No daemon, no socket: opcodes go
through the real logical units in milliseconds.

Typical use::

    async with in_process_cluster(tmp_path, nodes=2) as cl:
        job = await cl.run({"OP_ID": "OP_INSTANCE_CREATE", ...})
        assert job.status == "success", job.error
        cl.node(2).reachable = False          # node2 stops answering
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import ipolicy as IP
from corral import testbed
from corral.bootstrap import InitOptions, create_cluster
from corral.cmdlib.processor import Processor
from corral.config.manager import ConfigManager
from corral.jobs.queue import JobQueue
from corral.locking import LockManager
from corral.master import resources
from corral.master.daemon import SHUTDOWN_GRACE
from corral.node.join_protocol import pem_fingerprint
from corral.node.join_server import save_token
from corral.node.local import LocalNode, LocalTransport
from corral.node.storage.file import REMOVING
from corral.objects import Instance, Node
from corral.paths import Paths
from corral.rpc.client import RpcClient
from corral.services import durable_flags, join_tokens
from corral.services.config_export import ConfigExport
from corral.services.context import Master
from corral.services.distribution import SsconfDistributor
from corral.services.durable import DurableState
from corral.services.mastership import MastershipKeeper
from corral.services.ssconf import MasterSsconf, SsconfWriter
from corral.state.backend import sqlite_backend
from corral.state.ports import NO_FENCE
from corral.state.relay import Relays
from tests.helpers.osdef import make_os

CLUSTER_NAME = "cluster.example.com"
# As the test clusters' (tests/helpers/cluster.py): any instance size and number.
PERMISSIVE_IPOLICY = {
    IP.ISPECS_MINMAX: [
        {
            IP.ISPECS_MIN: dict.fromkeys(IP.ISPECS_MINMAX_DEFAULTS[IP.ISPECS_MIN], 0),
            IP.ISPECS_MAX: dict.fromkeys(IP.ISPECS_MINMAX_DEFAULTS[IP.ISPECS_MAX], 1 << 30),
        }
    ],
    IP.IPOLICY_VCPU_RATIO: 1024.0,
}
# The OS every node has (no variants): its scripts succeed.
OS_NAME = "plain"
# Seconds a job of these tests may take (they take milliseconds).
JOB_TIMEOUT = 30.0


# The in-process nodes' addresses: only keys of the transport, unless a
# mirrored disk's export listens on one (then give each cluster its own /24).
DEFAULT_NET = "127.0.99"


def node_address(index: int, net: str = DEFAULT_NET) -> str:
    """Node ``index``'s address."""
    return f"{net}.{index}"


@dataclass
class JobOutcome:
    """A finished job: its status, opcode result or error, and its log messages."""

    job_id: int
    status: str
    result: Any
    log: list[str]

    @property
    def error(self) -> str:
        """The error message of a failed job ('' if it succeeded)."""
        if self.status == C.JOB_STATUS_SUCCESS:
            return ""
        _, args = self.result
        return str(args[0]) if args else ""


class InProcessCluster:
    """masterd's parts on node 1's root, and the nodes of the transport
    (made by :meth:`start`)."""

    cfg: ConfigManager
    durable: DurableState
    queue: JobQueue
    master: Master
    distributor: SsconfDistributor
    export: ConfigExport
    ssconf: MasterSsconf

    def __init__(self, root: Path, fenced: bool = False, net: str = DEFAULT_NET) -> None:
        self.root = root
        self.fenced = fenced
        self.net = net
        self.paths = Paths(root / "node1")
        self.transport = LocalTransport()
        create_cluster(
            self.paths,
            InitOptions(
                cluster_name=CLUSTER_NAME,
                node_name=testbed.node_name(1),
                node_ip=node_address(1, net),
                master_ip=node_address(1, net),
                ipolicy=PERMISSIVE_IPOLICY,
            ),
        )
        self._serve(1, self.paths)
        self.rpc = RpcClient(self.transport)
        self.backend = sqlite_backend(self.paths)
        self.relays = Relays(self.backend.stores)
        self.keeper = MastershipKeeper(self.backend.mastership, testbed.node_name(1))
        self.store = self.relays.jobs
        self.locks = LockManager()

    async def start(self) -> None:
        """Open the configuration and the durable state, start the queue."""
        fence = (await self.keeper.acquire()).token if self.fenced else NO_FENCE
        self.cfg = await ConfigManager.open(self.relays.config)
        self.cfg.fence = fence
        self.ssconf = MasterSsconf(self.cfg, SsconfWriter(self.paths))
        await self.ssconf.start()
        self.cfg.add_listener(self.ssconf.changed)
        self.durable = await DurableState.open(self.relays.kv, fence)
        processor = Processor()
        self.queue = JobQueue(
            self.store,
            processor,
            lambda: self.cfg.cluster.max_running_jobs,
            self.locks.set_priority,
            self.cfg.filter_rules(),
            drained=lambda: durable_flags.drained(self.durable),
        )
        self.queue.fence = fence
        self.master = Master(
            paths=self.paths,
            cfg=self.cfg,
            durable=self.durable,
            rpc=self.rpc,
            locks=self.locks,
            queue=self.queue,
            query=lambda what, fields, qfilter: resources.query(self.master, what, fields, qfilter),
            ssconf=self.ssconf,
            backend=self.backend,
            relays=self.relays,
            keeper=self.keeper if self.fenced else None,
        )
        processor.bind(self.master)
        self.distributor = SsconfDistributor(self.master)
        self.cfg.add_listener(self.distributor.changed)
        self.export = self.master.config_export = ConfigExport(self.master)
        await self.export.start()
        self.cfg.add_listener(self.export.changed)
        await self.queue.recover()
        self.queue.start()

    def _serve(self, index: int, paths: Paths) -> LocalNode:
        make_os(paths, OS_NAME, variants=None)
        return self.transport.add(paths, node_address(index, self.net))

    def node(self, index: int) -> LocalNode:
        """Node ``index`` as the transport serves it."""
        return self.transport.nodes[node_address(index, self.net)]

    def config_node(self, index: int) -> Node:
        return self.cfg.lookup(Node, testbed.node_name(index))

    def disk_files(self, index: int) -> list[str]:
        """The disk files in node ``index``'s file storage directory (those
        being freed after a removal are gone already). ``os.walk`` skips a
        directory the master's background settlement removes while it looks;
        ``rglob`` would raise."""
        top = self.node(index).paths.file_storage_dir
        return sorted(
            os.path.relpath(os.path.join(directory, name), top)
            for directory, _, names in os.walk(top)
            for name in names
            if not name.startswith(REMOVING)
        )

    def running(self, index: int) -> list[str]:
        """The instances node ``index``'s fake hypervisor runs."""
        state = self.node(index).paths.run_dir / "fake-hypervisor"
        return sorted(path.name for path in state.glob("*") if path.is_file())

    def instance(self, name: str) -> Instance | None:
        """The instance as committed now (None if there is none)."""
        return self.cfg.find(Instance, name)

    async def joining_node(self, index: int) -> LocalNode:
        """Node ``index``'s root, waiting to join with a token of this cluster."""
        paths = Paths(self.root / f"node{index}")
        paths.root.mkdir(parents=True)
        fingerprint = pem_fingerprint(self.paths.ca_cert.read_bytes())
        save_token(paths, await join_tokens.create(self.durable, fingerprint))
        return self._serve(index, paths)

    async def add_node(self, index: int, **fields: Any) -> JobOutcome:
        """OP_NODE_ADD of node ``index`` (made to wait for it first)."""
        await self.joining_node(index)
        return await self.run(
            {
                "OP_ID": "OP_NODE_ADD",
                "node_name": testbed.node_name(index),
                "primary_ip": node_address(index, self.net),
                **fields,
            }
        )

    async def run(self, *ops: dict[str, Any]) -> JobOutcome:
        """Submit one job of ``ops`` and wait until it is finished."""
        job_id = await self.queue.submit(list(ops))
        return await self.wait(job_id)

    async def wait(self, job_id: int) -> JobOutcome:
        """Wait (WaitForJobChange, as clients do) until job ``job_id`` is finished."""
        fields = ["status", "opresult", "oplog"]
        info: Any = None
        serial = 0
        async with asyncio.timeout(JOB_TIMEOUT):
            while info is None or info[0] not in C.JOB_STATUS_FINALIZED:
                change = await self.queue.queries.wait_for_change(
                    job_id, fields, info, serial, 10.0
                )
                if change != "nochange":
                    info = change[0]
                    serial = max([serial, *(entry[0] for entry in change[1])])
        status, results, logs = info
        messages = [str(entry[3]) for op_log in logs for entry in op_log]
        return JobOutcome(job_id, status, results[-1], messages)

    async def close(self) -> None:
        """Stop as masterd stops (what :meth:`start` made only)."""
        if hasattr(self, "master"):
            await self.queue.shutdown(SHUTDOWN_GRACE)
            await self.distributor.stop()
            await self.export.stop()
            await self.ssconf.stop()
        await self.rpc.close()
        await self.store.close()
        if hasattr(self, "cfg"):
            await self.cfg.close()
        if hasattr(self, "durable"):
            await self.durable.close()
        await self.keeper.release()
        moved = self.master.backend if hasattr(self, "master") else None  # the one in force
        await (moved or self.backend).close_rest()


@asynccontextmanager
async def in_process_cluster(
    root: Path, nodes: int = 1, fenced: bool = False, net: str = DEFAULT_NET
) -> AsyncIterator[InProcessCluster]:
    """A cluster of ``nodes`` nodes (the others joined through OP_NODE_ADD);
    ``fenced``: its master holds the mastership, as masterd does; ``net``:
    the /24 of its nodes' addresses."""
    cluster = InProcessCluster(root, fenced, net)
    try:
        await cluster.start()
        for index in range(2, nodes + 1):
            job = await cluster.add_node(index)
            assert job.status == C.JOB_STATUS_SUCCESS, job.error
        yield cluster
    finally:
        await cluster.close()


def create_op(name: str, node: str, template: str, disks: list[dict[str, Any]]) -> dict[str, Any]:
    """OP_INSTANCE_CREATE of a stopped instance of the OS ``OS_NAME`` on ``node``,
    without NICs and name checks."""
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": template,
        "disks": disks,
        "nics": [],
        "os_type": OS_NAME,
        "pnode": node,
        "name_check": False,
        "ip_check": False,
        "start": False,
    }
