"""The issue's whole story on a 5-node bed: 100 instances placed by the
allocator, failover, migrate and move, a node evacuated, verify clean."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import testbed
from corral.cli.common import poll_job
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.osdef import make_os

pytestmark = pytest.mark.slow

INSTANCES = 100
NODE_MEMORY_MIB = 4096
INSTANCE_MEMORY_MIB = 128


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    root: Path = tmp_path_factory.mktemp("e2e")
    # 100 instances of one vCPU on five 2-CPU nodes: a vcpu-ratio that allows it.
    running = testbed.up(root, nodes=5, init_args=PERMISSIVE_IPOLICY)
    try:
        for node in running.nodes:
            make_os(node.paths, "plain", variants=None)
            # Each fake node has 4 GiB, not the host's memory: placement by memory shows.
            node.paths.conf_dir.mkdir(parents=True, exist_ok=True)
            (node.paths.conf_dir / "fake-hypervisor-memory").write_text(f"{NODE_MEMORY_MIB}\n")
        yield running
    finally:
        running.down()


def _ok(result: Any) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return str(result.stdout)


def _create(name: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "OP_ID": "OP_INSTANCE_CREATE",
            "instance_name": name,
            "mode": "create",
            "disk_template": "diskless",
            "disks": [],
            "nics": [],
            "os_type": "plain",
            "no_install": True,
            "name_check": False,
            "ip_check": False,
            "beparams": {"maxmem": INSTANCE_MEMORY_MIB, "minmem": INSTANCE_MEMORY_MIB},
            **extra,
        }
    ]


def _primaries(bed: testbed.Testbed) -> dict[str, str]:
    out = _ok(bed.gnt("instance", "list", "--no-headers", "-o", "name,pnode"))
    return dict(line.split() for line in out.splitlines())


def test_the_allocator_spreads_100_instances(bed: testbed.Testbed) -> None:
    client = bed.client()
    submitted = client.submit_many_jobs([_create(f"i{k:03}") for k in range(INSTANCES)])
    for ok, job_id in submitted:
        assert ok, job_id
        poll_job(client, int(job_id), feedback=None)
    placed = Counter(_primaries(bed).values())
    assert sum(placed.values()) == INSTANCES
    assert set(placed) == {n.name for n in bed.nodes}
    # By free memory, one instance at a time: no node gets far more than its share.
    assert max(placed.values()) - min(placed.values()) <= 2, placed


def test_failover_migrate_move_evacuate_and_verify(bed: testbed.Testbed) -> None:
    names = [n.name for n in bed.nodes]
    before = _primaries(bed)
    one = sorted(i for i, node in before.items() if node == names[1])[0]
    _ok(bed.gnt("instance", "failover", "-f", "-n", names[2], one))
    _ok(bed.gnt("instance", "migrate", "-f", "-n", names[3], one))
    assert _primaries(bed)[one] == names[3]
    # A file disk moves node to node (the content itself: test_instance_move.py).
    _ok(
        bed.gnt(
            "instance", "add", "-t", "file", "--disk", "0:size=16m", "-o", "plain",
            "--no-install", "--no-name-check", "--no-ip-check", "-n", names[0], "withdisk",
        )
    )  # fmt: skip
    _ok(bed.gnt("instance", "move", "-f", "-n", names[1], "withdisk"))
    assert _primaries(bed)["withdisk"] == names[1]
    evacuated = names[4]
    _ok(bed.gnt("node", "evacuate", "-f", "-p", evacuated))
    after = _primaries(bed)
    assert evacuated not in after.values()
    assert len(after) == INSTANCES + 1
    _ok(bed.gnt("cluster", "verify"))
