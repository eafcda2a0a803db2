"""masterd's hold on the mastership (corral.services.mastership) where candidates
stand by: on a real 3-member etcd, keepers of three candidates wait, take the
mastership once it is free, hand it over on request, and stop before a lease
they cannot renew runs out."""

from __future__ import annotations

import asyncio

import pytest

from corral.services.mastership import MastershipKeeper
from corral.state.etcd import client as etcd
from corral.state.etcd.mastership import EtcdMastership
from corral.state.ports import Lease
from tests.helpers.etcd import EtcdBed

# The shortest lease etcd grants with its default election timeout (1 s).
TTL = 2.0


@pytest.fixture
def client(etcd_three_client: etcd.EtcdClient) -> etcd.EtcdClient:
    return etcd_three_client


def _keeper(client: etcd.EtcdClient, prefix: str, holder: str) -> MastershipKeeper:
    mastership = EtcdMastership(client, prefix)
    return MastershipKeeper(mastership, holder, TTL, mastership)


async def test_a_candidate_stands_by_until_the_master_releases(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    prefix = etcd_three.prefix()
    first, second = _keeper(client, prefix, "node1"), _keeper(client, prefix, "node2")
    lease = await first.acquire()
    why: list[str] = []
    waiting = asyncio.create_task(second.acquire(why.append))
    await _until(lambda: bool(why))
    assert why == [f"The mastership is held by node1 (token {lease.token}); it passes on only"
                   " when that lease ends"]  # fmt: skip
    assert not waiting.done()
    await first.release()
    taken = await asyncio.wait_for(waiting, 10 * TTL)
    assert taken.holder == "node2" and taken.token > lease.token
    await second.release()


async def test_a_hand_over_goes_to_the_candidate_named(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    prefix = etcd_three.prefix()
    master = _keeper(client, prefix, "node1")
    others = [_keeper(client, prefix, name) for name in ("node2", "node3")]
    lease = await master.acquire()
    waiting = [asyncio.create_task(k.acquire()) for k in others]
    await EtcdMastership(client, prefix).request("node3", 30)
    await asyncio.wait_for(master.lost.wait(), 10 * TTL)
    assert master.handed_to == "node3"
    assert master.reason == "The mastership is handed over to node3"
    await master.release()  # as masterd does once its work ended
    taken: Lease = await asyncio.wait_for(waiting[1], 10 * TTL)
    assert taken.holder == "node3" and taken.token > lease.token
    assert not waiting[0].done()  # node2 stands by still: the request named node3
    # The request is gone with the hand-over: node2 may take a free mastership.
    await others[1].release()
    assert (await asyncio.wait_for(waiting[0], 10 * TTL)).holder == "node2"
    await others[0].release()


async def test_a_master_that_cannot_renew_stops_before_its_lease_runs_out(
    etcd_three: EtcdBed,
) -> None:
    prefix = etcd_three.prefix()
    client = etcd_three.client()
    keeper = _keeper(client, prefix, "node1")
    lease = await keeper.acquire()
    # etcd answers no more (the client points at an address nothing listens on).
    client.set_endpoints(["https://127.0.0.1:9"])
    await asyncio.wait_for(keeper.lost.wait(), 10 * TTL)
    assert keeper.reason == "The mastership lease could not be renewed before it runs out"
    assert keeper.lease is not None and keeper.lease.token == lease.token
    await keeper.release()
    await client.close()


async def test_a_node_that_is_no_candidate_never_takes_the_mastership(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    prefix = etcd_three.prefix()
    keeper = _keeper(client, prefix, "node4")
    candidate = asyncio.Event()
    asked = asyncio.Event()

    async def eligible() -> bool:
        asked.set()
        return candidate.is_set()

    why: list[str] = []
    waiting = asyncio.create_task(keeper.acquire(why.append, eligible))
    await asyncio.wait_for(asked.wait(), 10 * TTL)
    assert why == ["node4 is not a master candidate"]
    assert await EtcdMastership(client, prefix).current() is None  # free, yet not taken
    candidate.set()  # promoted
    assert (await asyncio.wait_for(waiting, 10 * TTL)).holder == "node4"
    await keeper.release()


async def _until(predicate: object) -> None:
    """Let the event loop run until ``predicate()`` holds."""
    assert callable(predicate)
    async with asyncio.timeout(10 * TTL):
        while not predicate():
            await asyncio.sleep(0)
