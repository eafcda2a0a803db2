"""masterd's luxi memory bounds, against the real daemon: a request over the
size limit, or over what all connections may hold together, gets a clear
error without being parsed; masterd's memory stays bounded, the connection
goes on and other clients are served."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, cast

import pytest

from corral.luxi import protocol
from corral.process.daemons import running_pid, start_daemon, stop_daemon
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import RawLuxi

MIB = 1 << 20
MASTERD = "corral-masterd"


def padded(method: str, size: int) -> bytes:
    """A well-formed request of ``size`` bytes (JSON allows the blanks)."""
    body = json.dumps({"method": method, "args": []}).encode()
    return body + b" " * (size - len(body))


def peak_rss_mib(cl: TestCluster) -> float:
    """masterd's peak resident memory so far (VmHWM), in MiB."""
    pid = running_pid(cl.paths.pid_file(MASTERD))
    assert pid is not None, "masterd is not running"
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def answer_of(raw: RawLuxi, frame: bytes) -> dict[str, object]:
    return dict(json.loads(raw.exchange(frame + protocol.ETX)))


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("luxi-limits")) as cluster:
        yield cluster


def test_huge_request_gets_error_and_memory_stays_bounded(cl: TestCluster) -> None:
    huge = json.dumps(
        {"method": "SubmitJob", "args": [[{"OP_ID": "OP_TEST_DELAY", "comment": "x" * 60 * MIB}]]}
    ).encode()
    with RawLuxi(cl.paths.master_socket, timeout=120) as raw:
        answer = answer_of(raw, huge)
        assert answer["success"] is False
        assert answer["result"] == [
            "LuxiError",
            [
                f"Request too large: more than {protocol.MAX_MESSAGE_SIZE} bytes"
                " (the limit is masterd's --luxi-max-message-size)"
            ],
        ]
        # The same connection goes on, past the rest of the refused request.
        assert answer_of(raw, padded("QueryClusterInfo", 100))["success"] is True
    # Unparsed: masterd never held more than the limit (16 MiB) of it.
    assert peak_rss_mib(cl) < 300
    with cl.client() as other:
        assert other.call("QueryClusterInfo")["name"] == cl.cluster_name
    assert "Traceback" not in cl.paths.daemon_log(MASTERD).read_text()


def test_largest_legitimate_request_is_taken(cl: TestCluster) -> None:
    # More than bench_job_throughput's 1000 jobs in one SubmitManyJobs, each
    # with a long comment: ~4 MiB.  A rule rejects them once queued, so they
    # are read, parsed, validated and stored whole, but never run.
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0.0, "comment": "x" * 2000}
    with cl.client() as client:
        rule = client.call("ReplaceFilter", None, 0, [], "REJECT", [])
        try:
            results = client.submit_many_jobs([[op]] * 2000)
        finally:
            client.call("DeleteFilter", rule)
    assert len(results) == 2000
    assert all(ok is True for ok, _job_id in results), results[:3]


def start_masterd(cl: TestCluster, *options: str) -> None:
    stop_daemon(cl.paths, MASTERD)
    start_daemon([sys.executable, "-m", "corral.daemons.masterd", *options], cl.env, timeout=30)


def test_total_buffered_bound_across_connections(cl: TestCluster) -> None:
    start_masterd(cl, "--luxi-max-message-size", "4m", "--luxi-max-buffered", "8m")
    try:
        with contextlib.ExitStack() as stack:
            holders = [
                stack.enter_context(RawLuxi(cl.paths.master_socket, timeout=60)) for _ in range(2)
            ]
            for holder in holders:
                # Unfinished requests: sendall returns once masterd has read all
                # but what the socket's kernel buffer (~200 KiB) holds.
                holder.sock.sendall(padded("QueryClusterInfo", int(3.9 * MIB)))
            raw = stack.enter_context(RawLuxi(cl.paths.master_socket, timeout=60))
            refused = answer_of(raw, padded("QueryClusterInfo", MIB))
            assert refused["success"] is False
            cls, (message,) = cast(list[Any], refused["result"])
            assert cls == "LuxiError"
            assert "--luxi-max-buffered" in message and "try again later" in message
            # Small requests still fit; once the holders' requests are answered
            # (their memory given back), big ones do too.
            assert answer_of(raw, padded("QueryClusterInfo", 100))["success"] is True
            for holder in holders:
                assert json.loads(holder.exchange(protocol.ETX))["success"] is True
            taken = answer_of(raw, padded("QueryClusterInfo", 3 * MIB))
            assert taken["success"] is True, taken
            over = answer_of(raw, padded("QueryClusterInfo", 5 * MIB))
            assert over["result"] == [
                "LuxiError",
                [
                    f"Request too large: more than {4 * MIB} bytes"
                    " (the limit is masterd's --luxi-max-message-size)"
                ],
            ]
    finally:
        start_masterd(cl)
    assert "Traceback" not in cl.paths.daemon_log(MASTERD).read_text()


def test_bad_limit_option_is_refused(cl: TestCluster) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "corral.daemons.masterd", "--luxi-max-buffered", "lots"],
        env=cl.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "invalid size 'lots'" in proc.stderr
