"""A cluster of real nodes for the export tests, and ways to drive its jobs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from corral.paths import Paths
from tests.helpers.cluster import TestCluster
from tests.helpers.jobs import wait_final
from tests.helpers.noded import Noded

NODE1, NODE2 = "node1.example.com", "node2.example.com"


class Bed:
    """The cluster (master on node1) and the nodes' daemons by name."""

    def __init__(self, cl: TestCluster, extra: list[Noded]) -> None:
        self.cl = cl
        self.nodes = {NODE1: Noded(cl.paths, cl.node_ip, cl.port, NODE1, master=cl.paths)}
        self.nodes.update({n.name: n for n in extra})

    def paths(self, node: str) -> Paths:
        return self.nodes[node].paths

    def disk_files(self, node: str, name: str) -> list[Path]:
        """The instance's disk files on ``node``, disk 0 first."""
        directory = self.paths(node).file_storage_dir / name
        return sorted(directory.glob("*.disk*"), key=lambda p: int(p.name.rsplit("disk", 1)[1]))

    def hv_state(self, node: str, name: str) -> str | None:
        """The fake hypervisor's state of the instance on ``node`` (None: not there)."""
        path = self.paths(node).run_dir / "fake-hypervisor" / name
        return str(json.loads(path.read_text())["state"]) if path.exists() else None


def fill_disks(bed: Bed, name: str, node: str = NODE1) -> list[bytes]:
    """Random content (with a hole) over each of the instance's disks; the contents."""
    contents = []
    for path in bed.disk_files(node, name):
        size = path.stat().st_size
        half, quarter = size // 2, size // 4
        data = os.urandom(half) + bytes(quarter) + os.urandom(size - half - quarter)
        path.write_bytes(data)
        contents.append(data)
    return contents


def export_op(name: str, target: Any, **fields: Any) -> dict[str, Any]:
    """OP_BACKUP_EXPORT of ``name`` to ``target`` (mode local unless ``fields`` say)."""
    return {"OP_ID": "OP_BACKUP_EXPORT", "instance_name": name, "target_node": target, **fields}


def submit(bed: Bed, op: dict[str, Any]) -> int:
    with bed.cl.client() as client:
        return client.submit_job([op])


def run_job(
    bed: Bed, op: dict[str, Any], status: str = "success", timeout: float = 120
) -> tuple[int, Any]:
    """Run a one-opcode job to its end; its id and its opcode's result (or error)."""
    job_id = submit(bed, op)
    with bed.cl.client() as client:
        got, results = wait_final(client, [job_id], ("opresult",), timeout=timeout)[0]
    assert got == status, (got, results, job_log(bed, job_id))
    return job_id, results[0]


def job_log(bed: Bed, job_id: int) -> list[str]:
    with bed.cl.client() as client:
        (row,) = client.query_jobs([job_id], ["oplog"])
    return [str(entry[3]) for op in row[0] for entry in op]
