"""corral-rapi: latency, throughput and job-change fan-out over real HTTPS.

Every request goes over TLS to the cluster's corral-rapi (started by
``gnt-cluster init`` on the node's address, port 5080), verifies the server's
certificate against ``rapi.pem`` and carries HTTP Basic credentials of a
``write`` user (as Ganeti's own RAPI client always sends them).  The clients
are in this process; the daemons (corral-rapi, masterd, noded) are their own
processes.

Figures (each the median of ``--runs`` runs):

* ``GET /2/info`` from a *fresh connection*: every sample opens a new TCP
  connection, makes a full TLS handshake (no session resumption), sends the
  request, reads the whole answer and closes (the answers are parsed, but
  outside the timed part, as for every figure); one run is the median of
  ``SAMPLES`` samples (``http.client``, blocking).
* ``GET /2/instances?bulk=1`` with ``--bulk-instances`` (1,000) diskless
  instances, over one keep-alive connection opened beforehand: request sent
  to whole answer read; one run is the median of ``BULK_SAMPLES`` samples.
* ``GET /2/instances/[one]`` the same way (``SAMPLES`` per run), with 100
  instances and with ``--instances`` (10,000): the answer's size, not the
  cluster's, should set the cost.
* Throughput of ``GET /2/info`` from ``CLIENTS`` (50) concurrent keep-alive
  clients: raw asyncio TLS streams in one process, each sending a pre-built
  request and reading the answer by its Content-Length, then the next;
  answers completed in ``--seconds`` (after one second of warm-up) divided by
  the time.  The load generator's CPU share (and the daemons') over the
  window is printed and stored, to show whether the client was the limit.
* A job submitted over RAPI reaching ``/2/jobs/[id]/wait`` waiters: a gate
  job (an interruptible OP_TEST_DELAY on the node, submitted over luxi) holds
  the node's lock; ``PUT /2/nodes/[node]/tags?tag=...`` submits an
  OP_TAGS_SET, which queues behind it; ``--waiters`` (20) clients, each on
  its own HTTPS connection, follow the job with ``GET /2/jobs/[id]/wait``
  (fields ``status`` and ``end_ts``, each answer's info and log serial sent
  back with the next request) until its status is final.  Once every waiter
  has had its first answer and asked again, the gate is released.  A waiter
  may first see the job running and ask once more: that counts.  A sample
  is the time from the job's end (its ``end_ts``, stamped by masterd with
  ``time.time()`` when the job ends) to the moment a waiter has read the
  answer showing the final status (the same clock).  A run's figures are the
  median and the maximum over its waiters.

Targets [Ganeti 3.0.2 on this machine kind]: /2/info ≤ 10 ms [59 ms];
/2/instances?bulk=1 with 1,000 instances ≤ 100 ms [/2/instances 59 ms];
/2/instances/[one] with 10,000 instances ≤ 10 ms; ≥ 1,000 requests/s;
job end to /wait waiters ≤ 50 ms.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_instances import create_many
from bench.common import (
    Figure,
    arg_parser,
    bench_cluster,
    delay_op,
    ensure_bytecode,
    median,
    submit_many,
    wait_all_final,
    write_results,
)
from corral import constants as C
from tests.helpers.cluster import RAPI_PORT, TestCluster
from tests.helpers.jobs import delay_gate_path, release_gate
from tests.helpers.osdef import make_os

NAME = "rapi"
USER, PASSWORD = "bench", "bench-password"
SAMPLES = 50
BULK_SAMPLES = 20
FEW_INSTANCES = 100
BULK_INSTANCES = 1_000
MANY_INSTANCES = 10_000
CLIENTS = 50
SECONDS = 5.0
WAITERS = 20
WAIT_FIELDS = ["status", "end_ts"]


class Rapi:
    """Where the cluster's RAPI is and how to talk to it."""

    def __init__(self, cluster: TestCluster) -> None:
        self.host = cluster.node_ip
        self.port = RAPI_PORT
        self.tls = ssl.create_default_context(cafile=str(cluster.rapi_ca))
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.auth = f"Basic {token}"

    def raw_request(self, method: str, path: str, body: Any = None) -> bytes:
        """A complete HTTP/1.1 request, for the asyncio clients."""
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: {self.auth}\r\nAccept: application/json\r\n"
        )
        if data:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        return (head + "\r\n").encode() + data

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            self.host, self.port, ssl=self.tls, server_hostname=self.host
        )

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.tls, timeout=60)

    def fetch(
        self, conn: http.client.HTTPSConnection, method: str, path: str, body: Any = None
    ) -> bytes:
        """One request on ``conn``; the answer's body, unparsed (any status but 200 fails)."""
        headers = {"Authorization": self.auth}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:300]!r}")
        return payload

    def request(
        self, conn: http.client.HTTPSConnection, method: str, path: str, body: Any = None
    ) -> Any:
        """One request on ``conn``; the parsed answer."""
        return json.loads(self.fetch(conn, method, path, body))


def fresh_connection_ms(rapi: Rapi, path: str, samples: int) -> list[float]:
    """Milliseconds per request, each on a new connection (connect, TLS, request, close)."""
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        conn = rapi.connect()
        try:
            answer = rapi.fetch(conn, "GET", path)
        finally:
            conn.close()
        times.append((time.perf_counter() - start) * 1000)
        json.loads(answer)  # a whole JSON answer (parsing it is the client's time)
    return times


def keepalive_ms(rapi: Rapi, path: str, samples: int) -> list[float]:
    """Milliseconds per request over one kept-alive connection (opened beforehand)."""
    conn = rapi.connect()
    try:
        rapi.request(conn, "GET", path)  # connects, and warms the server's caches
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            rapi.fetch(conn, "GET", path)
            times.append((time.perf_counter() - start) * 1000)
        return times
    finally:
        conn.close()


def repeat(runs: int, label: str, sample: Callable[[], list[float]]) -> list[float]:
    """The median of ``sample()`` for each of ``runs`` runs, printed as it goes."""
    results = []
    for run in range(runs):
        times = sample()
        results.append(median(times))
        print(
            f"{label} run {run + 1}: median {results[-1]:.2f} ms,"
            f" min {min(times):.2f}, max {max(times):.2f} ({len(times)} samples)",
            flush=True,
        )
    return results


# Throughput
def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    """The body of one HTTP/1.1 answer of status 200, read by its Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected answer: {head[:300]!r}")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return await reader.readexactly(int(value))
    raise RuntimeError("an answer without Content-Length")


async def _client(rapi: Rapi, request: bytes, counts: list[int], index: int) -> None:
    """One keep-alive client: request, read the answer, again."""
    reader, writer = await rapi.open()
    try:
        while True:
            writer.write(request)
            await read_answer(reader)
            counts[index] += 1
    finally:
        writer.close()


async def _load(rapi: Rapi, clients: int, seconds: float, pids: dict[str, int]) -> dict[str, Any]:
    request = rapi.raw_request("GET", "/2/info")
    counts = [0] * clients
    tasks = [asyncio.create_task(_client(rapi, request, counts, i)) for i in range(clients)]
    try:
        await asyncio.sleep(1.0)  # connected, handshakes done, caches warm
        if not all(counts):
            raise RuntimeError(f"{counts.count(0)} clients got no answer in the warm-up")
        before = sum(counts), time.perf_counter(), time.process_time()
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        await asyncio.sleep(seconds)
        done, wall = sum(counts) - before[0], time.perf_counter() - before[1]
        cpu = {name: (cpu_seconds(pid) - cpu_before[name]) / wall for name, pid in pids.items()}
        cpu["client"] = (time.process_time() - before[2]) / wall
        for task in tasks:
            if task.done():
                task.result()  # a client that failed fails the run
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"rps": done / wall, "cpu": {k: round(v, 2) for k, v in cpu.items()}}


def throughput(rapi: Rapi, runs: int, seconds: float, pids: dict[str, int]) -> list[dict[str, Any]]:
    results = []
    for run in range(runs):
        result = asyncio.run(_load(rapi, CLIENTS, seconds, pids))
        results.append(result)
        cpu = ", ".join(f"{k} {v:.0%}" for k, v in result["cpu"].items())
        print(f"throughput run {run + 1}: {result['rps']:.0f} requests/s (CPU: {cpu})", flush=True)
    return results


# Job changes to /wait waiters
async def _waiter(rapi: Rapi, job_id: str, armed: asyncio.Event) -> tuple[float, int]:
    """Follow the job over /wait until its status is final; the seconds from
    the job's end to reading that answer, and how many answers it took."""
    reader, writer = await rapi.open()
    prev_info: Any = None
    prev_serial: int | None = None
    answers = 0
    try:
        while True:
            body = {
                "fields": WAIT_FIELDS,
                "previous_job_info": prev_info,
                "previous_log_serial": prev_serial,
            }
            writer.write(rapi.raw_request("GET", f"/2/jobs/{job_id}/wait", body))
            answer = await read_answer(reader)
            received = time.time()
            answers += 1
            result = json.loads(answer)
            armed.set()
            if result is None:  # no change within the server's wait
                continue
            prev_info = result["job_info"]
            for entry in result["log_entries"]:
                prev_serial = max(prev_serial or 0, entry[0])
            if prev_info[0] in C.JOB_STATUS_FINALIZED:
                sec, usec = prev_info[1]
                ended = sec + usec / 1e6
                return received - ended, answers
    finally:
        writer.close()


async def _fanout(rapi: Rapi, job_id: str, gate: str, waiters: int) -> list[tuple[float, int]]:
    events = [asyncio.Event() for _ in range(waiters)]
    tasks = [asyncio.create_task(_waiter(rapi, job_id, e)) for e in events]
    # Every waiter has had its first answer (the job is queued behind the
    # gate) and has asked again before the gate opens.
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 30)
    release_gate(gate)
    return list(await asyncio.wait_for(asyncio.gather(*tasks), 60))


def wait_fanout(cluster: TestCluster, rapi: Rapi, runs: int, waiters: int) -> list[list[float]]:
    """Per run, the milliseconds from the job's end to each waiter's final answer."""
    results = []
    with cluster.client() as client:
        for run in range(runs):
            gate_op = delay_op(
                120, on_nodes=[cluster.node_name], interruptible=True, no_locks=False
            )
            (gate_id,) = submit_many(client, [[gate_op]])
            gate = delay_gate_path(client, gate_id)  # running: it holds the node's lock
            conn = rapi.connect()
            try:
                path = f"/2/nodes/{cluster.node_name}/tags?tag=bench-{run}"
                job_id = str(rapi.request(conn, "PUT", path))
            finally:
                conn.close()
            seen = asyncio.run(_fanout(rapi, job_id, gate, waiters))
            if wait_all_final(client, [gate_id, int(job_id)]) != ["success", "success"]:
                raise RuntimeError("the gate or the tags job did not succeed")
            samples = [latency * 1000 for latency, _ in seen]
            results.append(samples)
            answers = sorted(n for _, n in seen)
            print(
                f"wait run {run + 1}: {waiters} waiters, median {median(samples):.2f} ms,"
                f" max {max(samples):.2f} ms (answers per waiter {answers[0]}-{answers[-1]})",
                flush=True,
            )
    return results


# The cluster
def grow_to(cluster: TestCluster, rapi: Rapi, count: int) -> int:
    """Create diskless instances ``inst<i>`` until there are ``count``; the
    size in bytes of ``GET /2/instances?bulk=1`` then (checked to list them all)."""
    with cluster.client() as client:
        existing = len(client.query("instance", ["name"])["data"])
        start = time.perf_counter()
        create_many(client, [f"inst{i}" for i in range(existing, count)])
    print(
        f"{count - existing} instances created in {time.perf_counter() - start:.0f} s", flush=True
    )
    conn = rapi.connect()
    try:
        answer = rapi.fetch(conn, "GET", "/2/instances?bulk=1")
    finally:
        conn.close()
    listed = len(json.loads(answer))
    if listed != count:
        raise RuntimeError(f"/2/instances lists {listed} instances, not {count}")
    return len(answer)


def make_figures(args: Any) -> dict[str, Figure]:
    many, bulk = f"{args.instances:,}", f"{args.bulk_instances:,}"
    return {
        "info": Figure(
            "rapi_info_fresh", "GET /2/info, new TCP+TLS connection each", "ms", 10, "max", "59 ms"
        ),
        "bulk": Figure(
            f"rapi_instances_bulk_{args.bulk_instances}",
            f"GET /2/instances?bulk=1, {bulk} instances, keep-alive",
            "ms",
            100,
            "max",
            "59 ms (/2/instances)",
        ),
        "one_few": Figure(
            f"rapi_instance_one_{FEW_INSTANCES}",
            f"GET /2/instances/[one], {FEW_INSTANCES} instances, keep-alive",
            "ms",
            10,
            "max",
            "n/a",
        ),
        "one_many": Figure(
            f"rapi_instance_one_{args.instances}",
            f"GET /2/instances/[one], {many} instances, keep-alive",
            "ms",
            10,
            "max",
            "n/a",
        ),
        "rps": Figure(
            "rapi_info_throughput",
            f"GET /2/info, {CLIENTS} concurrent keep-alive clients",
            "req/s",
            1000,
            "min",
            "n/a",
        ),
        "wait_p50": Figure(
            "rapi_wait_fanout_median",
            f"Job end to {args.waiters} /2/jobs/[id]/wait waiters, median",
            "ms",
            50,
            "max",
            "n/a",
        ),
        "wait_max": Figure(
            "rapi_wait_fanout_max",
            f"Job end to {args.waiters} /2/jobs/[id]/wait waiters, max",
            "ms",
            50,
            "max",
            "n/a",
        ),
    }


def measure(cluster: TestCluster, args: Any, figures: dict[str, Figure]) -> dict[str, Any]:
    """Run every measurement on ``cluster``; what else is worth keeping."""
    rapi = Rapi(cluster)
    runs = args.runs
    figures["info"].runs = repeat(
        runs, "GET /2/info fresh", lambda: fresh_connection_ms(rapi, "/2/info", SAMPLES)
    )
    pids = {
        "corral-rapi": int(cluster.paths.pid_file("corral-rapi").read_text()),
        "corral-masterd": int(cluster.paths.pid_file("corral-masterd").read_text()),
    }
    loads = throughput(rapi, runs, args.seconds, pids)
    figures["rps"].runs = [r["rps"] for r in loads]
    waits = wait_fanout(cluster, rapi, runs, args.waiters)
    figures["wait_p50"].runs = [median(s) for s in waits]
    figures["wait_max"].runs = [max(s) for s in waits]
    sizes = {FEW_INSTANCES: grow_to(cluster, rapi, FEW_INSTANCES)}
    one = f"/2/instances/inst{FEW_INSTANCES // 2}"
    figures["one_few"].runs = repeat(
        runs, f"GET {one} ({FEW_INSTANCES})", lambda: keepalive_ms(rapi, one, SAMPLES)
    )
    sizes[args.bulk_instances] = grow_to(cluster, rapi, args.bulk_instances)
    figures["bulk"].runs = repeat(
        runs,
        f"GET /2/instances?bulk=1 ({args.bulk_instances})",
        lambda: keepalive_ms(rapi, "/2/instances?bulk=1", BULK_SAMPLES),
    )
    sizes[args.instances] = grow_to(cluster, rapi, args.instances)
    one = f"/2/instances/inst{args.instances // 2}"
    figures["one_many"].runs = repeat(
        runs, f"GET {one} ({args.instances})", lambda: keepalive_ms(rapi, one, SAMPLES)
    )
    cpu = [r["cpu"] for r in loads]
    figures["rps"].notes = f"CPU share (1.0 = one core) during the runs: {cpu}"
    return {
        "throughput_cpu": cpu,
        "wait_ms_samples": [[round(x, 3) for x in s] for s in waits],
        "bulk_answer_bytes": sizes,
    }


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--instances", type=int, default=MANY_INSTANCES)
    parser.add_argument("--bulk-instances", type=int, default=BULK_INSTANCES)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="per throughput run")
    parser.add_argument("--waiters", type=int, default=WAITERS)
    args = parser.parse_args()
    if not FEW_INSTANCES <= args.bulk_instances <= args.instances:
        parser.error(f"need {FEW_INSTANCES} <= --bulk-instances <= --instances")
    ensure_bytecode()
    figures = make_figures(args)
    with bench_cluster(NAME) as cluster:
        cluster.add_rapi_user(USER, PASSWORD, "write")
        make_os(cluster.paths, "bench")
        extra = measure(cluster, args, figures)
    write_results(
        NAME,
        list(figures.values()),
        {
            "runs": args.runs,
            "instances": args.instances,
            "bulk_instances": args.bulk_instances,
            "few_instances": FEW_INSTANCES,
            "samples_per_run": SAMPLES,
            "bulk_samples_per_run": BULK_SAMPLES,
            "clients": CLIENTS,
            "seconds_per_throughput_run": args.seconds,
            "waiters": args.waiters,
            "auth": "HTTP Basic, write user",
            "tls": "certificate verified against rapi.pem",
        },
        extra,
    )


if __name__ == "__main__":
    main()
