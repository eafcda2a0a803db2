"""Growing and shrinking while jobs run: a cluster goes from one master
candidate to three (the stores move into etcd), to five, and back to one
(the stores move back into SQLite, corral.services.store_move_back), with
clients submitting tag jobs all along (tests/helpers/fault_clients.py).
Nothing acknowledged is lost: every job whose submission was acknowledged is
known with its outcome, every tag job seen to succeed has its tag.

The candidates change as an administrator changes them: ``gnt-node modify
--master-candidate``, ``gnt-node remove``; at the end the stores go into
etcd once more and ``gnt-cluster modify --etcd-members=no`` brings them back.
masterd stands by on two candidates; while the stores are in SQLite it says
it cannot take over, once they are in etcd again it stands by as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from corral.process.daemons import stop_daemon
from corral.state import home
from corral.state.etcd.members import Candidate
from tests.helpers.crash import MASTERD
from tests.helpers.etcd_cluster import SETTLE, Bed, etcd_pid, settle, standby_masterd
from tests.helpers.fault_clients import OPTIONS, Clients, call, outcome, wait_progress
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

NAMES = tuple(f"node{i}.example.com" for i in range(2, 6))
# Calls the clients make between two changes of the candidates.
CALLS = 15


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("grow"), NAMES) as (cl, extra):
        nodes = [Candidate(cl.node_name, "", cl.node_ip)]
        nodes += [Candidate(n.name, "", n.address) for n in extra]
        bed = Bed(cl, extra, nodes)
        # One candidate to begin with: the master, on SQLite, one etcd member.
        bed.gnt_ok("cluster", "modify", "--candidate-pool-size", "1")
        for name in NAMES:
            bed.gnt_ok("node", "modify", "--master-candidate=no", name)
        bed.restart_masterd(*OPTIONS)
        bed.gnt_ok("cluster", "modify", "--etcd-members=yes")
        try:
            yield bed
        finally:
            for node in extra:
                stop_daemon(node.paths, MASTERD)


def _home(bed: Bed, name: str | None = None) -> home.Home | None:
    return home.read(bed.paths(name or bed.cl.node_name).store_home)


def _candidates(bed: Bed, flag: str, *names: str) -> None:
    for name in names:
        bed.gnt_ok("node", "modify", f"--master-candidate={flag}", name)


async def test_growth_1_3_5_and_back_to_1_while_jobs_run_loses_nothing(bed: Bed) -> None:
    node1, node2, node3, node4, node5 = (n.name for n in bed.nodes)
    await settle(bed, (1, 0))
    assert _home(bed) is None  # SQLite, as the cluster was made
    clients = Clients(bed)
    clients.start(registers=1, jobs=2)
    try:
        wait_progress(clients, CALLS)
        # Three candidates: three voters, the stores move into etcd.
        _candidates(bed, "yes", node2, node3)
        await settle(bed, (3, 0))
        wait_until(lambda: isinstance(_home(bed), home.EtcdHome), SETTLE, "the stores in etcd")
        for name in (node2, node3):
            wait_until(_told(bed, name), SETTLE, f"{name} told where the stores live")
            standby_masterd(bed, name, *OPTIONS)
        wait_progress(clients, CALLS)
        # Five, and three again: the stores stay in etcd.
        _candidates(bed, "yes", node4, node5)
        await settle(bed, (5, 0))
        wait_progress(clients, CALLS)
        _candidates(bed, "no", node5, node4)
        await settle(bed, (3, 0))
        assert isinstance(_home(bed), home.EtcdHome)
        wait_progress(clients, CALLS)

        # Two: the stores move back into SQLite before etcd shrinks.
        stop_daemon(bed.paths(node3), MASTERD)
        bed.gnt_ok("node", "remove", node3)
        wait_until(lambda: _sqlite_on(_home(bed), node1), SETTLE, "the stores back in SQLite")
        await settle(bed, (1, 1))
        wait_progress(clients, CALLS)
        # The candidate standing by is told, and says it cannot take over.
        wait_until(lambda: _sqlite_on(_home(bed, node2), node1), SETTLE, "node2 told")
        said = _standby_answer(bed, node2)
        assert f"the master's stores live in SQLite on {node1}" in said, said
        result = bed.node(node2).gnt("cluster", "master-failover")
        assert result.rc != 0
        assert "Cannot take the mastership: the master's stores live in SQLite" in result.stderr

        # One.
        _candidates(bed, "no", node2)
        await settle(bed, (1, 0))
        wait_progress(clients, CALLS)
        # Three again: into etcd again, and node2's masterd stands by as before.
        _candidates(bed, "yes", node2, node4)
        await settle(bed, (3, 0))
        wait_until(lambda: isinstance(_home(bed), home.EtcdHome), SETTLE, "in etcd again")
        wait_until(_told(bed, node2), SETTLE, "node2 told where the stores live")
        said = _standby_answer(bed, node2, sqlite=False)
        assert f"This node ({node2}) is not the master; the master node is {node1}" in said
        wait_progress(clients, CALLS)
        # The members turned off: the stores move back first, then every member stops.
        bed.gnt_ok("cluster", "modify", "--etcd-members=no")
        wait_until(lambda: _sqlite_on(_home(bed), node1), SETTLE, "back in SQLite")
        for name in (node1, node2, node4):
            wait_until(_no_member(bed, name), SETTLE, f"{name}'s member stopped")
        wait_progress(clients, CALLS)
    finally:
        clients.finish()
    assert _sqlite_on(_home(bed), node1), _home(bed)
    found = outcome(bed, clients)
    assert found.ok, found
    _all_known_and_succeeded(bed, clients)
    # masterd started again opens SQLite and finds it all.
    bed.restart_masterd(*OPTIONS)
    tags = set(bed.gnt_ok("cluster", "list-tags").split())
    assert clients.tags_done <= tags
    _all_known_and_succeeded(bed, clients)


def _told(bed: Bed, name: str) -> Callable[[], bool]:
    """Whether node ``name`` holds the master's store home."""
    return lambda: _home(bed, name) == _home(bed)


def _no_member(bed: Bed, name: str) -> Callable[[], bool]:
    """Whether node ``name`` runs no etcd member."""
    return lambda: etcd_pid(bed.paths(name)) is None


def _sqlite_on(where: home.Home | None, master: str) -> bool:
    return isinstance(where, home.SqliteHome) and where.master == master


def _standby_answer(bed: Bed, name: str, sqlite: bool = True) -> str:
    """What ``gnt-cluster info`` on node ``name`` says (its masterd stands by)
    once it says whether the stores are in SQLite (``sqlite``) or not."""
    found: list[str] = []

    def says() -> bool:
        result = bed.node(name).gnt("cluster", "info")
        found[:] = [result.stderr]
        return result.rc != 0 and ("SQLite" in result.stderr) == sqlite

    try:
        wait_until(says, SETTLE, f"{name}'s masterd says where the stores are")
    except AssertionError as err:
        raise AssertionError(f"{err}; its last answer: {found}") from None
    return found[0]


def _all_known_and_succeeded(bed: Bed, clients: Clients) -> None:
    """Every acknowledged job is known to the master, and succeeded."""
    ids = sorted(clients.jobs_accepted)
    assert ids
    rows = call(bed, bed.cl.node_name, "QueryJobs", ids, ["id", "status", "opresult"])
    assert [row[0] if row else None for row in rows] == ids
    failed = [row for row in rows if row[1] != "success"]
    assert not failed, failed
