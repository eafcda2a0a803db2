"""etcd membership that follows the master candidates (the master's side).

Each master candidate runs one member (noded runs it: :mod:`corral.node.etcd_member`).
A candidate that is not yet a member joins as a learner (it votes on
nothing while it copies the data) and is promoted once it has caught up; a
member whose node is no longer a candidate is removed.  The voters stay an
odd number: with an even number of candidates one stays a learner, since a
fourth voter adds no fault tolerance and a larger quorum.

:meth:`MemberReconciler.step` makes one change and says what it did; the
service calls it until nothing is left to do (:func:`reconcile`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from corral import errors
from corral.rpc.calls_etcd import etcd_member_start, etcd_member_stop
from corral.rpc.client import RpcClient
from corral.rpc.result import NodeAddress
from corral.state.etcd.client import EtcdClient, EtcdError

log = logging.getLogger(__name__)

# etcd's own (IANA) ports, on each candidate's primary IP.
CLIENT_PORT = 2379
PEER_PORT = 2380
# Steps one reconcile makes at most (each waits for etcd): a bound, not a goal.
MAX_STEPS = 32


@dataclass(frozen=True)
class Candidate:
    """A master candidate as its member is named and addressed."""

    name: str
    uuid: str
    ip: str

    @property
    def client_url(self) -> str:
        return f"https://{self.ip}:{CLIENT_PORT}"

    @property
    def peer_url(self) -> str:
        return f"https://{self.ip}:{PEER_PORT}"


@dataclass(frozen=True)
class EtcdMemberInfo:
    """One member as etcd lists it (``name`` is empty until a learner starts)."""

    id: str
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    learner: bool

    @classmethod
    def of(cls, raw: dict[str, Any]) -> EtcdMemberInfo:
        return cls(
            str(raw["ID"]),
            str(raw.get("name", "")),
            tuple(raw.get("peerURLs", ())),
            tuple(raw.get("clientURLs", ())),
            bool(raw.get("isLearner", False)),
        )


def voters_wanted(candidates: int) -> int:
    """The largest odd number of voters ``candidates`` can hold (at least one)."""
    return max(1, candidates - (1 - candidates % 2))


async def list_members(client: EtcdClient) -> list[EtcdMemberInfo]:
    answer = await client.call("/v3/cluster/member/list", {})
    return [EtcdMemberInfo.of(raw) for raw in answer.get("members", [])]


class MemberReconciler:
    """Brings the etcd members in line with ``candidates``, one change per step."""

    def __init__(
        self,
        rpc: RpcClient,
        etcd: EtcdClient,
        candidates: Sequence[Candidate],
        others: Sequence[Candidate] = (),
    ) -> None:
        """``others``: the cluster's other nodes (a removed member's is told to stop)."""
        self.rpc = rpc
        self.etcd = etcd
        self.candidates = sorted(candidates, key=lambda c: c.name)
        self._by_peer = {c.peer_url: c for c in self.candidates}
        self._others = {c.peer_url: c for c in others}

    async def step(self) -> str | None:
        """Make one change; what it was (None: the members are as wanted)."""
        if not self.candidates:
            return None
        try:
            members = await list_members(self.etcd)
        except EtcdError:
            return await self._found()
        for member in members:
            if not any(url in self._by_peer for url in member.peer_urls):
                return await self._remove(member)
        voters = sum(not m.learner for m in members)
        if voters < voters_wanted(len(self.candidates)) and any(m.learner for m in members):
            # etcd 3.4 takes one learner at a time: promote it before adding more.
            return await self._balance(members)
        joined = {url for m in members for url in m.peer_urls}
        for candidate in self.candidates:
            if candidate.peer_url not in joined:
                return await self._add(candidate, members)
        return await self._balance(members)

    async def _found(self) -> str | None:
        """No member answers: the first candidate founds the cluster, if none
        of the candidates runs a member (else they are starting: wait)."""
        first = self.candidates[0]
        for candidate in self.candidates:
            if await self.etcd.healthy(candidate.client_url):
                return None
        status = await self._node(first, etcd_member_start(
            first.name, CLIENT_PORT, PEER_PORT, {first.name: first.peer_url}, True
        ))  # fmt: skip
        return f"started etcd on {first.name} as a new cluster ({status['pid']})"

    async def _add(self, candidate: Candidate, members: list[EtcdMemberInfo]) -> str:
        await self.etcd.call(
            "/v3/cluster/member/add", {"peerURLs": [candidate.peer_url], "isLearner": True}
        )
        cluster = {self._name_of(m): url for m in members for url in m.peer_urls[:1]} | {
            candidate.name: candidate.peer_url
        }
        await self._node(candidate, etcd_member_start(
            candidate.name, CLIENT_PORT, PEER_PORT, cluster, False
        ))  # fmt: skip
        return f"added {candidate.name} to etcd as a learner"

    def _name_of(self, member: EtcdMemberInfo) -> str:
        for url in member.peer_urls:
            if url in self._by_peer:
                return self._by_peer[url].name
        return member.name

    async def _remove(self, member: EtcdMemberInfo) -> str:
        await self.etcd.call("/v3/cluster/member/remove", {"ID": member.id})
        for url in member.peer_urls:
            if url in self._others:
                await self._node(self._others[url], etcd_member_stop(True))
        return f"removed etcd member {member.name or member.peer_urls}"

    async def _balance(self, members: list[EtcdMemberInfo]) -> str | None:
        """Promote a caught-up learner while voters are too few; make a voter
        a learner again (remove it: it joins anew) when they are too many."""
        voters = [m for m in members if not m.learner]
        wanted = voters_wanted(len(self.candidates))
        if len(voters) < wanted:
            for learner in (m for m in members if m.learner):
                try:
                    await self.etcd.call("/v3/cluster/member/promote", {"ID": learner.id})
                except EtcdError as err:
                    if "in sync with leader" in err.message or "not started" in err.message:
                        continue  # still copying: the next step tries again
                    raise
                return f"promoted etcd learner {self._name_of(learner)} to voter"
            return "waiting for etcd learners to catch up"
        if len(voters) > wanted:
            voter = voters[-1]
            return await self._retire(voter)
        return None

    async def _retire(self, voter: EtcdMemberInfo) -> str:
        """Remove an extra voter, and its data on its node: it joins again as a learner."""
        await self.etcd.call("/v3/cluster/member/remove", {"ID": voter.id})
        candidate = next(self._by_peer[u] for u in voter.peer_urls if u in self._by_peer)
        await self._node(candidate, etcd_member_stop(True))
        return f"made etcd voter {candidate.name} a learner again"

    async def _node(self, candidate: Candidate, request: Any) -> Any:
        node = NodeAddress(candidate.uuid, candidate.ip)
        return await self.rpc.run(node, request, f"etcd member on {candidate.name}")


async def reconcile(reconciler: MemberReconciler, wait: float = 0.2) -> list[str]:
    """Step until the members are as wanted (or MAX_STEPS); what was done."""
    done: list[str] = []
    for _ in range(MAX_STEPS):
        change = await reconciler.step()
        if change is None:
            return done
        log.info("etcd membership: %s", change)
        done.append(change)
        if change.startswith("waiting") or change.startswith("started"):
            await asyncio.sleep(wait)
    raise errors.OpExecError(f"etcd membership not settled after {MAX_STEPS} steps: {done}")
