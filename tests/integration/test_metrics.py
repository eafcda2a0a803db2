"""The metrics endpoint on a busy one-node cluster (real daemons, real sockets):
the numbers of ``/metrics`` (mond on the master, masterd's text over luxi)
agree exactly with ``gnt-job list`` and ``gnt-instance list``; mond's
collectors answer on the node; other methods are refused."""

from __future__ import annotations

import collections
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from tests.helpers.cluster import PERMISSIVE_IPOLICY, TestCluster, running_cluster
from tests.helpers.instances import add, ok
from tests.helpers.kvm_guest import kill_mirror_daemons, short_root
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

NODE = "node1.example.com"
LINE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'([a-z_]+)="((?:\\.|[^"\\])*)"')
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(cl: TestCluster, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    """Status, headers and text of mond's answer on the node."""
    request = urllib.request.Request(f"http://{cl.node_ip}:{C.DEFAULT_MOND_PORT}{path}")
    request.method = method
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def samples(text: str) -> Samples:
    """The exposition text's samples: (name, labels) → value."""
    found: Samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = LINE.match(line)
        assert match, line
        labels = frozenset(LABEL.findall(match["labels"] or ""))
        found[(match["name"], labels)] = float(match["value"])
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def by(found: Samples, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """A metric's non-zero values by the given labels."""
    out = {}
    for (metric, labels), number in found.items():
        if metric == name and number:
            out[tuple(dict(labels)[k] for k in keys)] = number
    return out


def gnt_rows(cl: TestCluster, *args: str) -> list[list[str]]:
    out = ok(cl.gnt(*args, "--no-headers", "--separator=|"))
    return [line.split("|") for line in out.splitlines()]


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestCluster, int]]:
    """Instances up, down and offline; jobs succeeded, failed, canceled,
    running, waiting and queued (no slot is free for another job).  Yields
    the cluster and the running job."""
    with running_cluster(tmp_path_factory.mktemp("metrics")) as cl:
        make_os(cl.paths, "dummy")
        for name in ("up1", "up2"):
            ok(add(cl, name, "-t", "diskless", "--no-install", "-o", "dummy+default"))
        for name in ("down1", "off1"):
            ok(add(cl, name, "-t", "diskless", "--no-install", "--no-start", "-o", "dummy+default"))
        ok(cl.gnt("instance", "modify", "--offline", "off1"))
        ok(cl.gnt("cluster", "modify", "--max-running-jobs", "2"))
        with cl.client() as client:
            failing = client.submit_job(
                [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": ["nosuch.example.com"]}]
            )
            running = client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 600}])
            waiting = client.submit_job(
                [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[running, ["success"]]]}]
            )
            # One slot for the running job, one for the first of these (which
            # waits for the running job's locks): the next ones stay queued.
            queued = [client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) for _ in "abc"]
            statuses = {failing: "error", running: "running", waiting: "waiting"}
            statuses |= {queued[1]: "queued", queued[2]: "queued"}

            def settled() -> bool:
                found = dict(client.query_jobs(list(statuses), ["id", "status"]))
                return all(found[job] == status for job, status in statuses.items())

            wait_until(settled, timeout=60, what="the jobs' states")
            assert client.call("CancelJob", queued[2])[0]
            try:
                yield cl, running
            finally:
                client.call("CancelJob", running, True)


def test_metrics_agree_with_gnt_job_list_and_gnt_instance_list(
    busy: tuple[TestCluster, int],
) -> None:
    cl, _running = busy
    status, headers, text = get(cl, "/metrics")
    assert status == 200, text
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    found = samples(text)
    jobs = gnt_rows(cl, "job", "list", "-o", "status,summary")
    per_op = collections.Counter(
        (f"OP_{summary.partition('(')[0]}", status) for status, summary in jobs
    )
    assert by(found, "corral_jobs", "op_id", "status") == per_op
    per_status = collections.Counter(status for status, _ in jobs)
    assert by(found, "corral_jobs_by_status", "status") == {(k,): n for k, n in per_status.items()}
    assert {"success", "error", "canceled", "running", "waiting", "queued"} <= set(per_status)
    assert value(found, "corral_job_queue_depth") == per_status["queued"] + per_status["waiting"]
    # Every finished job ended under this masterd: each has its duration.
    ended = collections.Counter(op for (op, st), n in per_op.items() if st in C.JOB_STATUS_FINALIZED
                                for _ in range(n))  # fmt: skip
    assert by(found, "corral_job_duration_seconds_count", "op_id") == {
        (op,): n for op, n in ended.items()
    }
    assert value(found, "corral_job_duration_seconds_bucket", op_id="OP_TEST_DELAY",
                 le="+Inf") == ended["OP_TEST_DELAY"]  # fmt: skip
    instances = gnt_rows(cl, "instance", "list", "-o", "admin_state")
    admin = collections.Counter(state for (state,) in instances)
    assert admin == {"up": 2, "down": 1, "offline": 1}
    assert by(found, "corral_instances", "admin_state") == {(k,): n for k, n in admin.items()}
    assert by(found, "corral_mirrored_disks", "sync_state") == {}  # none on one node
    assert value(found, "corral_node_reachable", node=NODE) == 1
    assert value(found, "corral_node_call_seconds_count", node=NODE) > 0
    assert value(found, "corral_store_commit_seconds_count", store="config") > 0
    assert value(found, "corral_store_commit_seconds_count", store="jobs") > 0


def test_a_change_shows_at_the_next_scrape(busy: tuple[TestCluster, int]) -> None:
    cl, _running = busy
    before = samples(get(cl, "/metrics")[2])
    queued = [int(job) for job, status in gnt_rows(cl, "job", "list", "-o", "id,status")
              if status == "queued"]  # fmt: skip
    with cl.client() as client:
        assert client.call("CancelJob", queued[0])[0]
    after = samples(get(cl, "/metrics")[2])
    depth = "corral_job_queue_depth"
    assert value(after, depth) == value(before, depth) - 1
    canceled = ("OP_TEST_DELAY", "canceled")
    assert by(after, "corral_jobs", "op_id", "status")[canceled] == (
        by(before, "corral_jobs", "op_id", "status")[canceled] + 1
    )


def test_mond_reports_on_the_master_node(busy: tuple[TestCluster, int]) -> None:
    cl, _running = busy
    status, _, text = get(cl, "/1/list/collectors")
    assert (status, json.loads(text)) == (
        200,
        [["cpu-avg-load", "default", 0], ["diskstats", "storage", 0]],
    )
    reports: list[dict[str, Any]] = json.loads(get(cl, "/1/report/all")[2])
    cpu = reports[0]["data"]
    assert cpu["cpu_number"] == len(cpu["cpus"]) >= 1
    assert all(isinstance(d["readsNum"], int) for d in reports[1]["data"])
    for method in ("POST", "DELETE"):
        assert get(cl, "/metrics", method)[0] == 405
    status, _, text = get(cl, "/1/report/storage/lv")  # Ganeti's, without data here
    assert (status, text.strip()) == (404, "Unable to produce a report for the requested resource")


@pytest.fixture(scope="module")
def pair() -> Iterator[testbed.Testbed]:
    # A short root: the mirrored disks' export sockets (108 bytes at most).
    with short_root("mp") as root:
        bed = testbed.up(root, nodes=2, init_args=PERMISSIVE_IPOLICY)
        try:
            yield bed
        finally:
            bed.down()
            # The copies' exports outlive noded by design (a restart keeps the
            # guests' links): the bed's are ended with it.
            for node in bed.nodes:
                kill_mirror_daemons(node.paths.run_dir)


def bed_get(node: testbed.BedNode, path: str) -> tuple[int, str]:
    url = f"http://{node.address}:{C.DEFAULT_MOND_PORT}{path}"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_the_master_serves_metrics_and_counts_mirrored_disks(pair: testbed.Testbed) -> None:
    """/metrics on the master (named by the ssconf files), a clear 404 on
    another node; mirrored disks by sync state as gnt-instance info shows them."""
    master, other = pair.nodes
    templates = "diskless,file,mirrored"
    done = pair.gnt("cluster", "modify", f"--enabled-disk-templates={templates}",
                    f"--ipolicy-disk-templates={templates}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    for node in pair.nodes:
        make_os(node.paths, "dummy")
    done = pair.gnt("instance", "add", "--no-name-check", "--no-ip-check", "-t", "mirrored",
                    "--disk=0:size=4m", "--disk=1:size=4m", "-o", "dummy+default",
                    "-n", f"{master.name}:{other.name}", "--no-start", "mirror1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    info = pair.gnt("instance", "info", "mirror1")
    assert info.returncode == 0, info.stderr
    status, text = bed_get(master, "/metrics")
    assert status == 200, text
    found = samples(text)
    # A disk is in sync when none of its copies is outdated (info's "copies" lines).
    # (the disks' own lines: their child devices' lines are indented further).
    lines = [line for line in info.stdout.splitlines() if line.strip().startswith("copies:")]
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    copies = [line for line in lines if len(line) - len(line.lstrip()) == indent]
    states = collections.Counter("outdated" if "(outdated)" in c else "in_sync" for c in copies)
    assert sum(states.values()) == 2
    assert by(found, "corral_mirrored_disks", "sync_state") == {(k,): n for k, n in states.items()}
    assert value(found, "corral_node_reachable", node=other.name) == 1
    status, text = bed_get(other, "/metrics")
    assert status == 404
    assert f"served on the master node, {master.name} only" in text
    status, text = bed_get(other, "/1/report/all")
    assert status == 200
    assert [r["name"] for r in json.loads(text)] == ["cpu-avg-load", "diskstats"]
    done = pair.gnt("instance", "remove", "-f", "mirror1")
    assert done.returncode == 0, done.stderr
