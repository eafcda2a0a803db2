"""Faults of the master on nodes in network namespaces, run again and again:
nothing acknowledged lost, linearizable, every try of a deposed master refused.

The bed: five nodes, each in a network namespace of its own, three of them
master candidates with etcd members, the stores moved into etcd, masterd
standing by on the other candidates, a 3 s lease
(``tests/helpers/netns_etcd.py``).  Clients on the host as in
``tests/helpers/fault_clients.py``: three write and read a shared register,
two submit tag jobs and wait for them, through whichever candidate leads,
every call recorded.

Each run: 30 calls, then one fault, the five kinds in turn: kill -9 of the
master's masterd, noded and etcd member together (started again after);
SIGSTOP of its masterd past the lease (SIGCONT after); its veth down (up
after); nftables in its namespace dropping its packets to the other nodes,
then the other nodes' packets to it (healed after).  Each fault lasts until
another node leads and 30 more calls end; the next run starts once the
master it hit stands by and every etcd member serves.

After the runs: the register's whole history must be linearizable, every
acknowledged job known and every tag job seen to succeed have its tag; the
daemons stop, and the nodes' logs must show no two masters' fence windows
overlapping (tests/helpers/fence_windows.py).

Figures: runs without a lost acknowledged change, with a linearizable
history and apart fence windows (target: all of them); the share of the
deposed masters' tries (writes etcd refused, node calls they did not send,
node calls the nodes refused, node calls let in after their successor's
first) that were refused (target: 100 %); the median seconds from a fault
to another node leading.  Ganeti 3.0.2: no automatic failover, no fencing.

    .venv/bin/python -m bench.bench_netns_faults --runs 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.common import Figure, arg_parser, median, write_results
from tests.helpers.fault_clients import LEASE_TTL, Clients, outcome, wait_progress
from tests.helpers.netns_etcd import FAULTS, fault, fencing, netns_etcd_bed

NAME = "netns_faults"
CALLS = 30
NO_GANETI = "no automatic failover, no fencing"


def main() -> None:
    args = arg_parser(__doc__ or NAME, runs=20).parse_args()
    kinds = list(FAULTS)
    taken: dict[str, list[float]] = {kind: [] for kind in kinds}
    with (
        tempfile.TemporaryDirectory(prefix=f"corral-{NAME}-") as tmp,
        netns_etcd_bed(Path(tmp)) as net,
    ):
        clients = Clients(net)
        clients.start()
        try:
            for run in range(args.runs):
                wait_progress(clients, CALLS)
                kind = kinds[run % len(kinds)]
                victim, seconds = fault(net, clients, kind, CALLS)
                taken[kind].append(seconds)
                print(f"run {run + 1}: {kind} of {victim}, another master after {seconds:.2f} s")
            wait_progress(clients, CALLS)
        finally:
            clients.finish()
        found = outcome(net, clients)
        fences = fencing(net)
    print(fences, flush=True)
    calls = len(clients.history.operations())
    clean = Figure(
        "runs_without_loss",
        "Fault runs with nothing acknowledged lost, a linearizable history and fence"
        f" windows apart ({calls} calls)",
        "runs",
        args.runs,
        "min",
        NO_GANETI,
    )
    clean.runs = [float(args.runs if found.ok and fences.windows else 0)]
    clean.notes = (
        f"{found.verdict}; {found.tags_done} tag jobs seen succeed, lost: {found.tags_lost};"
        f" acknowledged jobs unknown to the last master: {found.jobs_unknown}, with another"
        f" final status than a client saw: {found.jobs_changed}; {fences}"
    )
    refused = fences.writes_refused + fences.calls_not_sent + fences.windows.refused
    late = len(fences.windows.late)
    share = Figure(
        "deposed_tries_refused_pct",
        "Tries of deposed masters refused (etcd writes, node calls not sent or refused)",
        "%",
        100,
        "min",
        NO_GANETI,
    )
    share.runs = [100.0 * refused / (refused + late) if refused + late else 100.0]
    share.notes = f"{refused} refused, {late} node windows let calls in after a successor's first"
    to_master = Figure(
        "fault_to_new_master_s",
        "A fault of the master to another node leading (every kind)",
        "s",
        LEASE_TTL + 4,
        "max",
        NO_GANETI,
    )
    to_master.runs = [s for kind in kinds for s in taken[kind]]
    medians = {f"median_{kind}_s": median(taken[kind]) for kind in kinds if taken[kind]}
    to_master.notes = ", ".join(f"{k}: {v:.2f}" for k, v in medians.items())
    write_results(
        NAME,
        [clean, share, to_master],
        {"runs": args.runs, "lease_ttl": LEASE_TTL, "calls_between_faults": CALLS},
        medians,
    )


if __name__ == "__main__":
    main()
