"""Bringing a mirrored disk's secondary copy up to date under a running guest.

The guest writes its local copy alone (:mod:`.guest_mirrors`), a dirty
bitmap recording every write since its secondary was left behind.  Once the
secondary exports its copy again, the primary's QEMU copies what the bitmap
names to it (``blockdev-backup``, ``sync=incremental``: what was dirty when
the round began; writes meanwhile stay dirty for the next round), round after
round while the guest runs, until little is left; then the guest is paused
for the last round, the secondary takes its place in the quorum again (the
``null-co`` child goes), and the guest continues: from then on every write
reaches both copies.  Without the bitmap (the guest was restarted since), a
full copy comes first, a new bitmap recording the writes it races with.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from corral import errors
from corral.node.hypervisor.kvm.guest_mirrors import (
    LOCAL_PREFIX,
    NULL_PREFIX,
    PEER_PREFIX,
    QUORUM_PREFIX,
    RESYNC_BITMAP,
    Link,
    Qmp,
    children,
    node_exists,
)
from corral.node.storage import qsd

# The guest pauses for the last round once at most this much is left to copy.
LAST_ROUND_BYTES = 8 * 1024 * 1024
# Rounds while the guest runs before it is paused anyway (it writes faster
# than the link copies).
MAX_ROUNDS = 20
# A round's job is looked at after 2 ms, then twice as long each time up to
# 50 ms: a small round (the last one, the guest paused) ends in a few ms.
_POLL_FIRST, _POLL = 0.002, 0.05
# Told of the progress: bytes copied, bytes in all (so far).
Progress = Callable[[int, int], None]


async def resync(
    qmp: Qmp, link: Link, peer_name: str, progress: Progress, full: bool = False
) -> None:
    """Copy to the secondary what it missed (all of it when ``full``: a new
    copy) and join it to the quorum again."""
    tag = link.quorum.removeprefix(QUORUM_PREFIX)
    local, peer = LOCAL_PREFIX + tag, PEER_PREFIX + tag
    await _add_peer(qmp, link, peer_name)
    try:
        if full and await _dirty(qmp, local) is not None:
            await qmp.execute("block-dirty-bitmap-remove", {"node": local, "name": RESYNC_BITMAP})
        await _copy(qmp, tag, local, peer, progress)
    except BaseException:
        await _drop(qmp, peer)
        raise


async def join(qmp: Qmp, link: Link, peer_name: str) -> None:
    """Join a secondary whose copy is known to be current to the quorum of a
    guest that has not written since it was left out (a migrated guest
    before it runs on its new node: the copy is the source's)."""
    tag = link.quorum.removeprefix(QUORUM_PREFIX)
    await _add_peer(qmp, link, peer_name)
    try:
        await _take_in(qmp, tag)
    except BaseException:
        await _drop(qmp, PEER_PREFIX + tag)
        raise


async def _add_peer(qmp: Qmp, link: Link, peer_name: str) -> None:
    """The link to the secondary's export, outside the quorum so far."""
    node = {
        "driver": "nbd",
        "node-name": PEER_PREFIX + link.quorum.removeprefix(QUORUM_PREFIX),
        "server": {"type": "inet", "host": link.host, "port": str(link.port)},
        "export": link.disk,
        "tls-creds": qsd.CREDS_ID,
        "tls-hostname": peer_name,
    }
    await qmp.execute("blockdev-add", node)


async def _take_in(qmp: Qmp, tag: str) -> None:
    """The link takes the stand-in's place in the quorum."""
    quorum = QUORUM_PREFIX + tag
    await qmp.execute("x-blockdev-change", {"parent": quorum, "node": PEER_PREFIX + tag})
    for child in await children(qmp, quorum, NULL_PREFIX):
        await qmp.execute("x-blockdev-change", {"parent": quorum, "child": child})
    if await node_exists(qmp, NULL_PREFIX + tag):
        # Added by a degrade; one of the command line (started alone) went
        # with its parent's link.
        await qmp.execute("blockdev-del", {"node-name": NULL_PREFIX + tag})


async def _copy(qmp: Qmp, tag: str, local: str, peer: str, progress: Progress) -> None:
    copied = 0
    if await _dirty(qmp, local) is None:  # no record of what it missed: all of it
        await qmp.execute("block-dirty-bitmap-add", {"node": local, "name": RESYNC_BITMAP})
        copied += await _round(qmp, tag, local, peer, "full", progress, copied)
    for _ in range(MAX_ROUNDS):
        left = await _dirty(qmp, local) or 0
        if left <= LAST_ROUND_BYTES:
            break
        copied += await _round(qmp, tag, local, peer, "incremental", progress, copied)
    running = (await qmp.execute("query-status"))["status"] == "running"
    if running:
        await qmp.execute("stop")
    try:
        copied += await _round(qmp, tag, local, peer, "incremental", progress, copied)
        await _take_in(qmp, tag)
        await qmp.execute("block-dirty-bitmap-remove", {"node": local, "name": RESYNC_BITMAP})
    finally:
        if running:
            await qmp.execute("cont")


async def _round(
    qmp: Qmp, tag: str, local: str, peer: str, sync: str, progress: Progress, before: int
) -> int:
    """One backup job from the local copy to the secondary's; the bytes it copied."""
    job = f"resync-{tag}"
    arguments: dict[str, Any] = {
        "job-id": job,
        "device": local,
        "target": peer,
        "sync": sync,
        "auto-dismiss": False,
    }
    if sync == "incremental":
        arguments["bitmap"] = RESYNC_BITMAP
    await qmp.execute("blockdev-backup", arguments)
    poll = _POLL_FIRST
    try:
        while True:
            [state] = [j for j in await qmp.execute("query-jobs") if j["id"] == job]
            done, total = int(state["current-progress"]), int(state["total-progress"])
            progress(before + done, before + total)
            if state["status"] == "concluded":
                await qmp.execute("job-dismiss", {"id": job})
                if state.get("error"):
                    raise errors.OpExecError(f"The resync failed: {state['error']}")
                return done
            await asyncio.sleep(poll)
            poll = min(2 * poll, _POLL)
    except asyncio.CancelledError:
        with contextlib.suppress(errors.OpExecError):
            await qmp.execute("job-cancel", {"id": job, "force": True})
        raise


async def _dirty(qmp: Qmp, local: str) -> int | None:
    """The bytes the resync bitmap names (None: there is no bitmap)."""
    for node in await qmp.execute("query-named-block-nodes", {"flat": True}):
        if node["node-name"] == local:
            for bitmap in node.get("dirty-bitmaps", []):
                if bitmap["name"] == RESYNC_BITMAP:
                    return int(bitmap["count"])
    return None


async def _drop(qmp: Qmp, peer: str) -> None:
    """Remove the secondary's node a failed resync left outside the quorum."""
    with contextlib.suppress(errors.OpExecError):  # in the quorum already, or gone
        await qmp.execute("blockdev-del", {"node-name": peer})
