"""The health of the etcd members as one snapshot (``gnt-cluster verify``):
the member list one member gives, and each member's own status asked of it,
all at once under one deadline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from corral.state.etcd.client import EtcdClient, EtcdError
from corral.state.etcd.members import EtcdMemberInfo, list_members


@dataclass(frozen=True)
class MemberHealth:
    """One listed member and its status (None: ``error`` says why there is none)."""

    member: EtcdMemberInfo
    status: dict[str, Any] | None
    error: str | None = None

    @property
    def leader(self) -> str | None:
        """The id of the member this one follows (None: it knows no leader)."""
        leader = str((self.status or {}).get("leader", "0"))
        return None if leader == "0" else leader

    @property
    def alarms(self) -> list[str]:
        """The problems the member reports of itself (no space, corruption...)."""
        return [str(text) for text in (self.status or {}).get("errors", [])]


@dataclass(frozen=True)
class EtcdHealth:
    """The members as etcd lists them, with their statuses; ``error``: why
    there is no list (no member answered)."""

    members: list[MemberHealth]
    error: str | None = None

    @property
    def voters(self) -> list[EtcdMemberInfo]:
        return [h.member for h in self.members if not h.member.learner]

    @property
    def learners(self) -> list[EtcdMemberInfo]:
        return [h.member for h in self.members if h.member.learner]

    def leaders(self) -> set[str]:
        """The leader ids the answering members name (one when all is well)."""
        return {h.leader for h in self.members if h.leader is not None}


async def gather(etcd: EtcdClient, timeout: float) -> EtcdHealth:
    """Ask the members for their list, then each of them for its status."""
    try:
        members = await list_members(etcd)
    except EtcdError as err:
        return EtcdHealth([], err.message)
    return EtcdHealth(list(await asyncio.gather(*(_health(etcd, m, timeout) for m in members))))


async def _health(etcd: EtcdClient, member: EtcdMemberInfo, timeout: float) -> MemberHealth:
    if not member.client_urls:
        return MemberHealth(member, None, "it has not started (it never joined)")
    try:
        return MemberHealth(member, await etcd.status(member.client_urls[0], timeout))
    except EtcdError as err:
        return MemberHealth(member, None, err.message)
