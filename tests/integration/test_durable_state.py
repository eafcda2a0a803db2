"""masterd's durable state through a real masterd: the drain flag, the
watcher's pause and the join tokens outlive a kill -9, and an older
Corral's state files are taken over at start."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.node import join_protocol as J
from corral.services import join_tokens
from corral.services.durable import DRAINED, WATCHER_PAUSE
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.crash import kill_9, start_masterd
from tests.helpers.instances import failed, ok
from tests.helpers.offline_config import durable_values


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[TestCluster]:
    with running_cluster(tmp_path) as cluster:
        yield cluster


def restart_killed(cl: TestCluster) -> None:
    kill_9(cl.paths.pid_file("corral-masterd"))
    start_masterd(cl)


def test_flags_and_tokens_outlive_a_kill_9(cl: TestCluster) -> None:
    ok(cl.gnt("cluster", "queue", "drain"))
    ok(cl.gnt("cluster", "watcher", "pause", "1h"))
    token = J.parse_token(ok(cl.gnt("node", "join-token")).strip())
    restart_killed(cl)
    assert "The drain flag is set" in ok(cl.gnt("cluster", "queue", "info"))
    assert "The watcher is paused until" in ok(cl.gnt("cluster", "watcher", "info"))
    failed(cl.gnt("cluster", "add-tags", "t1"), "the job queue is marked for drain")
    assert list(durable_values(cl.paths, join_tokens.PREFIX)) == [
        join_tokens.PREFIX + token.token_id
    ]
    ok(cl.gnt("cluster", "queue", "undrain"))
    ok(cl.gnt("cluster", "watcher", "continue"))
    restart_killed(cl)
    assert "The drain flag is unset" in ok(cl.gnt("cluster", "queue", "info"))
    assert "The watcher is not paused" in ok(cl.gnt("cluster", "watcher", "info"))
    assert DRAINED not in durable_values(cl.paths, "")
    ok(cl.gnt("cluster", "add-tags", "t1"))


def test_an_older_corral_s_state_files_are_taken_over(cl: TestCluster) -> None:
    kill_9(cl.paths.pid_file("corral-masterd"))
    cl.paths.queue_drain_file.touch()
    until = int(time.time()) + 3600
    cl.paths.watcher_pause_file.write_text(f"{until}\n")
    entry = {"key": "00" * 32, "expires": time.time() + 600, "used": False}
    tokens = cl.paths.data_dir / "join-tokens.json"
    tokens.write_text(json.dumps({"tok1": entry}))
    start_masterd(cl)
    assert "The drain flag is set" in ok(cl.gnt("cluster", "queue", "info"))
    state = durable_values(cl.paths, "")
    assert state[DRAINED] is True and state[WATCHER_PAUSE] == until
    assert state[join_tokens.PREFIX + "tok1"] == entry
    assert not cl.paths.queue_drain_file.exists() and not tokens.exists()
    assert not cl.paths.watcher_pause_file.exists()
