"""How long a guest stands still in a migration: a mirrored disk beside a
``file`` disk (issue 26), in the same run.

A two-node kvm cluster on loopback (real noded, masterd, QEMU under TCG).
Two guests, 128 MiB, each writing a counter to its disk, each value
flushed before it prints it, about 20 a second: ``wm`` on a mirrored disk
(node1 and node2), ``wf`` on a file disk.  Each run migrates each guest to
the other node: ``wm`` to its secondary (its copy there is current; after
the switch-over the copies change roles), ``wf`` with ``-n`` (Corral copies
its disk to the target before the memory).  The downtime is what the guest
sees: from the last value the source's console printed to the first the
target's printed (both consoles caught by inotify the moment QEMU creates
them).  Under TCG a migration is paused for the whole memory transfer
(``bench_kvm_tcg_migration``), so both figures include it.

    .venv/bin/python -m bench.bench_mirrored_migration --runs 5
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from bench.common import Figure, arg_parser, median, write_results
from bench.kvm_serial import Session, SocketWatch
from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok, query
from tests.helpers.kvm_pair import MIRRORED, NODE1, NODE2, kvm_two_nodes
from tests.helpers.tiny_os import TINY_OS
from tests.helpers.writer_guest import WRITER_ARGS

WROTE = "CORRAL-GUEST-WROTE"
GUESTS = {"wm": ["-t", "mirrored", "-n", f"{NODE1}:{NODE2}"], "wf": ["-t", "file", "-n", NODE1]}


@contextmanager
def bed() -> Iterator[tuple[TestCluster, dict[str, SocketWatch]]]:
    """The cluster, and a watch on each node's console directory."""
    with kvm_two_nodes("bmigr", WRITER_ARGS, MIRRORED) as (cl, node2), ExitStack() as stack:
        watches = {}
        for node, paths in ((NODE1, cl.paths), (NODE2, node2.paths)):
            directory = Layout(paths.run_dir).serial("x").parent
            directory.mkdir(parents=True, exist_ok=True)
            watch = SocketWatch(directory)
            stack.callback(watch.close)
            watches[node] = watch
        yield cl, watches


def _written(session: Session) -> list[float]:
    """When each value the guest printed arrived."""
    return [at for at, line in list(session.lines) if WROTE in line]


def migrate_once(
    cl: TestCluster, watches: dict[str, SocketWatch], name: str, source: Session
) -> tuple[float, Session]:
    """Migrate ``name`` to its other node; the downtime, and the target's console."""
    pnode = query(cl, ["pnode"], name)[name]["pnode"]
    target = NODE2 if pnode == NODE1 else NODE1
    arrived = watches[target].expect(name)
    written = len(_written(source))
    while len(_written(source)) < written + 20:  # a second of steady writing
        source.wait_for(WROTE)
        time.sleep(0.05)
    argv = ["instance", "migrate", "-f", name]
    ok(cl.gnt(*argv if name == "wm" else [*argv[:-1], "-n", target, name]))
    source.wait_closed()
    arrived.wait_for(WROTE, timeout=60)
    return _written(arrived)[0] - _written(source)[-1], arrived


def main() -> None:
    args = arg_parser(__doc__ or "").parse_args()
    ratio = Figure(
        "downtime_ratio", "Migration downtime, mirrored / file disk", "x", 1.0, "max",
        "n/a (no Ganeti kvm cluster here)",
    )  # fmt: skip
    downtimes: dict[str, list[float]] = {name: [] for name in GUESTS}
    with bed() as (cl, watches):
        consoles = {}
        for name, placement in GUESTS.items():
            consoles[name] = watches[NODE1].expect(name)
            ok(
                add(
                    cl, name, *placement, "--disk=0:size=16m", "-o", f"{TINY_OS}+default",
                    "--no-install", "--no-nics", "-B", "memory=128",
                )
            )  # fmt: skip
        for _ in range(args.runs):
            for name in GUESTS:
                downtime, consoles[name] = migrate_once(cl, watches, name, consoles[name])
                downtimes[name].append(downtime)
            ratio.runs.append(downtimes["wm"][-1] / downtimes["wf"][-1])
        for name in GUESTS:
            assert not any("WRITE-FAILED" in line for _, line in consoles[name].lines)
    write_results(
        "mirrored_migration",
        [ratio],
        {"runs": args.runs, "memory_mib": 128},
        {
            "mirrored_downtime_s": [round(d, 3) for d in downtimes["wm"]],
            "file_downtime_s": [round(d, 3) for d in downtimes["wf"]],
            "mirrored_downtime_median_s": round(median(downtimes["wm"]), 3),
            "file_downtime_median_s": round(median(downtimes["wf"]), 3),
        },
    )


if __name__ == "__main__":
    main()
