"""Killing a mirrored instance's primary node, over and over (issue 26).

Three kvm nodes, each in a network namespace of its own (real noded, masterd
on node1, QEMU under TCG, the copies linked by NBD over TLS between the
namespaces).  A guest writes a counter to its mirrored disk, each value
flushed before it prints it.  Each run kills everything of its primary node
(every process in the namespace), fails the instance over to its secondary
(the dead node marked offline, as Ganeti's procedure has it), and reads the
counter the guest finds when it boots there: it must be at least the last
value printed before the kill.  The node then comes back and its copy is
resynced, and the next run kills the other node
(tests/helpers/mirrored_netns.py).  The figure is the acknowledged writes
lost in a run (target: none in any run); the time from the kill to the
guest's first write on the other node is beside.

    .venv/bin/python -m bench.bench_mirrored_kill_primary --runs 20
"""

from __future__ import annotations

from bench.common import Figure, arg_parser, median, write_results
from tests.helpers.mirrored_netns import kill_primary_once, kvm_netns_bed


def main() -> None:
    args = arg_parser(__doc__ or "", runs=20).parse_args()
    lost = Figure(
        "lost_writes", "Acknowledged writes lost, primary node killed", "writes", 0, "max",
        "DRBD protocol C: none",
    )  # fmt: skip
    outcomes = []
    with kvm_netns_bed("bkillp") as net:
        nodes = [node.name for node in net.bed.nodes]
        net.add_writer("w1", nodes[1], nodes[2])
        for _ in range(args.runs):
            outcome = kill_primary_once(net, "w1")
            outcomes.append(outcome)
            lost.runs.append(max(0, outcome.acknowledged - outcome.read_back))
    write_results(
        "mirrored_kill_primary",
        [lost],
        {"runs": args.runs, "nodes": 3},
        {
            "runs_losing_writes": sum(1 for value in lost.runs if value),
            "acknowledged": [o.acknowledged for o in outcomes],
            "read_back": [o.read_back for o in outcomes],
            "killed": [o.killed for o in outcomes],
            "down_seconds": [round(o.down_seconds, 2) for o in outcomes],
            "down_seconds_median": round(median([o.down_seconds for o in outcomes]), 2),
        },
    )


if __name__ == "__main__":
    main()
