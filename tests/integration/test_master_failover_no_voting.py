"""``gnt-cluster master-failover --no-voting`` (corral.master.rescue): the
master and another of three master candidates die for good; the survivor
cannot hand over (no etcd quorum) and says so as Ganeti does, then takes
the mastership from its own copy of the stores, keeping what it had.  The
old master, back, stands by under the new one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from corral.master.rescue import TOKEN_LEAP
from tests.helpers.etcd_cluster import Bed, etcd_bed, settle
from tests.helpers.fault_clients import (
    NAMES,
    OPTIONS,
    TAKEOVER,
    call,
    kill_node,
    restart_node,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

FIRST, SECOND = NAMES


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with etcd_bed(tmp_path_factory.mktemp("novote"), NAMES, *OPTIONS) as made:
        yield made


def failover(bed: Bed, name: str, *options: str) -> tuple[int, str]:
    result = bed.node(name).gnt("cluster", "master-failover", *options)
    return result.rc, result.stderr


def test_no_voting_is_refused_while_etcd_has_a_quorum(bed: Bed) -> None:
    rc, err = failover(bed, FIRST, "--no-voting", "--yes-do-it")
    assert rc != 0
    assert "etcd still has a quorum" in err and "without --no-voting" in err, err
    assert bed.master_name(bed.cl.node_name) == bed.cl.node_name  # nothing changed


def test_a_survivor_takes_the_mastership_with_its_own_copy(bed: Bed) -> None:
    master = bed.cl.node_name
    bed.gnt_ok("cluster", "add-tags", "before-the-loss")
    kill_node(bed, master)
    kill_node(bed, FIRST)
    # With voting, Ganeti's refusal, naming the candidates that are gone.
    rc, err = failover(bed, SECOND)
    assert rc == 1
    assert "Master-failover with voting is only possible if the majority" in err, err
    assert f"Unhealthy nodes: ['{master}', '{FIRST}']" in err, err
    rc, err = failover(bed, SECOND, "--no-voting", "--yes-do-it")
    assert rc == 0, err
    assert "copy of the cluster's stores is now the only one: configuration serial" in err, err
    survivor = bed.node(SECOND)
    assert survivor.gnt("cluster", "getmaster").stdout.strip() == SECOND
    tags = survivor.gnt("cluster", "list-tags").stdout.split()
    assert "before-the-loss" in tags  # acknowledged before: kept
    # Its token leapt ahead of any the lost majority may have given out.
    (token,) = call(bed, SECOND, "QueryConfigValues", ["fence_token"])
    assert token > TOKEN_LEAP
    assert survivor.gnt("cluster", "add-tags", "after-the-loss").rc == 0
    # Run again there, the command names the master it already is.
    rc, err = failover(bed, SECOND, "--no-voting", "--yes-do-it")
    assert rc != 0 and f"{SECOND} is already the master" in err, err
    # The old master, back, stands by under the new one.
    restart_node(bed, master)
    wait_until(
        lambda: f"the master node is {SECOND}" in bed.node(master).gnt("cluster", "info").stderr,
        TAKEOVER,
        "the old master standing by under the survivor",
    )
    # ...its old etcd data removed, it joins the survivor's copy (a learner,
    # then a voter: the third candidate is still gone).
    members = asyncio.run(settle(bed, (2, 0)))
    assert {m.name for m in members} == {master, SECOND}
