"""The primary node's record of its guests' mirrored disks (issue 26): which
disks a QEMU command line mirrors, which I/O errors are faults of theirs, and
a master's call waiting for the next one.  The QMP side (degrading a guest) is
tests/integration/test_mirrored_guest.py, on a real QEMU."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from corral.node.hypervisor.kvm.guest_mirrors import GuestMirrors, Link, quorums
from corral.node.storage import qsd

DISK = "0b7a8f3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"


def argv() -> list[str]:
    graph = qsd.quorum_blockdev(Path("/srv/d"), "127.0.0.1", 9, DISK, "creds", "node2")
    return ["kvm", "-drive", "file=/other,if=none", "-blockdev", json.dumps(graph)]


def test_a_command_line_names_its_mirrored_disks() -> None:
    graph = json.loads(argv()[-1])
    quorum = graph["node-name"]
    assert quorum == qsd.quorum_name(DISK)
    assert quorums(argv()) == ({quorum: Link(quorum, DISK, "127.0.0.1", 9)}, set())
    assert quorums(["kvm", "-blockdev", '{"driver": "file", "node-name": "x"}']) == ({}, set())
    # Started with the secondary's copy behind: a stand-in, no link.
    alone = qsd.quorum_blockdev(Path("/srv/d"), "127.0.0.1", 9, DISK, "creds", "node2", 1 << 20)
    assert [c["driver"] for c in alone["children"]] == ["file", "null-co"]
    assert quorums(["kvm", "-blockdev", json.dumps(alone)]) == ({}, {quorum})


async def test_a_guest_started_alone_is_known_alone() -> None:
    mirrors = GuestMirrors()
    alone = qsd.quorum_blockdev(Path("/srv/d"), "127.0.0.1", 9, DISK, "creds", "node2", 1 << 20)
    mirrors.follow("vm1", ["kvm", "-blockdev", json.dumps(alone)])
    assert mirrors.alone("vm1", DISK)
    mirrors.forget("vm1")
    assert not mirrors.alone("vm1", DISK)


async def test_only_a_mirrored_disks_io_error_is_a_fault() -> None:
    mirrors = GuestMirrors()
    mirrors.follow("vm1", argv())
    quorum = next(iter(quorums(argv())[0]))
    mirrors.io_error("vm1", {"node-name": "disk1", "reason": "No space left"})
    mirrors.io_error("vm2", {"node-name": quorum, "reason": "x"})  # not a guest it knows
    assert await mirrors.faults(0) == []
    waiting = asyncio.create_task(mirrors.faults(30))
    await asyncio.sleep(0)  # the call waits for a fault
    assert not waiting.done()
    mirrors.io_error("vm1", {"node-name": quorum, "reason": "Connection reset by peer"})
    mirrors.io_error("vm1", {"node-name": quorum, "reason": "again"})  # the same fault
    [fault] = await waiting
    assert (fault.instance, fault.disk, fault.reason) == ("vm1", DISK, "Connection reset by peer")
    mirrors.forget("vm1")  # the guest is gone: its faults too
    assert await mirrors.faults(0) == []


class CannedQmp:
    """A guest's QEMU answering what it runs, as QEMU 7.2 answers (the shape
    tests/integration/test_mirrored_guest.py sees on a real one)."""

    def __init__(self, peer: bool) -> None:
        tag = qsd.quorum_name(DISK).removeprefix(qsd.QUORUM_PREFIX)
        self.nodes = [
            {"node-name": qsd.QUORUM_PREFIX + tag, "file": "json:{}"},
            {"node-name": qsd.LOCAL_PREFIX + tag, "file": "/srv/d"},
        ]
        child = qsd.NULL_PREFIX + tag
        if peer:
            child = qsd.PEER_PREFIX + tag
            self.nodes.append({"node-name": child, "file": f"nbd://127.0.0.1:9/{DISK}"})
        self.graph = {
            "nodes": [{"id": 1, "name": qsd.QUORUM_PREFIX + tag}, {"id": 2, "name": child}],
            "edges": [{"parent": 1, "child": 2, "name": "children.1"}],
        }

    async def execute(self, command: str, arguments: object = None) -> object:
        return {"query-named-block-nodes": self.nodes, "x-debug-query-block-graph": self.graph}[
            command
        ]


async def test_a_restarted_node_knows_the_links_as_qemu_has_them() -> None:
    mirrors = GuestMirrors()
    alone = qsd.quorum_blockdev(Path("/srv/d"), "127.0.0.1", 9, DISK, "creds", "node2", 1 << 20)
    # Started alone, joined since (a resync, a migration's target).
    mirrors.follow("vm1", ["kvm", "-blockdev", json.dumps(alone)])
    await mirrors.refresh("vm1", CannedQmp(peer=True))
    assert not mirrors.alone("vm1", DISK)
    assert mirrors.link("vm1", DISK) == Link(qsd.quorum_name(DISK), DISK, "127.0.0.1", 9)
    # Started linked, left alone since (a degrade).
    mirrors.follow("vm1", argv())
    await mirrors.refresh("vm1", CannedQmp(peer=False))
    assert mirrors.alone("vm1", DISK)
    mirrors.forget("vm1")
