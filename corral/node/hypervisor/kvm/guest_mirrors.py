"""The mirrored disks of the guests running on this node (their primary).

A guest writes each mirrored disk through a QEMU ``quorum`` over its local
copy and the secondary's NBD export (:mod:`corral.node.storage.mirrored`);
a write the secondary fails fails the quorum (two votes needed), and the
guest pauses (``werror=stop``): QEMU reports ``BLOCK_IO_ERROR`` naming the
quorum.  That is a *fault* here, kept until the master has decided: it reads
the faults (:meth:`GuestMirrors.faults`, a node call that waits for one),
commits the secondary's copy as outdated, and only then has the guest go on
without it (:meth:`GuestMirrors.degrade`): a dirty bitmap on the local copy
records every write from then on (what a resync copies), a ``null-co`` child
takes the secondary's place in the quorum (its vote threshold cannot change
while it runs), the link is dropped, and the guest continues; the write that
failed is retried by QEMU then, recorded in the bitmap.

A secondary that hangs (stopped, or cut off without a reset) would hang the
guest's writes for ever: QEMU 7.2's NBD client has no time-out.  A watchdog
asks each linked secondary's export for its greeting every second; after
``WATCHDOG_MISSES`` misses in a row it closes the link's sockets (``ss -K``),
so that the writes fail and the fault takes its usual way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from corral import errors
from corral.node import qemu_process
from corral.node.hypervisor.spec import MirrorFault
from corral.node.storage import qsd

log = logging.getLogger(__name__)

# The bitmap of what the local copy got that the secondary's did not.
RESYNC_BITMAP = "corral-resync"
# The watchdog: seconds between probes, each one's time-out, misses tolerated.
WATCHDOG_PERIOD = 1.0
WATCHDOG_MISSES = 3
QUORUM_PREFIX, LOCAL_PREFIX, PEER_PREFIX = qsd.QUORUM_PREFIX, qsd.LOCAL_PREFIX, qsd.PEER_PREFIX
# The child that takes a failed secondary's place in the quorum.
NULL_PREFIX = qsd.NULL_PREFIX


class Qmp(Protocol):
    """What is used of a guest's monitor."""

    async def execute(self, command: str, arguments: Mapping[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True)
class Link:
    """A mirrored disk as a guest's command line has it."""

    quorum: str  # its quorum's node name
    disk: str  # its uuid (the export's name)
    host: str  # the secondary's export
    port: int


def quorums(argv: Sequence[str]) -> tuple[dict[str, Link], set[str]]:
    """The mirrored disks on a QEMU command line: ``{quorum node name: link}``
    of those written to both copies, and the quorums started alone (their
    secondary's copy behind, a stand-in in its place)."""
    linked, alone = {}, set()
    for option, value in itertools.pairwise(argv):
        if option != "-blockdev" or not value.startswith("{"):
            continue
        graph = json.loads(value)
        quorum = str(graph.get("node-name", ""))
        if graph.get("driver") != "quorum" or not quorum.startswith(QUORUM_PREFIX):
            continue
        drivers = {c.get("driver"): c for c in graph.get("children", [])}
        if "nbd" in drivers:
            peer = drivers["nbd"]
            server = peer["server"]
            linked[quorum] = Link(quorum, str(peer["export"]), server["host"], int(server["port"]))
        elif "null-co" in drivers:
            alone.add(quorum)
    return linked, alone


class GuestMirrors:
    """Faults and degrading of the running guests' mirrored disks."""

    def __init__(self) -> None:
        self._disks: dict[str, dict[str, Link]] = {}  # instance → {quorum: link}
        self._faults: dict[tuple[str, str], MirrorFault] = {}
        self._alone: set[tuple[str, str]] = set()  # (instance, quorum) written alone
        self._new_fault = asyncio.Event()
        self._watchdogs: dict[str, asyncio.Task[None]] = {}

    def follow(self, name: str, argv: Sequence[str]) -> None:
        """Know the mirrored disks of guest ``name`` (from its command line)
        and watch their secondaries."""
        self.forget(name)
        disks, alone = quorums(argv)
        self._alone |= {(name, quorum) for quorum in alone}
        if disks:
            self._disks[name] = disks
            self._watch(name)

    def _watch(self, name: str) -> None:
        watchdog = self._watchdogs.get(name)
        if watchdog is None or watchdog.done():
            self._watchdogs[name] = asyncio.get_running_loop().create_task(
                self._watchdog(name), name=f"mirror-watchdog-{name}"
            )

    def forget(self, name: str) -> None:
        """Guest ``name`` is gone: its disks, faults and watchdog with it."""
        self._disks.pop(name, None)
        for key in [key for key in self._faults if key[0] == name]:
            del self._faults[key]
        self._alone = {key for key in self._alone if key[0] != name}
        watchdog = self._watchdogs.pop(name, None)
        if watchdog is not None:
            watchdog.cancel()

    async def _watchdog(self, name: str) -> None:
        misses: dict[str, int] = {}
        while self._disks.get(name):
            # A probe of a frozen export takes its whole time-out: the period
            # counts from the round's start, so that misses come a second apart.
            started = time.monotonic()
            for link in list(self._disks[name].values()):
                if (name, link.quorum) in self._alone:
                    continue
                if await qsd.probe(link.host, link.port, WATCHDOG_PERIOD):
                    misses[link.disk] = 0
                    continue
                misses[link.disk] = misses.get(link.disk, 0) + 1
                if misses[link.disk] == WATCHDOG_MISSES:
                    log.warning(
                        "Instance %s: the secondary of disk %s does not answer; closing its link",
                        name,
                        link.disk,
                    )
                    await _close_link(link)
            await asyncio.sleep(max(0.0, started + WATCHDOG_PERIOD - time.monotonic()))

    async def refresh(self, name: str, qmp: Qmp) -> None:
        """Guest ``name``'s links as its QEMU has them now, not as its command
        line started them: a resync or a migration may have joined a copy
        since, a degrade left one (what noded, restarted, must know)."""
        known = [q for guest, q in self._alone if guest == name]
        known += list(self._disks.get(name, {}))
        if not known:
            return
        nodes = {
            n["node-name"]: n for n in await qmp.execute("query-named-block-nodes", {"flat": True})
        }
        for quorum in known:
            tag = quorum.removeprefix(QUORUM_PREFIX)
            peer = nodes.get(PEER_PREFIX + tag)
            address = qsd.peer_address(peer) if peer is not None else None
            if address is not None and await children(qmp, quorum, PEER_PREFIX):
                host, port, export = address
                self.linked(name, Link(quorum, export, host, port))
            else:
                self._disks.get(name, {}).pop(quorum, None)
                self._alone.add((name, quorum))

    def io_error(self, name: str, data: Mapping[str, Any]) -> None:
        """QEMU's BLOCK_IO_ERROR of guest ``name``: a fault if it names a
        mirrored disk's quorum (others are the guest's own business)."""
        link = self._disks.get(name, {}).get(str(data.get("node-name") or ""))
        if link is None or (name, link.disk) in self._faults:
            return
        disk = link.disk
        reason = str(data.get("reason") or "I/O error")
        log.warning("Instance %s: mirrored disk %s failed a write: %s", name, disk, reason)
        self._faults[(name, disk)] = MirrorFault(name, disk, reason, time.time())
        self._new_fault.set()

    async def faults(self, wait: float) -> list[MirrorFault]:
        """The faults not yet decided; waits up to ``wait`` seconds for one."""
        if not self._faults and wait > 0:
            self._new_fault.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new_fault.wait(), wait)
        return sorted(self._faults.values(), key=lambda fault: fault.since)

    def link(self, name: str, disk: str) -> Link:
        """Disk ``disk`` of guest ``name`` as its command line has it."""
        found = [link for link in self._disks.get(name, {}).values() if link.disk == disk]
        if not found:
            raise errors.OpExecError(f"Instance {name} runs no mirrored disk {disk} here")
        return found[0]

    def alone(self, name: str, disk: str) -> bool:
        """Whether the guest writes disk ``disk`` (uuid) without its secondary."""
        return (name, qsd.quorum_name(disk)) in self._alone

    def linked(self, name: str, link: Link) -> None:
        """A resync joined the secondary again (:mod:`.mirror_resync`): it is
        watched from now on."""
        self._alone.discard((name, link.quorum))
        self._disks.setdefault(name, {})[link.quorum] = link
        self._watch(name)

    async def degrade(self, name: str, disk: str, qmp: Qmp) -> None:
        """Guest ``name`` goes on without disk ``disk``'s secondary copy (see
        the module's docstring); resumed once no fault of it is left."""
        quorum = self.link(name, disk).quorum
        tag = quorum.removeprefix(QUORUM_PREFIX)
        local, null = LOCAL_PREFIX + tag, NULL_PREFIX + tag
        nodes = {
            n["node-name"]: n for n in await qmp.execute("query-named-block-nodes", {"flat": True})
        }
        if not any(b["name"] == RESYNC_BITMAP for b in nodes[local].get("dirty-bitmaps", [])):
            await qmp.execute("block-dirty-bitmap-add", {"node": local, "name": RESYNC_BITMAP})
        if null not in nodes:
            size = int(nodes[local]["image"]["virtual-size"])
            await qmp.execute(
                "blockdev-add", {"driver": "null-co", "node-name": null, "size": size}
            )
            # Added before the link goes: a quorum may not have fewer children than votes.
            await qmp.execute("x-blockdev-change", {"parent": quorum, "node": null})
        for child in await children(qmp, quorum, PEER_PREFIX):
            await qmp.execute("x-blockdev-change", {"parent": quorum, "child": child})
        if await node_exists(qmp, PEER_PREFIX + tag):
            # A link a resync added lives on outside the quorum (one of the
            # command line went with it): gone, so that the next resync can.
            await qmp.execute("blockdev-del", {"node-name": PEER_PREFIX + tag})
        self._alone.add((name, quorum))  # no link left to watch
        self._faults.pop((name, disk), None)
        if any(key[0] == name for key in self._faults):
            return  # another disk of the guest waits for the master still
        status = await qmp.execute("query-status")
        if status.get("status") == "io-error":
            await qmp.execute("cont")
        log.info("Instance %s goes on without the secondary copy of disk %s", name, disk)


async def _close_link(link: Link) -> None:
    """Close every socket of this node to the link's export (QEMU's among them)."""
    argv = ["ss", "-K", "dst", link.host, "dport", "=", f":{link.port}"]
    code, out = await qemu_process.output(argv)
    if code != 0:
        log.error("Cannot close the link to %s:%s: %s", link.host, link.port, out.strip())


async def node_exists(qmp: Qmp, name: str) -> bool:
    """Whether a block node of that name is there."""
    nodes = await qmp.execute("query-named-block-nodes", {"flat": True})
    return any(node["node-name"] == name for node in nodes)


async def children(qmp: Qmp, quorum: str, prefix: str) -> list[str]:
    """The names (``children.N``) under which ``quorum`` holds nodes named ``prefix...``."""
    graph = await qmp.execute("x-debug-query-block-graph")
    names = {node["id"]: node.get("name", "") for node in graph["nodes"]}
    parent = next(i for i, n in names.items() if n == quorum)
    return [
        edge["name"]
        for edge in graph["edges"]
        if edge["parent"] == parent and names.get(edge["child"], "").startswith(prefix)
    ]
