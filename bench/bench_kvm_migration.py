"""Migration of a kvm guest (issue 11): Corral against QEMU by hand.

A two-node cluster on loopback (real masterd and noded on each node, the
second joined with a token), kvm its only hypervisor, the test guest of
``tests/helpers/guest.py`` (direct kernel boot, busybox initramfs, TCG),
256 MiB, no disk (shared storage: nothing to copy), no NIC, idle at its shell.

* **Corral** (per run): a fresh ``<venv>/bin/python -m corral.cli.gnt_instance
  migrate -f -n OTHER GUEST`` from fork to exit (the whole job: checks, the
  target's QEMU, TLS, the transfer, the master's status polls, finalize),
  alternating direction.
* **By hand** (per run, the same guest's argv as Corral ran it, read from the
  runtime file, pidfile and sockets moved): a source QEMU booted to the same
  shell, then timed from forking the target QEMU (``-incoming defer`` and the
  same ``tls-creds-x509`` object with the nodes' certificates) through
  ``migrate-incoming``, the source's TLS credentials, capabilities and
  parameters (Ganeti's ``migration_bandwidth`` and ``migration_downtime``
  defaults, as Corral sets them), ``stop`` (a TCG guest is migrated paused:
  see bench_kvm_tcg_migration), ``migrate``, the source's MIGRATION
  ``completed`` event, to ``cont`` on the target.

The figure is the median of the per-run ratios Corral / by hand (target
≤ 1.2).  Ganeti 3.0.2: not measured (no Ganeti kvm cluster on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from qemu.qmp import EventListener, QMPClient

from bench.common import (
    Figure,
    against_by_hand,
    arg_parser,
    ensure_bytecode,
    time_gnt,
    write_results,
)
from corral.hvparams import DEFAULTS
from corral.node import qemu_tls
from corral.node.hypervisor.kvm import migration_tls as tls
from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.kvm_guest import cluster_hvparams, kill_leftovers
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded
from tests.helpers.osdef import make_os

NAME = "kvm_migration"
GUEST = "mig1"
MEMORY = 256
READY = "CORRAL-GUEST-READY"
WAIT = 300.0
NODE2 = "node2.example.com"


@contextlib.contextmanager
def two_nodes() -> Iterator[tuple[TestCluster, Noded]]:
    root = Path(tempfile.mkdtemp(prefix="kmb", dir="/tmp"))  # short: socket paths
    run_dirs: list[Path] = []
    try:
        with running_cluster(
            root / "n1", "--enabled-hypervisors=kvm", "-H", f"kvm:{cluster_hvparams()}"
        ) as cl:
            run_dirs.append(cl.paths.run_dir)
            node2 = add_node(cl, root / "n2", NODE2)
            run_dirs.append(node2.paths.run_dir)
            try:
                for paths in (cl.paths, node2.paths):
                    make_os(paths, "tiny")
                yield cl, node2
            finally:
                node2.stop()
    finally:
        for run_dir in run_dirs:
            kill_leftovers(run_dir)
        shutil.rmtree(root, ignore_errors=True)


def wait_line(path: Path, text: str) -> None:
    """Read the serial socket ``path`` until ``text`` shows."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(WAIT)
        sock.connect(str(path))
        seen = b""
        while text.encode() not in seen:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError(f"{path} closed before {text}")
            seen += data


def gnt(cl: TestCluster, *args: str) -> None:
    result = cl.gnt(*args, timeout=WAIT)
    if result.rc != 0:
        raise RuntimeError(f"gnt-{' '.join(args)} failed: {result.stderr}")


# By hand
def _moved(word: str, moves: dict[str, str]) -> str:
    for old, new in moves.items():
        word = word.replace(old, new)
    return word


async def _qmp(path: Path) -> QMPClient:
    client = QMPClient(path.name)
    await client.connect(str(path))
    return client


async def _daemonized(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"QEMU failed: {out.decode(errors='replace')}")


@contextlib.asynccontextmanager
async def by_hand_source(argv: list[str], hand: Path) -> AsyncIterator[QMPClient]:
    """The guest started by hand, booted to its shell."""
    hand.mkdir(parents=True)
    await _daemonized(argv)
    client = await _qmp(hand / "qmp")
    try:
        await client.execute("cont")
        await asyncio.to_thread(wait_line, hand / "serial", READY)
        yield client
    finally:
        with contextlib.suppress(Exception):
            await client.execute("quit")
        with contextlib.suppress(Exception):
            await client.disconnect()


async def time_by_hand(
    argv: list[str], layout: Layout, hands: tuple[Path, Path], paths: tuple[Any, Any]
) -> float:
    """Seconds of one migration between two QEMUs started by hand."""
    source_dir, target_dir = hands
    async with by_hand_source(_with(argv, layout, source_dir), source_dir) as source:
        creds_dst, creds_src = target_dir / "creds", source_dir / "creds"
        target_dir.mkdir()
        qemu_tls.write_creds(paths[1], creds_dst, qemu_tls.ENDPOINT_SERVER)
        qemu_tls.write_creds(paths[0], creds_src, qemu_tls.ENDPOINT_CLIENT)
        target_argv = [
            *_with(argv, layout, target_dir),
            "-object", tls.object_option(str(creds_dst), qemu_tls.ENDPOINT_SERVER),
            "-incoming", "defer",
        ]  # fmt: skip
        hvp = DEFAULTS["kvm"]
        events = EventListener(("MIGRATION",))
        source.register_listener(events)
        start = time.perf_counter()
        await _daemonized(target_argv)
        target = await _qmp(target_dir / "qmp")
        try:
            caps = {"capabilities": [{"capability": "events", "state": True}]}
            await target.execute("migrate-set-capabilities", caps)
            await target.execute("migrate-set-parameters", {"tls-creds": tls.CREDS_ID})
            await target.execute("migrate-incoming", {"uri": "tcp:127.0.0.1:0"})
            incoming: Any = await target.execute("query-migrate")
            port = incoming["socket-address"][0]["port"]
            await source.execute("object-add", tls.object_props(str(creds_src), "client"))
            await source.execute("migrate-set-capabilities", caps)
            await source.execute(
                "migrate-set-parameters",
                {
                    "max-bandwidth": int(hvp["migration_bandwidth"]) * 2**20,
                    "downtime-limit": int(hvp["migration_downtime"]),
                    "tls-creds": tls.CREDS_ID,
                    "tls-hostname": qemu_tls.node_identity(paths[1]),
                },
            )
            # Paused, as Corral migrates a TCG guest (its live migration loses writes).
            await source.execute("stop")
            await source.execute("migrate", {"uri": f"tcp:127.0.0.1:{port}"})
            async for event in events:
                data: Any = event["data"]
                status = data["status"]
                if status in ("failed", "cancelled"):
                    raise RuntimeError(f"the migration by hand {status}")
                if status == "completed":
                    break
            target_events = EventListener(("MIGRATION",))
            target.register_listener(target_events)
            state: Any = await target.execute("query-migrate")
            if state["status"] != "completed":
                async for event in target_events:
                    done: Any = event["data"]
                    if done["status"] == "completed":
                        break
            await target.execute("cont")
            elapsed = time.perf_counter() - start
        finally:
            with contextlib.suppress(Exception):
                await target.execute("quit")
            with contextlib.suppress(Exception):
                await target.disconnect()
    for directory in hands:
        shutil.rmtree(directory, ignore_errors=True)
    return elapsed


def _with(argv: list[str], layout: Layout, hand: Path) -> list[str]:
    moves = {
        str(layout.pidfile(GUEST)): str(hand / "pid"),
        str(layout.qmp(GUEST)): str(hand / "qmp"),
        str(layout.serial(GUEST)): str(hand / "serial"),
    }
    out: list[str] = []
    words = iter(argv)
    for word in words:
        if word in ("-incoming", "-object"):
            next(words)  # a received guest's: set again for the target only
            continue
        out.append(_moved(word, moves))
    return out


def one_round(run: int, cl: TestCluster, node2: Noded, hands: Path) -> tuple[float, float]:
    """(Corral's seconds, by hand's seconds) of run ``run``; the order alternates."""
    nodes = [(cl.node_name, cl.paths), (NODE2, node2.paths)]
    where = nodes[run % 2]
    other = nodes[1 - run % 2]
    layout = Layout(where[1].run_dir)
    runtime = layout.read_runtime(GUEST)
    if runtime is None:
        raise RuntimeError(f"{GUEST} is not running on {where[0]}")
    pair = (hands / f"s{run}", hands / f"t{run}")

    def corral() -> float:
        return time_gnt(cl, "instance", "migrate", "-f", "-n", other[0], GUEST)

    def by_hand() -> float:
        return asyncio.run(time_by_hand(runtime.argv, layout, pair, (where[1], other[1])))

    if run % 2:
        mine, theirs = corral(), by_hand()
    else:
        theirs, mine = by_hand(), corral()
    return mine, theirs


def migration(args: argparse.Namespace) -> tuple[Figure, dict[str, Any]]:
    figure = Figure(
        "kvm_migration_ratio",
        f"gnt-instance migrate of a {MEMORY} MiB guest / QMP migration by hand",
        "x",
        1.2,
        "max",
        "not measured",
    )
    samples = []
    with two_nodes() as (cl, node2):
        gnt(cl, "instance", "add", "--no-name-check", "--no-ip-check", "-t", "diskless",
            "-o", "tiny+default", "--no-nics", "-B", f"memory={MEMORY}", "-n", cl.node_name,
            GUEST)  # fmt: skip
        wait_line(Layout(cl.paths.run_dir).serial(GUEST), READY)
        hands = Path(tempfile.mkdtemp(prefix="kmh", dir="/tmp"))
        try:
            samples = [one_round(run, cl, node2, hands) for run in range(args.runs)]
        finally:
            shutil.rmtree(hands, ignore_errors=True)
    corral, by_hand = (list(c) for c in zip(*samples, strict=True))
    return figure, against_by_hand(figure, corral, by_hand)


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    args = parser.parse_args()
    ensure_bytecode()
    load = [round(x, 2) for x in os.getloadavg()]
    figure, extra = migration(args)
    params = {"runs": args.runs, "memory_mib": MEMORY}
    write_results(NAME, [figure], params, {"loadavg_at_start": load, **extra})


if __name__ == "__main__":
    main()
