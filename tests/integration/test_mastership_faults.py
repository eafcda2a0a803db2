"""Faults of the master while clients work, on three candidates with the
stores in etcd (tests/helpers/etcd_cluster.py): nothing acknowledged is lost,
the register the clients share stays linearizable, a deposed master answers
nothing.

Clients, each a thread, call whichever node leads (they try the nodes in
turn) and record every call (invoke, ok, fail, unknown, with times:
tests/helpers/history.py):

- register clients write and read the watcher's pause (SetWatcherPause,
  QueryConfigValues), one key of the master's durable state;
- job clients submit tag jobs (each adds a tag of its own) and wait for them.

Faults, one after the other: kill -9 of the master's masterd, noded and etcd
member together (then started again); SIGSTOP of the master's masterd past
its lease, then SIGCONT.  Afterwards the register's history must be
linearizable (Wing & Gong / Lowe: tests/helpers/linearizability.py), every
tag job seen succeed must have its tag, and every job whose submission was
acknowledged must be known to the last master.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.etcd_cluster import Bed, etcd_bed
from tests.helpers.fault_clients import (
    NAMES,
    OPTIONS,
    TAKEOVER,
    Clients,
    frozen_master,
    kill_master_node,
    outcome,
    restart_node,
    wait_progress,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with etcd_bed(tmp_path_factory.mktemp("faults"), NAMES, *OPTIONS) as made:
        yield made


def test_faults_of_the_master_lose_nothing_and_stay_linearizable(bed: Bed, tmp_path: Path) -> None:
    clients = Clients(bed)
    clients.start()
    try:
        wait_progress(clients, 50)
        victim, _ = kill_master_node(bed)
        wait_progress(clients, 50)
        restart_node(bed, victim)
        wait_progress(clients, 50)
        with frozen_master(bed) as (frozen, _):
            wait_progress(clients, 50)
        wait_progress(clients, 50)
    finally:
        clients.finish()
    # The frozen masterd woke up deposed: it stands by, naming the new master.
    wait_until(
        lambda: "is not the master" in bed.node(frozen).gnt("cluster", "info").stderr,
        TAKEOVER,
        "the frozen masterd standing by",
    )
    clients.history.save(tmp_path / "history.jsonl")
    found = outcome(bed, clients)
    assert found.verdict, found.verdict
    assert found.tags_done, "no tag job succeeded"
    assert not found.tags_lost, found.tags_lost
    assert not found.jobs_unknown, found.jobs_unknown
    assert not found.jobs_changed, found.jobs_changed
