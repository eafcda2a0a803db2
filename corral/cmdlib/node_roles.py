"""A node's role (master candidate, drained, offline or regular) and the
master candidate pool, as Ganeti keeps them."""

from __future__ import annotations

import enum
import ipaddress
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.objects import Node

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.config.manager import ConfigManager

# The role flags, in the order of ``Role.flags``; at most one is set.
FLAGS = ("master_candidate", "drained", "offline")


class Role(enum.Enum):
    """A node's role, valued by its flags (master candidate, drained, offline)."""

    CANDIDATE = (True, False, False)
    DRAINED = (False, True, False)
    OFFLINE = (False, False, True)
    REGULAR = (False, False, False)

    @property
    def flags(self) -> tuple[bool, bool, bool]:
        return self.value

    @classmethod
    def of(cls, node: Node) -> Role:
        """The node's role (a config with two flags set counts by the first)."""
        flags = (node.master_candidate, node.drained, node.offline)
        for role in cls:
            if role.flags == flags:
                return role
        return cls.CANDIDATE if node.master_candidate else cls.DRAINED


def _stats(nodes: list[Node], pool_size: int, exceptions: list[str]) -> tuple[int, int, int]:
    now = possible = 0
    for node in nodes:
        if node.uuid in exceptions:
            continue
        if not (node.offline or node.drained) and node.master_capable:
            possible += 1
        if node.master_candidate:
            now += 1
    return now, min(possible, pool_size), possible


def candidate_stats(cfg: ConfigManager, exceptions: list[str]) -> tuple[int, int, int]:
    """(candidates now, candidates wanted, nodes that could be) without ``exceptions``."""
    return _stats(cfg.nodes(), cfg.cluster.candidate_pool_size, exceptions)


def fill_candidate_pool(lu: LogicalUnit[Any], changed: Node) -> list[Node]:
    """Promote other nodes until the pool is full again after ``changed``'s
    new role (staged in ``lu.tx``); Ganeti picks at random, Corral by name.
    The promoted nodes."""
    nodes = [changed if n.uuid == changed.uuid else n for n in lu.cfg.nodes()]
    pool = lu.cfg.cluster.candidate_pool_size
    now, wanted, _ = _stats(nodes, pool, [changed.uuid])
    promoted = []
    for node in nodes:
        if now >= wanted:
            break
        if node.uuid == changed.uuid or node.master_candidate or node.offline or node.drained:
            continue
        if not node.master_capable:
            continue
        copy = node.copy_for_update()
        assert isinstance(copy, Node)
        copy.master_candidate = True
        lu.tx.update(copy)
        promoted.append(copy)
        now += 1
    if promoted:
        names = ", ".join(n.name for n in promoted)
        lu.log_info(f"Promoted nodes to master candidate role: {names}")
    if now > wanted:
        lu.log_info(f"Note: more nodes are candidates ({now}) than desired ({wanted})")
    return promoted


def check_secondary_ip(address: str) -> None:
    """Ganeti's check of a node's secondary address (IPv4 only)."""
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        raise errors.OpPrereqError(
            f"Secondary IP ({address}) needs to be a valid IPv4 address", C.ECODE_INVAL
        ) from None
