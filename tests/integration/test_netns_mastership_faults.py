"""Faults of the master on five nodes each in a network namespace of its
own, three of them master candidates with etcd members and the stores in
etcd (tests/helpers/netns_etcd.py), while clients on the host write and
read a register and submit tag jobs through whichever candidate leads,
recording every call (tests/helpers/fault_clients.py).

The faults, one after the other, each undone before the next: kill -9 of
the master's masterd, noded and etcd member together; SIGSTOP of its
masterd past the lease; its veth down (``ip link set``); nftables in its
namespace dropping its packets to the other nodes, then theirs to it.

Afterwards: the register's history is linearizable, every job whose
submission was acknowledged is known with its outcome, every tag job seen
to succeed has its tag; and, from the logs once every daemon stopped, no
two masters' fence windows overlap across the nodes (each token's calls let
in anywhere end before the next token's first), so not one call of a
deposed master was let in after its successor's first (the refused ones
are counted), and every write etcd refused a deposed master is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.fault_clients import Clients, outcome, wait_progress
from tests.helpers.netns_etcd import FAULTS, NetBed, fault, fencing, netns_etcd_bed

pytestmark = pytest.mark.slow

CALLS = 30


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetBed]:
    with netns_etcd_bed(tmp_path_factory.mktemp("nf")) as made:
        yield made


def test_faults_in_namespaces_lose_nothing_and_fence_deposed_masters(
    net: NetBed, tmp_path: Path
) -> None:
    clients = Clients(net)
    clients.start()
    victims = []
    try:
        wait_progress(clients, CALLS)
        for kind in FAULTS:
            victim, _ = fault(net, clients, kind, CALLS)
            victims.append((kind, victim))
        wait_progress(clients, CALLS)
    finally:
        clients.finish()
    clients.history.save(tmp_path / "history.jsonl")
    found = outcome(net, clients)
    assert found.verdict, found.verdict
    assert found.tags_done, "no tag job succeeded"
    assert not found.tags_lost, found.tags_lost
    assert not found.jobs_unknown, found.jobs_unknown
    assert not found.jobs_changed, found.jobs_changed
    fences = fencing(net)
    # One master per fault and the first one: a window each, none overlapping.
    assert len(fences.windows.spans) >= len(FAULTS) + 1, (victims, fences)
    assert fences.windows, f"{fences}: {fences.windows.late}"
    assert not fences.windows.late, fences.windows.late
    # The deposed masters did try (in-flight work once they woke up or came
    # back), and every try was refused: by etcd, by themselves, by the nodes.
    tries = fences.writes_refused + fences.calls_not_sent + fences.windows.refused
    assert tries > 0, fences
