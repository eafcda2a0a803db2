"""etcd's members as Corral names them: one per master candidate.

Each master candidate runs one member (noded runs it:
:mod:`corral.node.etcd_member`); the master keeps the membership in line with
the candidates (:mod:`corral.services.etcd_reconciler`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral.state.etcd.client import EtcdClient

# etcd's own (IANA) ports, on each candidate's primary IP.
CLIENT_PORT = 2379
PEER_PORT = 2380


@dataclass(frozen=True)
class Candidate:
    """A master candidate (or another node) as its member is named and addressed."""

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


@dataclass(frozen=True)
class Change:
    """What one step did.  ``pause``: etcd has to act before the next step can
    (a member starting, a learner catching up, an election): let time pass."""

    text: str
    pause: bool = False


def voters_wanted(candidates: int) -> int:
    """The largest odd number of voters ``candidates`` can hold (at least one)."""
    return max(1, candidates - (1 - candidates % 2))


async def list_members(client: EtcdClient) -> list[EtcdMemberInfo]:
    answer = await client.call("/v3/cluster/member/list", {})
    return [EtcdMemberInfo.of(raw) for raw in answer.get("members", [])]
