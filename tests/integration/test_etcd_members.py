"""etcd members run by noded on the master candidates, following the candidate
list as masterd's service keeps them (:mod:`corral.services.etcd_members`),
the master's stores moving into etcd, and masterd standing by and failing
over, on one four-node cluster on loopback with the nodes' own certificates.

The tests run in order on the module's cluster: the switch turned on, the
candidates changed with ``gnt-node modify``, the stores moved, members
frozen and killed, masterd and noded restarted, masterd started on the
other candidates, the mastership handed over, the master killed.  masterd
runs with a check interval far beyond the tests, so that only a change of
the configuration or masterd's start makes the service act.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from corral import constants as C
from corral.crypto.certs import MASTERD_CLIENT_CN, cert_info
from corral.node.etcd_member import etcd_root
from corral.objects import Cluster
from corral.process.daemons import stop_daemon
from corral.state import home
from corral.state.etcd.config import EtcdConfigStore
from corral.state.etcd.members import Candidate
from corral.state.sqlite.config import SqliteConfigStore
from tests.helpers.crash import MASTERD, STAMP, kill_9, start_masterd
from tests.helpers.etcd_cluster import SETTLE, Bed, etcd_pid, settle
from tests.helpers.jobs import wait_final, wait_status
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import start_noded
from tests.helpers.waiting import poll_async, wait_until

pytestmark = pytest.mark.slow

NAMES = ("node2.example.com", "node3.example.com", "node4.example.com")
# A check interval no test reaches: only changes and masterd's start wake the service.
NEVER = "3600"


def etcd_findings(bed: Bed) -> tuple[int, list[str]]:
    """``gnt-cluster verify --error-codes``: its exit code and its etcd lines."""
    result = bed.cl.gnt("cluster", "verify", "--error-codes")
    assert "Traceback" not in result.stderr, result.stderr
    lines = [STAMP.sub("", x).strip() for x in result.stdout.splitlines()]
    return result.rc, [x for x in lines if "ETCD" in x or "etcd" in x]


def errors_of(lines: list[str]) -> list[str]:
    return [x for x in lines if x.startswith(("- ERROR", "- WARNING"))]


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("etcdm"), NAMES) as (cl, extra):
        nodes = [Candidate(cl.node_name, "", cl.node_ip)]
        nodes += [Candidate(n.name, "", n.address) for n in extra]
        bed = Bed(cl, extra, nodes)
        # Only the master is a candidate to begin with.
        bed.gnt_ok("cluster", "modify", "--candidate-pool-size", "1")
        for name in NAMES:
            bed.gnt_ok("node", "modify", "--master-candidate=no", name)
        bed.restart_masterd("--etcd-check-interval", NEVER)
        try:
            yield bed
        finally:
            for node in extra:  # the masterds the tests started there
                stop_daemon(node.paths, MASTERD)
        roots = {n.name: bed.paths(n.name) for n in nodes}
    # The cluster's daemons stopped: no member is left running.
    for name, paths in roots.items():
        assert etcd_pid(paths) is None, f"etcd of {name} runs after the cluster stopped"


async def test_no_member_runs_while_the_switch_is_off(bed: Bed) -> None:
    assert all(etcd_pid(bed.paths(n.name)) is None for n in bed.nodes)
    _, lines = etcd_findings(bed)
    assert lines == [], lines  # verify checks no store it does not have


def test_bad_switch_values_are_refused(bed: Bed) -> None:
    result = bed.cl.gnt("cluster", "modify", "--etcd-members=maybe")
    assert result.rc != 0
    assert "Invalid boolean value 'maybe'" in result.stderr
    assert etcd_pid(bed.cl.paths) is None


async def test_members_follow_candidates(bed: Bed) -> None:
    node1, node2, node3, node4 = bed.nodes
    bed.gnt_ok("cluster", "modify", "--etcd-members=yes")
    members = await settle(bed, (1, 0))
    assert [m.name for m in members] == [node1.name]
    # Two more candidates: learners, then promoted: three voters.
    for node in (node2, node3):
        bed.gnt_ok("node", "modify", "--master-candidate=yes", node.name)
    members = await settle(bed, (3, 0))
    assert sorted(m.name for m in members) == [node1.name, node2.name, node3.name]
    # A fourth: it stays a learner, the voters stay three.
    bed.gnt_ok("node", "modify", "--master-candidate=yes", node4.name)
    members = await settle(bed, (3, 1))
    assert [m.peer_urls for m in members if m.learner] == [(node4.peer_url,)]
    _, lines = etcd_findings(bed)
    assert errors_of(lines) == [], lines
    notice = next(x for x in lines if "NOTICE" in x)
    assert f"learners: {node4.name};" in notice, notice
    # Back to three: the fourth's member is removed, stops, its data goes.
    bed.gnt_ok("node", "modify", "--master-candidate=no", node4.name)
    members = await settle(bed, (3, 0))
    assert node4.peer_url not in {url for m in members for url in m.peer_urls}
    wait_until(lambda: not etcd_root(bed.paths(node4.name)).exists(), 30, "node4's data gone")
    assert etcd_pid(bed.paths(node4.name)) is None  # stopped before its data went
    # No candidate any more: nothing that would let it become the master.
    demoted = bed.paths(node4.name)
    assert not demoted.ca_key.exists() and not demoted.store_home.exists()
    assert cert_info(demoted.client_pem)["subject"] == node4.name
    _, lines = etcd_findings(bed)
    assert errors_of(lines) == [], lines


async def test_the_stores_move_into_etcd_and_stay_there(bed: Bed) -> None:
    await settle(bed, (3, 0))
    paths = bed.cl.paths
    wait_until(paths.store_home.exists, SETTLE, "the master's stores moved into etcd")
    where = home.read(paths.store_home)
    assert isinstance(where, home.EtcdHome)
    assert sorted(where.endpoints) == sorted(n.client_url for n in bed.nodes[:3])
    bed.gnt_ok("cluster", "add-tags", "after-the-move")
    # masterd killed and started again: it opens the stores in etcd.
    bed.restart_masterd("--etcd-check-interval", NEVER, crash=True)
    assert "after-the-move" in bed.gnt_ok("cluster", "list-tags").split()
    bed.gnt_ok("cluster", "add-tags", "after-the-restart")
    etcd = bed.etcd()
    try:
        snapshot = await EtcdConfigStore(etcd, where.prefix).load()
    finally:
        await etcd.close()
    (cluster,) = snapshot.tables[Cluster.TABLE]
    assert {"after-the-move", "after-the-restart"} <= set(cluster["tags"])
    sqlite = SqliteConfigStore(paths.config_db)  # as it was at the move
    try:
        assert (await sqlite.load()).serial == where.moved_at_serial < snapshot.serial
    finally:
        await sqlite.close()


async def test_verify_reports_a_frozen_member(bed: Bed) -> None:
    await settle(bed, (3, 0))
    node3 = bed.nodes[2]
    pid = etcd_pid(bed.paths(node3.name))
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # it runs, and answers nothing
    try:
        rc, lines = etcd_findings(bed)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert rc != 0
    assert any(
        x.startswith(f"- ERROR:ENODEETCD:node:{node3.name}:etcd member does not answer")
        for x in lines
    ), lines

    async def clean() -> list[str]:
        return errors_of(etcd_findings(bed)[1])

    await poll_async(clean, lambda found: found == [], SETTLE, "a clean verify", interval=0.5)


async def test_a_killed_member_is_started_again_by_its_noded(bed: Bed) -> None:
    await settle(bed, (3, 0))
    bed.restart_masterd("--etcd-check-interval", NEVER)  # the master does not look
    node2 = bed.nodes[1]
    pid = etcd_pid(bed.paths(node2.name))
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: etcd_pid(bed.paths(node2.name)) not in (None, pid), 60, "node2 restarted")
    await settle(bed, (3, 0))


async def test_noded_restart_starts_its_member(bed: Bed) -> None:
    await settle(bed, (3, 0))
    victim = bed.extra[1]  # node3
    pid = etcd_pid(victim.paths)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    victim.stop()
    start_noded(victim.paths, victim.address, victim.port)
    restarted = etcd_pid(victim.paths)
    assert restarted is not None and restarted != pid
    await settle(bed, (3, 0))


async def test_an_offline_candidate_leaves_and_its_member_stops_once_back(bed: Bed) -> None:
    await settle(bed, (3, 0))
    node3 = bed.nodes[2]
    # Offline, it is no candidate: its member leaves etcd; noded is not asked.
    bed.gnt_ok("node", "modify", "--offline=yes", node3.name)
    members = await settle(bed, (1, 1))  # two candidates: one voter, one learner
    assert node3.peer_url not in {url for m in members for url in m.peer_urls}
    assert [m.name for m in members if not m.learner] == [bed.cl.node_name]  # the master's
    assert etcd_root(bed.paths(node3.name)).exists()
    # Back online (not a candidate): what is left of its member goes.
    bed.gnt_ok("node", "modify", "--force", "--offline=no", node3.name)
    wait_until(lambda: not etcd_root(bed.paths(node3.name)).exists(), 60, "node3's data gone")
    assert etcd_pid(bed.paths(node3.name)) is None
    bed.gnt_ok("node", "modify", "--master-candidate=yes", node3.name)
    await settle(bed, (3, 0))


async def test_a_removed_candidate_leaves_etcd(bed: Bed) -> None:
    node4 = bed.nodes[3]
    bed.gnt_ok("node", "modify", "--master-candidate=yes", node4.name)
    await settle(bed, (3, 1))
    bed.gnt_ok("node", "remove", node4.name)
    members = await settle(bed, (3, 0))
    assert node4.peer_url not in {url for m in members for url in m.peer_urls}
    assert etcd_pid(bed.paths(node4.name)) is None
    assert not etcd_root(bed.paths(node4.name)).exists()


# Standing by and failing over.  The lease runs LEASE_TTL seconds: a dead
# master's passes on that soon.
LEASE_TTL = "3"


async def test_candidates_stand_by_and_name_the_master(bed: Bed) -> None:
    await settle(bed, (3, 0))
    node1, node2, node3 = (n.name for n in bed.nodes[:3])
    # (Before the others stand by: a master that stops hands the mastership on.)
    bed.restart_masterd("--etcd-check-interval", NEVER, "--lease-ttl", LEASE_TTL)
    for name in (node2, node3):
        where = bed.paths(name).store_home
        wait_until(where.exists, SETTLE, f"{name} told where the stores live")
        assert home.read(where) == home.read(bed.cl.paths.store_home)
        # What a new master needs: the CA's key and masterd's client certificate.
        paths = bed.paths(name)
        assert paths.ca_key.read_bytes() == bed.cl.paths.ca_key.read_bytes()
        assert cert_info(paths.client_pem)["subject"] == MASTERD_CLIENT_CN
        start_masterd(bed.node(name), "--etcd-check-interval", NEVER, "--lease-ttl", LEASE_TTL)
    result = bed.node(node2).gnt("cluster", "info")
    assert result.rc != 0
    assert f"This node ({node2}) is not the master; the master node is {node1}" in result.stderr
    assert bed.node(node2).gnt("cluster", "master-ping").rc != 0
    assert bed.cl.gnt("cluster", "master-ping").rc == 0
    result = bed.cl.gnt("cluster", "master-failover")
    assert result.rc != 0
    assert f"where you want the new master to be. {node1} is already the master" in result.stderr
    result = bed.cl.gnt("cluster", "master-failover", "--no-voting", "--yes-do-it")
    assert result.rc != 0
    assert f"where you want the new master to be. {node1} is already the master" in result.stderr


async def test_master_failover_hands_the_mastership_over(bed: Bed) -> None:
    node2 = bed.nodes[1].name
    bed.gnt_ok("cluster", "add-tags", "before-failover")
    result = bed.node(node2).gnt("cluster", "master-failover")
    assert result.rc == 0, result.stderr
    assert bed.master_name(node2) == node2
    new = bed.node(node2)
    assert new.gnt("cluster", "add-tags", "after-failover").rc == 0
    tags = new.gnt("cluster", "list-tags").stdout.split()
    assert {"before-failover", "after-failover"} <= set(tags)
    # The former master stands by and names the new one; its files follow.
    result = bed.cl.gnt("cluster", "info")
    assert f"the master node is {node2}" in result.stderr, result.stderr
    wait_until(lambda: bed.cl.gnt("cluster", "getmaster").stdout.strip() == node2, 30, "ssconf")


async def test_a_dead_master_is_replaced_by_a_standing_by_candidate(bed: Bed) -> None:
    node1, node2, node3 = (n.name for n in bed.nodes[:3])
    assert bed.master_name(node2) == node2
    submitted = bed.node(node2).gnt("debug", "delay", "--submit", "600")
    job = int(submitted.stderr.split()[-1])  # "JobID: N"
    with bed.node(node2).client() as client:
        wait_status(client, job, {C.JOB_STATUS_RUNNING})
    kill_9(bed.paths(node2).run_dir / f"{MASTERD}.pid")

    found: list[str] = []

    def taken_over() -> bool:
        found[:] = [n for n in (node1, node3) if bed.master_name(n) == n]
        return bool(found)

    wait_until(taken_over, SETTLE, "a standing-by candidate took over")
    (survivor_name,) = found
    survivor = bed.node(survivor_name)
    # The job that ran on the dead master ends saying why.
    with survivor.client() as client:
        ((status, result),) = wait_final(client, [job], ("status", "opresult"))
    assert status == C.JOB_STATUS_ERROR
    moved = f"the master role moved from {node2} to {survivor_name} while it ran"
    assert result == [["OpExecError", [f"Unclean master daemon shutdown: {moved}"]]], result
    assert survivor.gnt("cluster", "add-tags", "after-the-death").rc == 0
    tags = set(survivor.gnt("cluster", "list-tags").stdout.split())
    assert {"before-failover", "after-failover", "after-the-death"} <= tags
    # The dead master's node starts its masterd again: it stands by.
    start_masterd(bed.node(node2), "--etcd-check-interval", NEVER, "--lease-ttl", LEASE_TTL)
    result = bed.node(node2).gnt("cluster", "info")
    assert f"the master node is {survivor_name}" in result.stderr, result.stderr
