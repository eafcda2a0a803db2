"""What the fence check costs a node call (issue 25).

Every node call that changes its node carries the master's fence token, and
noded lets it act only once the token is not older than the newest it has
seen (``corral.node.fencing``); the token is written to disk only when it
changes.  One run measures, interleaved in rounds so that a drift of the
machine's load weighs on all alike:

* the door alone, in-process (``corral.node.dispatch.run_call``, the real
  handler, no network): the same trivial call that changes the node
  (``test_impexp_gate(False)``) with the check (the token in force) and
  without it (a node context without membership keeps no token): per-call
  p50 in µs, and the ratio;
* the same call over HTTPS to a real corral-noded (mutual TLS, a kept-alive
  connection) with the token in force, beside a trivial query that is never
  checked (``version()``): round trip p50 in µs, and the ratio;
* a token change: a call with a new token each time, so the token is written
  (atomically, the file and its directory synced) before the call goes on:
  p50 in ms.

The figure with a target is the steady-state overhead: the door's added
time as a share of the HTTPS round trip, at most 1 %.  Ganeti has no fencing
of node calls to compare with.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import Figure, arg_parser, median, percentile, write_results
from corral.node.context import NodeContext
from corral.node.dispatch import run_call
from corral.node.join_server import Membership
from corral.paths import Paths
from corral.rpc.calls_impexp import test_impexp_gate
from corral.rpc.calls_node import version
from corral.rpc.client import RpcClient
from corral.rpc.result import NodeAddress
from tests.helpers.cluster import unique_loopback
from tests.helpers.noded import make_node_root, start_noded

NAME = "node_fencing"
TOKEN = 7
GATE_OPEN = json.dumps([False]).encode()


async def p50_us(count: int, call: Callable[[], Awaitable[object]]) -> float:
    """The p50, in µs, of ``count`` calls (after a few warm-up calls)."""
    for _ in range(10):
        await call()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1e6)
    return percentile(times, 50)


async def door(paths: Paths, count: int) -> tuple[float, float]:
    """p50 of the door with the check and without it, in µs."""
    checked = NodeContext(paths, "127.0.0.1", 0, membership=Membership(paths))
    bare = dataclasses.replace(checked, membership=None)

    async def call(ctx: NodeContext) -> None:
        reply = await run_call(ctx, test_impexp_gate.name, GATE_OPEN, TOKEN)
        assert reply.status == 200, reply.body

    with_check = await p50_us(count, lambda: call(checked))
    without = await p50_us(count, lambda: call(bare))
    return with_check, without


async def over_https(rpc: RpcClient, node: NodeAddress, count: int) -> tuple[float, float]:
    """p50 round trips, in µs: the checked call, and the query never checked."""
    checked = await p50_us(count, lambda: rpc.run(node, test_impexp_gate(False)))
    query = await p50_us(count, lambda: rpc.run(node, version()))
    return checked, query


async def token_changes(paths: Paths, count: int) -> float:
    """p50, in ms, of a call whose token is new (written before it goes on)."""
    ctx = NodeContext(paths, "127.0.0.1", 0, membership=Membership(paths))
    tokens = iter(range(TOKEN + 1, TOKEN + 100 + count))

    async def call() -> None:
        reply = await run_call(ctx, test_impexp_gate.name, GATE_OPEN, next(tokens))
        assert reply.status == 200, reply.body

    return await p50_us(count, call) / 1000


async def one_run(paths: Paths, rpc: RpcClient, node: NodeAddress, count: int) -> dict[str, float]:
    """One round: each measurement once, in the same order every round."""
    with_check, without = await door(paths, count)
    checked, query = await over_https(rpc, node, count)
    return {
        "door_checked_us": with_check,
        "door_bare_us": without,
        "https_checked_us": checked,
        "https_query_us": query,
        "token_change_ms": await token_changes(paths, max(count // 10, 20)),
    }


async def run_all(root: Path, runs: int, count: int) -> list[dict[str, float]]:
    address = unique_loopback()
    served = make_node_root(root / "served", node_ip=address)
    noded = start_noded(served, address)
    try:
        async with noded.client() as rpc:
            rpc.fence = TOKEN
            node = NodeAddress("node1", address)
            await rpc.run(node, test_impexp_gate(False))  # the token in force from now on
            results = []
            for index in range(runs):
                # The in-process door on a root of its own (its token file apart).
                door_root = make_node_root(root / f"door{index}")
                results.append(await one_run(door_root, rpc, node, count))
            return results
    finally:
        noded.stop()


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=5)
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fencing-") as tmp:
        runs = asyncio.run(run_all(Path(tmp), args.runs, args.calls))
    share = Figure(
        "steady_overhead_share",
        "the check's added time per call / HTTPS round trip (token in force)",
        "%",
        1,
        "max",
        "no fencing",
    )
    share.runs = [
        100 * (r["door_checked_us"] - r["door_bare_us"]) / r["https_checked_us"] for r in runs
    ]
    figures = [
        share,
        Figure("door_checked_us", "door + handler, checked (in-process)", "µs", 0, "min", ""),
        Figure("door_bare_us", "door + handler, no check (in-process)", "µs", 0, "min", ""),
        Figure("door_ratio", "checked / unchecked door", "x", 0, "min", ""),
        Figure("https_checked_us", "HTTPS round trip, checked call", "µs", 0, "min", ""),
        Figure("https_query_us", "HTTPS round trip, query (never checked)", "µs", 0, "min", ""),
        Figure("https_ratio", "checked call / query, HTTPS", "x", 0, "min", ""),
        Figure("token_change_ms", "a call with a new token (written, synced)", "ms", 0, "min", ""),
    ]
    for figure in figures[1:]:
        if figure.key in runs[0]:
            figure.runs = [r[figure.key] for r in runs]
    figures[3].runs = [r["door_checked_us"] / r["door_bare_us"] for r in runs]
    figures[6].runs = [r["https_checked_us"] / r["https_query_us"] for r in runs]
    share.notes = f"median of {args.runs} runs of {args.calls} calls per measurement"
    write_results(NAME, figures, {"runs": args.runs, "calls": args.calls})
    added = median(figures[1].runs) - median(figures[2].runs)
    print(f"The check adds {added:.2f} µs per call (median of the runs' p50s)")


if __name__ == "__main__":
    main()
