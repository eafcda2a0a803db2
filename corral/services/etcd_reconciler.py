"""etcd membership that follows the master candidates (the master's side).

Each master candidate runs one member (noded runs it: :mod:`corral.node.etcd_member`).
A candidate that is not yet a member joins as a learner (it votes on
nothing while it copies the data) and is promoted once it has caught up; a
member whose node is no longer a candidate is removed.  The voters stay an
odd number: with an even number of candidates one stays a learner, since a
fourth voter adds no fault tolerance and a larger quorum.  A member whose
process is gone (kill -9, a crash) is started again on its node.

:meth:`MemberReconciler.step` makes one change and says what it was; the
master's service (:mod:`corral.services.etcd_members`) calls it until
nothing is left to do, and again whenever the candidates change.  What the
nodes say (``etcd_member_status``) decides which of them runs a member: a new
cluster is founded only when every candidate answers that it runs none, so
an etcd that merely does not answer (no quorum, members restarting) is never
replaced by a new, empty one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from corral.rpc.calls_etcd import etcd_member_start, etcd_member_status, etcd_member_stop
from corral.rpc.client import RpcClient
from corral.rpc.result import NodeAddress
from corral.state.etcd.client import EtcdClient, EtcdError
from corral.state.etcd.members import (
    CLIENT_PORT,
    PEER_PORT,
    Candidate,
    Change,
    EtcdMemberInfo,
    list_members,
    voters_wanted,
)

log = logging.getLogger(__name__)

# Seconds a node gets to say whether it runs a member.
STATUS_TIMEOUT = 10.0
# What etcd 3.4 answers to promoting a learner that has not caught up yet.
_NOT_CAUGHT_UP = ("in sync with leader", "not started")
# ...and to adding or removing a member while a voter is not yet connected.
_UNHEALTHY = "unhealthy cluster"


def _address(node: Candidate) -> NodeAddress:
    return NodeAddress(node.uuid, node.ip)


# A node's answer to etcd_member_status (None: it did not answer).
Run = dict[str, Any] | None


def _has_member(run: Run) -> bool:
    return run is not None and run.get("name") is not None


def _stopped(run: Run) -> bool:
    return run is not None and run.get("pid") is None


class MemberReconciler:
    """Brings the etcd members in line with ``candidates``, one change per step.

    The candidates come in order of preference: the first founds the cluster,
    and the voters made learners again (there are too many) are the last ones.
    """

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
        self._others: dict[str, Candidate] = {}
        # Whether the other nodes may run members to stop (see _sweep).
        self._sweep_due = True
        self.retarget(candidates, others)

    def retarget(self, candidates: Sequence[Candidate], others: Sequence[Candidate] = ()) -> None:
        """Follow new candidates from the next step on."""
        self.candidates = list(candidates)
        self._by_peer = {c.peer_url: c for c in self.candidates}
        others_now = {c.peer_url: c for c in others}
        if others_now.keys() - self._others.keys():
            self._sweep_due = True
        self._others = others_now

    async def step(self) -> Change | None:
        """Make one change; what it was (None: the members are as wanted)."""
        if not self.candidates:
            return None
        try:
            return await self._step()
        except EtcdError as err:
            # etcd adds or removes a member only once its leader has reached
            # every voter for 5 s (a voter just promoted or restarted has not).
            # A change whose answer was lost is found done by the next step.
            if _UNHEALTHY not in err.message:
                raise
            return Change("waiting for etcd's voters to be connected", pause=True)

    async def _step(self) -> Change | None:
        runs = await self._runs()
        try:
            members = await list_members(self.etcd)
        except EtcdError as err:
            return await self._unanswered(runs, err)
        for member in members:
            if not any(url in self._by_peer for url in member.peer_urls):
                return await self._remove(member)
        joined = {url for m in members for url in m.peer_urls}
        for candidate in self.candidates:
            if candidate.peer_url in joined and _stopped(runs[candidate.uuid]):
                return await self._start(candidate, members)
        voters = sum(not m.learner for m in members)
        if voters < voters_wanted(len(self.candidates)) and any(m.learner for m in members):
            # etcd 3.4 takes one learner at a time: promote it before adding more.
            return await self._balance(members)
        for candidate in self.candidates:
            run = runs[candidate.uuid]
            if candidate.peer_url in joined or run is None:
                continue
            if _has_member(run):  # data of an earlier membership: it cannot join with it
                await self._node(candidate, etcd_member_stop(True))
                return Change(f"removed the old etcd data on {candidate.name}")
            return await self._add(candidate, members)
        # Candidates whose noded does not answer join at a later look.
        change = await self._balance(members)
        if change is None and self._sweep_due:
            change = await self._sweep()
        return change

    async def _runs(self) -> dict[str, Run]:
        """What each candidate's noded says of its member, by node uuid."""
        results = await self.rpc.results(
            [_address(c) for c in self.candidates], etcd_member_status(), timeout=STATUS_TIMEOUT
        )
        for candidate in self.candidates:
            results[candidate.uuid].report(log.warning, f"etcd member on {candidate.name}")
        return {uuid: result.value for uuid, result in results.items()}

    async def _unanswered(self, runs: dict[str, Run], err: EtcdError) -> Change:
        """No member answers: found the cluster if no candidate runs one,
        start the members that stopped, else wait (an election, a restart)."""
        if all(run is not None and not _has_member(run) for run in runs.values()):
            return await self._found()
        for candidate in self.candidates:
            run = runs[candidate.uuid]
            if _has_member(run) and _stopped(run):
                return await self._start(candidate, [])
        return Change(f"waiting for etcd to answer ({err.message})", pause=True)

    async def _found(self) -> Change:
        """The first candidate founds the cluster."""
        first = self.candidates[0]
        status = await self._node(first, etcd_member_start(
            first.name, CLIENT_PORT, PEER_PORT, {first.name: first.peer_url}, True
        ))  # fmt: skip
        text = f"started etcd on {first.name} as a new cluster (pid {status['pid']})"
        return Change(text, pause=True)

    async def _start(self, candidate: Candidate, members: list[EtcdMemberInfo]) -> Change:
        """Start a member of the cluster whose process is gone (a member with
        data rejoins whatever ``members`` says; one without joins them)."""
        await self._node(candidate, etcd_member_start(
            candidate.name, CLIENT_PORT, PEER_PORT, self._cluster(members, candidate), False
        ))  # fmt: skip
        return Change(f"started etcd member {candidate.name} again", pause=True)

    def _cluster(self, members: list[EtcdMemberInfo], candidate: Candidate) -> dict[str, str]:
        """etcd's initial cluster for ``candidate`` joining ``members``."""
        cluster = {self._name_of(m): m.peer_urls[0] for m in members if m.peer_urls}
        return cluster | {candidate.name: candidate.peer_url}

    async def _add(self, candidate: Candidate, members: list[EtcdMemberInfo]) -> Change:
        await self.etcd.call(
            "/v3/cluster/member/add", {"peerURLs": [candidate.peer_url], "isLearner": True}
        )
        await self._node(candidate, etcd_member_start(
            candidate.name, CLIENT_PORT, PEER_PORT, self._cluster(members, candidate), False
        ))  # fmt: skip
        return Change(f"added {candidate.name} to etcd as a learner", pause=True)

    def _name_of(self, member: EtcdMemberInfo) -> str:
        for url in member.peer_urls:
            if url in self._by_peer:
                return self._by_peer[url].name
        return member.name

    async def _remove(self, member: EtcdMemberInfo) -> Change:
        await self.etcd.call("/v3/cluster/member/remove", {"ID": member.id})
        for url in member.peer_urls:
            node = self._others.get(url)
            if node is not None and not await self._stop(node):
                self._sweep_due = True  # a sweep tries again
        return Change(f"removed etcd member {member.name or member.peer_urls[0]}")

    async def _sweep(self) -> Change | None:
        """Stop the members left on nodes that are no candidates (a stop that
        failed, a node that was offline, a master that died in between): once
        the members are settled, after masterd starts and whenever nodes stop
        being candidates or come back online.  Nodes that do not answer are
        asked again at the next sweep (the next look at settled members)."""
        others = list(self._others.values())
        results = await self.rpc.results(
            [_address(n) for n in others], etcd_member_status(), timeout=STATUS_TIMEOUT
        )
        strays = [n for n in others if _has_member(results[n.uuid].value)]
        stopped = [n.name for n in strays if await self._stop(n)]
        self._sweep_due = len(stopped) < len(strays) or any(r.failed for r in results.values())
        if not stopped:
            return None
        return Change(f"stopped the etcd members left on {', '.join(stopped)}")

    async def _balance(self, members: list[EtcdMemberInfo]) -> Change | None:
        """Promote a caught-up learner while voters are too few; make a voter
        a learner again (remove it: it joins anew) when they are too many."""
        voters = [m for m in members if not m.learner]
        wanted = voters_wanted(len(self.candidates))
        if len(voters) < wanted:
            for learner in (m for m in members if m.learner):
                try:
                    await self.etcd.call("/v3/cluster/member/promote", {"ID": learner.id})
                except EtcdError as err:
                    if any(text in err.message for text in _NOT_CAUGHT_UP):
                        continue  # still copying: a later step tries again
                    raise
                return Change(f"promoted etcd learner {self._name_of(learner)} to voter")
            return Change("waiting for etcd learners to catch up", pause=True)
        if len(voters) > wanted:
            return await self._retire(voters)
        return None

    async def _retire(self, voters: list[EtcdMemberInfo]) -> Change:
        """Remove the least preferred voter, and its data on its node: it joins
        again as a learner (if its node does not answer now, a later step
        removes the data)."""
        rank = {c.peer_url: index for index, c in enumerate(self.candidates)}
        voter = max(voters, key=lambda m: max(rank.get(u, -1) for u in m.peer_urls))
        await self.etcd.call("/v3/cluster/member/remove", {"ID": voter.id})
        candidate = next(self._by_peer[u] for u in voter.peer_urls if u in self._by_peer)
        await self._stop(candidate)
        return Change(f"made etcd voter {candidate.name} a learner again")

    async def _stop(self, node: Candidate) -> bool:
        """Stop the member on ``node`` and remove its data; whether it did."""
        result = await self.rpc.result(_address(node), etcd_member_stop(True))
        return result.report(log.warning, f"Cannot stop the etcd member on {node.name}")

    async def _node(self, candidate: Candidate, request: Any) -> Any:
        return await self.rpc.run(_address(candidate), request, f"etcd member on {candidate.name}")
