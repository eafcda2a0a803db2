"""noded's side of the network rules: which guests' uids are ruled, applied
as guests start and stop, restored at noded's start, checked by verify.

The table is rewritten whole in one nft transaction at every change (its
content follows from :class:`NetRules`' state alone, so applying is
idempotent); it is removed once no guest needs it.  A uid stays ruled while
one guest running under it does (several guests share the kvm security user).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from corral import errors
from corral.node.netrules import nft
from corral.node.netrules.destinations import blocked
from corral.node.netrules.policy import GUEST_CHAIN, RULES, UIDS_SET, Link, State, render
from corral.paths import Paths

log = logging.getLogger(__name__)


class NetRules:
    """The rules of one node's guests (instance name → the uid QEMU runs as)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.table = nft.table_name(paths)
        self.guests: dict[str, int] = {}
        self.links: dict[str, frozenset[Link]] = {}
        self._lock = asyncio.Lock()

    def uid_of(self, name: str) -> int | None:
        """The ruled uid of instance ``name`` (None: its QEMU is not ruled)."""
        return self.guests.get(name)

    async def guard(self, name: str, uid: int) -> None:
        """Rule ``uid`` for instance ``name`` before its QEMU runs under it;
        OpExecError (nothing changed) when the rules cannot be set."""
        if uid == 0:
            raise errors.OpExecError(
                f"Cannot rule instance {name}'s QEMU: it would run as root, whom network"
                " rules cannot tell from noded"
            )
        async with self._lock:
            before = self.guests.get(name)
            self.guests[name] = uid
            try:
                await self._apply()
            except BaseException:
                self._forget(name, before)
                raise

    async def release(self, name: str) -> None:
        """Instance ``name``'s QEMU is gone: its uid (unless another guest
        runs under it) and its links leave the rules.  Failures are logged."""
        async with self._lock:
            if name not in self.guests and name not in self.links:
                return
            self.guests.pop(name, None)
            self.links.pop(name, None)
            try:
                await self._apply()
            except errors.OpExecError as err:
                log.error("Instance %s stopped, but %s", name, err.message)

    async def restore(self, guests: Mapping[str, int]) -> None:
        """At noded's start: the rules of the guests still running (none:
        whatever a previous noded left goes).  Failures are logged: verify
        reports the missing rules."""
        async with self._lock:
            self.guests = dict(guests)
            self.links.clear()
            try:
                needed = bool(self.guests) or await asyncio.to_thread(nft.table_exists, self.table)
                if needed:
                    await self._apply()
            except errors.OpExecError as err:
                log.error("Restoring the rules of %s: %s", ", ".join(sorted(guests)), err.message)

    async def allow(self, name: str, endpoints: Iterable[tuple[str, int]]) -> None:
        """Let instance ``name``'s QEMU open TCP connections to ``endpoints``
        (address, port) until :meth:`disallow`; nothing when it is not ruled."""
        async with self._lock:
            uid = self.guests.get(name)
            if uid is None:
                return
            self.links[name] = frozenset(_link(uid, host, port) for host, port in endpoints)
            await self._apply()

    async def disallow(self, name: str) -> None:
        """End what :meth:`allow` allowed (failures logged)."""
        async with self._lock:
            if self.links.pop(name, None) is None:
                return
            try:
                await self._apply()
            except errors.OpExecError as err:
                log.error("Instance %s: %s", name, err.message)

    def _forget(self, name: str, before: int | None) -> None:
        if before is None:
            self.guests.pop(name, None)
        else:
            self.guests[name] = before

    async def _apply(self) -> None:
        nets = await asyncio.to_thread(blocked, self.paths) if self.guests else ()
        links = frozenset(link for group in self.links.values() for link in group)
        state = State(frozenset(self.guests.values()), links, nets)
        await nft.run_script(render(self.table, state))


def _link(uid: int, host: str, port: int) -> Link:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise errors.OpExecError(f"Cannot allow a link to '{host}': not an IP address") from None
    return Link(uid, address, int(port))


def problems(paths: Paths, guests: Mapping[str, int]) -> list[str]:
    """What is missing from the rules ``guests`` (instance → uid) need here
    (blocking: for verify's thread)."""
    if not guests:
        return []
    table = nft.table_name(paths)
    if nft.binary() is None:
        return [f"guests {', '.join(sorted(guests))} need network rules, but this node has no nft"]
    items = nft.read_table(table)
    if items is None:
        return [f"the nft table inet {table} of the network rules for QEMU's users is missing"]
    out = _chain_problems(table, items)
    ruled = _set_elements(items, UIDS_SET)
    for name, uid in sorted(guests.items()):
        if uid not in ruled:
            out.append(f"the network rules for instance {name}'s QEMU user (uid {uid}) are missing")
    return out


def _chain_problems(table: str, items: list[dict[str, Any]]) -> list[str]:
    chains = {c["name"]: c for c in (i["chain"] for i in items if "chain" in i)}
    counts: dict[str, int] = {}
    for rule in (i["rule"] for i in items if "rule" in i):
        counts[rule["chain"]] = counts.get(rule["chain"], 0) + 1
    hooked = chains.get("output", {}).get("hook") == "output"
    if not hooked or counts.get("output") != 1 or counts.get(GUEST_CHAIN) != len(RULES):
        return [f"the nft table inet {table} lacks some of the network rules for QEMU's users"]
    return []


def _set_elements(items: list[dict[str, Any]], name: str) -> set[int]:
    for item in items:
        found = item.get("set")
        if isinstance(found, dict) and found.get("name") == name:
            return {e for e in found.get("elem", []) if isinstance(e, int)}
    return set()
