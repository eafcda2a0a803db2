"""A stock Debian 12 cloud guest's first boot to its user-data's marker (issue
23), under Corral against the same guest and the same config drive started by
hand with QEMU.

The guest is ``tests/helpers/cloud_guest.py``'s image (Debian's ``cloud-init``,
nothing of Corral's inside), 512 MiB, one NIC on a bridge with a static
address, configured from its ``cidata`` config drive (NoCloud); it boots its
own kernel and initramfs under TCG.  The cluster lives in a network namespace
of its own (``cloud_cluster``).

* **Corral**: from just before a fresh ``<venv>/bin/python -m
  corral.cli.gnt_instance startup INSTANCE`` is forked to the line
  ``CORRAL-CLOUD-INIT <hostname> 42`` on the guest's serial console (cloud-init's
  last stage ran the user-data; hostname, address and SSH keys were set before).
* **By hand**: QEMU with the argv Corral used (read from the instance's
  runtime file), its pidfile and QMP/serial sockets moved to a directory of its
  own, the disk a copy of the instance's, the config drive a copy of the ISO
  Corral built, the tap opened by name (a tap of the bench's own on the same
  bridge) instead of the fd noded passes; from just before QEMU is forked,
  through QMP ``cont`` (what noded does), to the same line.

Each run is a *first* boot: before Corral's, ``gnt-instance reinstall``
writes the image again (the instance id is the same, so cloud-init would
otherwise skip its per-instance work); the by-hand disk is a fresh copy of the
freshly written disk, synced as noded syncs its write (no writeback of it
runs under a boot).  Consoles are caught the moment QEMU creates their
sockets (``bench/kvm_serial.py``).  A warm-up start is dropped; the order
alternates between runs; one guest runs at a time.  The figure is the median
of the per-run ratios Corral / by hand (target ≤ 1.10).

Ganeti 3.0.2: not measured (its metad serves no datasource cloud-init reads,
and it has no config drive).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_kvm import by_hand_argv, kill_by_hand, time_by_hand
from bench.common import (
    PYTHON,
    Figure,
    against_by_hand,
    arg_parser,
    ensure_bytecode,
    write_results,
)
from bench.kvm_serial import SocketWatch
from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cloud_guest import CloudCluster, cloud_cluster
from tests.helpers.instances import NO_CHECKS

NAME = "cloudinit_boot"
GUEST = "cib.example.com"
MARKER = "CORRAL-CLOUD-INIT cib 42"
SUBNET = "10.213.24"
WAIT = 900.0  # a TCG first boot on a busy machine
TAP = "cibhand0"  # the by-hand guest's, in the cluster's namespace


def gnt(cc: CloudCluster, *args: str) -> None:
    result = cc.cl.gnt(*args, timeout=WAIT)
    if result.rc != 0:
        raise RuntimeError(f"gnt-{' '.join(args)} failed: {result.stderr}")


def reinstall(cc: CloudCluster) -> None:
    """The image written onto the (stopped) instance's disk again: a first boot next."""
    gnt(cc, "instance", "reinstall", "-f", GUEST)


def disk_path(cc: CloudCluster) -> Path:
    runtime = Layout(cc.cl.paths.run_dir).read_runtime(GUEST)
    if runtime is None:
        raise RuntimeError(f"{GUEST} has no runtime file while running")
    (found,) = re.findall(r"file=([^,]+),format=raw,if=none,id=disk0", " ".join(runtime.argv))
    return Path(found)


def time_corral(cc: CloudCluster, watch: SocketWatch) -> float:
    """Seconds from forking ``gnt-instance startup`` to the marker; the guest
    is stopped and its disk written again after."""
    session = watch.expect(GUEST)
    start = time.perf_counter()
    proc = subprocess.run(
        [PYTHON, "-m", "corral.cli.gnt_instance", "startup", GUEST],
        env=cc.cl.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"gnt-instance startup failed: {proc.stderr.decode()}")
    marker = session.wait_for(MARKER, WAIT) - start
    gnt(cc, "instance", "shutdown", "--timeout=0", GUEST)
    session.wait_closed(WAIT)
    reinstall(cc)
    return marker


def warm_up(cc: CloudCluster, watch: SocketWatch, hand: Path) -> list[str]:
    """One start (dropped): copies its config drive and a fresh disk into
    ``hand`` and returns the argv Corral ran QEMU with, made the by-hand one."""
    layout = Layout(cc.cl.paths.run_dir)
    session = watch.expect(GUEST)
    gnt(cc, "instance", "startup", GUEST)
    runtime = layout.read_runtime(GUEST)
    if runtime is None:
        raise RuntimeError(f"{GUEST} has no runtime file while running")
    shutil.copyfile(layout.config_drive(GUEST), hand / "cidata.iso")
    disk = disk_path(cc)
    session.wait_for(MARKER, WAIT)
    gnt(cc, "instance", "shutdown", "--timeout=0", GUEST)
    session.wait_closed(WAIT)
    reinstall(cc)
    copy(disk, hand / "pristine.img")
    argv = by_hand_argv(runtime.argv, layout, GUEST, hand)
    return _own_files(argv, layout, disk, hand)


def _own_files(argv: list[str], layout: Layout, disk: Path, hand: Path) -> list[str]:
    """The by-hand argv on its own disk copy, drive copy and tap."""
    moves = (
        (re.escape(f"file={disk},"), f"file={hand / 'disk.img'},"),
        (re.escape(f"file={layout.config_drive(GUEST)},"), f"file={hand / 'cidata.iso'},"),
        (r"^(tap,id=netdev0),fd=\d+", rf"\1,ifname={TAP},script=no,downscript=no"),
    )
    moved = list(argv)
    for pattern, replacement in moves:
        found = [i for i, word in enumerate(moved) if re.search(pattern, word)]
        if len(found) != 1:
            raise RuntimeError(f"{pattern!r} is not once in Corral's argv: {argv}")
        moved[found[0]] = re.sub(pattern, replacement, moved[found[0]])
    return moved


def copy(source: Path, target: Path) -> None:
    """A sparse copy, on disk before it is used: as durable as the disk noded
    wrote (it syncs), so no writeback of it runs under the next boot."""
    subprocess.run(["cp", "--sparse=always", str(source), str(target)], check=True)
    subprocess.run(["sync", "--data", str(target)], check=True)


def time_hand(cc: CloudCluster, argv: list[str], watch: SocketWatch, hand: Path) -> float:
    """Seconds from forking QEMU by hand to the marker, on a fresh disk copy."""
    copy(hand / "pristine.img", hand / "disk.img")
    # In the namespace: its tap is there (QEMU's children would be too).
    return cc.ns.call(asyncio.run, time_by_hand(argv, watch, GUEST, hand, MARKER, WAIT))


def make_tap(cc: CloudCluster) -> None:
    for command in (
        ["ip", "tuntap", "add", "dev", TAP, "mode", "tap", "vnet_hdr"],
        ["ip", "link", "set", TAP, "master", cc.bridge, "up"],
    ):
        cc.ns.call(subprocess.run, command, check=True, capture_output=True)


def boot(args: argparse.Namespace) -> tuple[Figure, dict[str, Any]]:
    figure = Figure(
        "cloudinit_boot_ratio",
        "first boot to the user-data marker, Corral / QEMU by hand",
        "x",
        1.10,
        "max",
        "not measured",
    )
    corral: list[float] = []
    by_hand: list[float] = []
    with cloud_cluster("cib", SUBNET) as cc:
        options = cc.add_options(f"{SUBNET}.10", "--no-start", osparams="config-drive=yes")
        gnt(cc, "instance", "add", *NO_CHECKS, *options, GUEST)
        make_tap(cc)
        layout = Layout(cc.cl.paths.run_dir)
        layout.ensure()  # noded makes it at its first start: watched before that
        hand = Path(tempfile.mkdtemp(prefix="cih", dir="/tmp"))
        watches = (SocketWatch(layout.base / "ctrl"), SocketWatch(hand))
        try:
            argv = warm_up(cc, watches[0], hand)
            for run in range(args.runs):
                if run % 2:
                    corral.append(time_corral(cc, watches[0]))
                by_hand.append(time_hand(cc, argv, watches[1], hand))
                if not run % 2:
                    corral.append(time_corral(cc, watches[0]))
                print(
                    f"run {run + 1}: Corral {corral[-1]:.1f} s, by hand {by_hand[-1]:.1f} s,"
                    f" ratio {corral[-1] / by_hand[-1]:.3f}",
                    flush=True,
                )
        finally:
            for watch in watches:
                watch.close()
            kill_by_hand(hand)
            shutil.rmtree(hand, ignore_errors=True)
    return figure, {**against_by_hand(figure, corral, by_hand, 2), "argv_by_hand": argv}


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0], runs=3)
    args = parser.parse_args()
    ensure_bytecode()
    figure, extra = boot(args)
    write_results(NAME, [figure], {"runs": args.runs}, extra)


if __name__ == "__main__":
    main()
