"""Live migration of kvm guests, in Ganeti's steps (see the base class).

The target starts the same guest (the source's recorded description and
machine, its own taps, uid and chroot) with ``-incoming defer`` and listens
on a port it chooses; the source sends memory (and, for disks only it has,
first mirrors them into the target's NBD exports) over QEMU's native TLS
with the nodes' certificates.  Progress follows QMP's events (MIGRATION,
BLOCK_JOB_*), never a polling loop: the master's status query reads what the
events left, plus QEMU's RAM figures.  The target's guest stays paused
until the master finalizes it; until then a marker file says it is only
incoming, and a restarted noded removes such a guest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qemu.qmp import EventListener

from corral import constants as C
from corral import errors
from corral.node import netdev, qemu_tls
from corral.node.hypervisor.kvm import migration_fd
from corral.node.hypervisor.kvm import migration_tls as tls
from corral.node.hypervisor.kvm.monitor import Monitor
from corral.node.hypervisor.spec import STATE_RUNNING, DiskSpec, InstanceSpec

if TYPE_CHECKING:
    from corral.node.hypervisor.kvm.hypervisor import KvmHypervisor

log = logging.getLogger(__name__)

EVENTS = ("MIGRATION", "BLOCK_JOB_READY", "BLOCK_JOB_COMPLETED", "BLOCK_JOB_ERROR")
# QEMU's migration states as Ganeti's master knows them; the rest are "active".
STATUS_MAP = {
    "completed": C.HV_MIGRATION_COMPLETED,
    "failed": "failed",
    "cancelled": "cancelled",
}
_MIGRATION_CAPS_DELIM = ":"  # Ganeti's separator of migration_caps
_MIB = 1024 * 1024
_NBD_FD = "corral-nbd"
# The incoming side's final states; how long it may take to reach one once
# the source has sent everything.
_ENDED = ("completed", "failed", "cancelled", "none")
_INCOMING_END_TIMEOUT = 60.0


def _export(disk: DiskSpec) -> str:
    return f"disk{disk.index}"


def copied(spec: InstanceSpec) -> list[DiskSpec]:
    """The disks only the source has: copied through NBD before the memory
    (a mirrored disk's secondary, the target, has its own copy)."""
    return [d for d in spec.disks if not d.shared and d.mirror is None]


def linked(spec: InstanceSpec) -> bool:
    """Whether the guest has mirrored disks (on the target, linked to the
    source's copies once the source's guest is gone)."""
    return any(d.mirror is not None for d in spec.disks)


@dataclass
class Outgoing:
    """A migration this node (the source) sends."""

    was_running: bool
    jobs: list[str]
    status: str = "setup"
    error: str = ""
    listener: EventListener = field(default_factory=lambda: EventListener(EVENTS))
    task: asyncio.Task[None] | None = None
    namespaces: bool = False  # QEMU without a network: noded connects for it


class Migrations:
    """The migration steps of one node's :class:`KvmHypervisor`."""

    def __init__(self, hv: KvmHypervisor) -> None:
        self.hv = hv
        self.outgoing: dict[str, Outgoing] = {}
        # Guests in namespaces of their own: noded accepts their stream.
        self.receiving: dict[str, asyncio.Task[None]] = {}

    def _marker(self, name: str) -> Path:
        return self.hv.layout.base / "ctrl" / f"{name}.incoming"

    def _monitor(self, name: str) -> Monitor:
        monitor = self.hv.monitors.get(name)
        if monitor is None:
            raise errors.OpExecError(f"Instance {name} is not running")
        return monitor

    # Source: what the target needs
    async def info(self, spec: InstanceSpec) -> dict[str, Any]:
        """The description the guest runs with and its machine (Ganeti's
        runtime); ``not_live`` when it must not move while it runs."""
        self._monitor(spec.name)
        runtime = self.hv.layout.read_runtime(spec.name)
        if runtime is None:
            raise errors.OpExecError(f"Instance {spec.name} has no runtime file")
        info = {"spec": runtime.spec, "machine": _option(runtime.argv, "-machine")}
        if (_option(runtime.argv, "-accel") or "").split(",")[0] == "tcg":
            info["not_live"] = TCG_NOT_LIVE
        return info

    # Target: receive
    async def accept(self, spec: InstanceSpec, info: Any, address: str) -> dict[str, Any]:
        """Start the guest waiting for its state on ``address``; what the source
        needs to send it (the port, NBD exports, the name in our certificate)."""
        received = _received_spec(self.hv, spec, info)
        await asyncio.to_thread(_check_bridges, received)
        if spec.name in self.hv.monitors:
            raise errors.OpExecError(f"Can't accept instance {spec.name}, already running")
        self.hv.layout.ensure()
        self._marker(spec.name).touch(mode=0o600)
        try:
            return await self._receive(received, address)
        except BaseException:
            await migration_fd.stop(self.receiving.pop(spec.name, None))
            await self.hv.stop(spec.name, force=True)
            self._marker(spec.name).unlink(missing_ok=True)
            raise

    async def _receive(self, spec: InstanceSpec, address: str) -> dict[str, Any]:
        creds = self.hv.layout.base / "ctrl" / f"{spec.name}.migtls"
        await asyncio.to_thread(_fresh_creds, self.hv, creds)
        try:
            extra = ("-object", tls.object_option(str(creds), qemu_tls.ENDPOINT_SERVER))
            monitor = await self.hv.start_with(
                spec, True, (*extra, "-incoming", "defer"), binds=(creds,)
            )
        finally:
            await asyncio.to_thread(_remove_tree, creds)
        # Mirrored disks: the local copy, exported to the source until it is
        # done, is taken for writing only when the guest runs here.
        await _set_caps(monitor, spec, {"events": True, "late-block-activate": linked(spec)})
        await monitor.execute("migrate-set-parameters", {"tls-creds": tls.CREDS_ID})
        # Ganeti's migration_port: the port the target listens on (one incoming
        # migration at a time per node and address, as in Ganeti).
        port = int(spec.hvparams.get("migration_port") or 0)
        if spec.hvparams.get("use_namespaces"):
            listening = migration_fd.listen(address, port)
            port = int(listening.getsockname()[1])
            self.receiving[spec.name] = asyncio.create_task(
                migration_fd.receive(monitor, listening), name=f"kvm-receive-{spec.name}"
            )
        else:
            uri = f"tcp:{_uri_host(address)}:{port}"
            await monitor.execute("migrate-incoming", {"uri": uri})
            status = await monitor.execute("query-migrate")
            port = int(status["socket-address"][0]["port"])
        answer: dict[str, Any] = {
            "address": address,
            "port": port,
            "tls_hostname": qemu_tls.node_identity(self.hv.paths),
        }
        disks = copied(spec)
        if disks:
            answer["nbd_port"] = await _export_disks(monitor, address, disks)
        return answer

    async def finalize_dst(self, spec: InstanceSpec, success: bool) -> None:
        """Run the received guest, or drop it (never a guest that ran here before)."""
        marker = self._marker(spec.name)
        receiving = self.receiving.pop(spec.name, None)
        if success and receiving is not None:
            with contextlib.suppress(TimeoutError, errors.OpExecError):
                await asyncio.wait_for(asyncio.shield(receiving), _INCOMING_END_TIMEOUT)
        await migration_fd.stop(receiving)
        if not success:
            if marker.exists():
                await self.hv.stop(spec.name, force=True)
                marker.unlink(missing_ok=True)
            return
        monitor = self._monitor(spec.name)
        if marker.exists():
            status = await _incoming_end(monitor)
            if status != "completed":
                raise errors.OpExecError(
                    f"Instance {spec.name} was not received completely: migration {status}"
                )
        with contextlib.suppress(errors.OpExecError):
            await monitor.execute("nbd-server-stop")  # none when no disk was copied
        await _drop_creds(monitor)
        await self.hv.mirror_join(spec)
        await monitor.execute("cont")
        marker.unlink(missing_ok=True)

    async def resume(self) -> None:
        """At noded's start: a guest received only in part goes (its source
        still has it); one received completely stays, paused, for the
        master's ``gnt-instance migrate --cleanup`` (its source let it go)."""
        for name in self.hv.layout.names():
            if not self._marker(name).exists():
                continue
            monitor = self.hv.monitors.get(name)
            status = None
            if monitor is not None:
                with contextlib.suppress(errors.OpExecError):
                    status = (await monitor.execute("query-migrate")).get("status")
            if status == "completed":
                log.info("Instance %s was received completely; kept for a cleanup", name)
                continue
            log.info("Instance %s was being received when noded stopped; removing", name)
            await self.hv.stop(name, force=True)
            self._marker(name).unlink(missing_ok=True)

    # Source: send
    async def migrate(self, spec: InstanceSpec, live: bool, accepted: Mapping[str, Any]) -> None:
        """Start sending; returns once QEMU took the job (status follows events)."""
        if spec.name in self.outgoing:
            raise errors.OpExecError(f"Instance {spec.name} is being migrated already")
        monitor = self._monitor(spec.name)
        runtime = self.hv.layout.read_runtime(spec.name)
        if runtime is None:
            raise errors.OpExecError(f"Instance {spec.name} has no runtime file")
        running = InstanceSpec.from_wire(self.hv.paths, runtime.spec)
        disks = copied(running)
        out = Outgoing(monitor.state == STATE_RUNNING, [f"mig-{_export(d)}" for d in disks])
        out.namespaces = runtime.namespaces
        monitor.listen(out.listener)
        self.outgoing[spec.name] = out
        try:
            # Our QEMU's connections to the target, through the network rules.
            await self.hv.netrules.allow(spec.name, _links(accepted, bool(disks)))
            await _drop_creds(monitor)  # a received guest's, or a failed migration's
            shared = self.hv.layout.chroot(spec.name) if runtime.namespaces else None
            with tls.client_creds(self.hv.paths, runtime.pid, runtime.chroot, shared) as creds:
                await monitor.execute(
                    "object-add", tls.object_props(creds, qemu_tls.ENDPOINT_CLIENT)
                )
            caps = {"events": True, "pause-before-switchover": bool(disks)}
            await _set_caps(monitor, running, caps)
            await monitor.execute("migrate-set-parameters", _parameters(running, accepted))
            if not live:
                await monitor.execute("stop")
            if disks:
                await _start_mirrors(monitor, disks, accepted, out.namespaces)
        except BaseException as err:
            out.status, out.error = "failed", str(err)
            await self.hv.netrules.disallow(spec.name)
            raise
        out.task = asyncio.create_task(
            self._send(monitor, out, accepted), name=f"kvm-migrate-{spec.name}"
        )

    async def _send(self, monitor: Monitor, out: Outgoing, accepted: Mapping[str, Any]) -> None:
        """Mirrors ready, then the memory; the mirrors end while the guest is
        paused before the switch-over (nothing written after is lost)."""
        try:
            await _wait_events(out, "BLOCK_JOB_READY", out.jobs)
            address, port = str(accepted["address"]), int(accepted["port"])
            uri = f"tcp:{_uri_host(address)}:{port}"
            if out.namespaces:
                await migration_fd.connect(monitor, address, port, migration_fd.OUTGOING_FD)
                uri = f"fd:{migration_fd.OUTGOING_FD}"
            await monitor.execute("migrate", {"uri": uri})
            async for event in out.listener:
                status = _event_status(event)
                if status == "pre-switchover":
                    await self._switch_over(monitor, out)
                elif status in ("completed", "failed", "cancelled"):
                    out.status = status
                    return
                else:
                    out.status = status or out.status
        except errors.OpExecError as err:
            log.error("Migration of %s failed: %s", monitor.name, err)
            out.status, out.error = "failed", str(err)

    async def _switch_over(self, monitor: Monitor, out: Outgoing) -> None:
        for job in out.jobs:
            await monitor.execute("block-job-cancel", {"device": job})
        await _wait_events(out, "BLOCK_JOB_COMPLETED", out.jobs)
        await monitor.execute("migrate-continue", {"state": "pre-switchover"})

    async def status(self, spec: InstanceSpec) -> dict[str, Any]:
        """The source's view (Ganeti's statuses) with QEMU's RAM figures."""
        out = self.outgoing.get(spec.name)
        if out is None:
            return {"status": "failed", "info": "No migration of this instance"}
        monitor = self.hv.monitors.get(spec.name)
        if monitor is None and out.status not in STATUS_MAP:
            out.status, out.error = "failed", "QEMU exited during the migration"
        answer: dict[str, Any] = {"status": STATUS_MAP.get(out.status, C.HV_MIGRATION_ACTIVE)}
        if out.error:
            answer["info"] = out.error
        if monitor is not None and out.status not in STATUS_MAP:
            query = await monitor.execute("query-migrate")
            ram = query.get("ram") or {}
            if ram:
                answer["transferred_ram"] = int(ram.get("transferred", 0))
                answer["total_ram"] = int(ram.get("total", 0))
        return answer

    async def finalize_src(self, spec: InstanceSpec, success: bool) -> None:
        """Success: the guest lives on the target; stop ours.  Else keep it running."""
        out = self.outgoing.pop(spec.name, None)
        monitor = self.hv.monitors.get(spec.name)
        if out is not None:
            await _forget(monitor, out)
        await self.hv.netrules.disallow(spec.name)
        if success:
            await self.hv.stop(spec.name, force=True)
            return
        if monitor is None:
            return
        with contextlib.suppress(errors.OpExecError):
            await monitor.execute("migrate_cancel")
        if out is None or out.was_running:
            await monitor.execute("cont")


async def _incoming_end(monitor: Monitor) -> str:
    """How the incoming migration ended: the target may still be loading
    the last state when the source reports it sent (its MIGRATION event
    says when it is done)."""
    listener = EventListener(("MIGRATION",))
    monitor.listen(listener)
    try:
        status = str((await monitor.execute("query-migrate")).get("status") or "none")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_INCOMING_END_TIMEOUT):
                while status not in _ENDED:
                    event = await listener.get()
                    data = event.get("data")
                    status = str(data.get("status") if isinstance(data, dict) else status)
        return status
    finally:
        monitor.unlisten(listener)


# Live (pre-copy) migration under TCG loses guest memory writes now and then
# with QEMU 7.2: the guest, on the target, panics ("corrupted stack end
# detected inside scheduler", "Fatal exception in interrupt") or spins in
# corrupted kernel structures; paused migrations never did
# (bench/bench_kvm_tcg_migration.py).  KVM's dirty log has no such gap.
TCG_NOT_LIVE = (
    "it runs under TCG (no KVM on its node), where QEMU's live migration loses"
    " memory writes; it is paused for the whole transfer"
)


def _option(argv: list[str], option: str) -> str | None:
    for index, word in enumerate(argv[:-1]):
        if word == option:
            return argv[index + 1]
    return None


def _links(accepted: Mapping[str, Any], disks: bool) -> list[tuple[str, int]]:
    """What the source QEMU connects to: the target QEMU's migration
    listener and, when disks are copied, the target's NBD export."""
    address = str(accepted["address"])
    links = [(address, int(accepted["port"]))]
    if disks:
        links.append((address, int(accepted["nbd_port"])))
    return links


def _uri_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _received_spec(hv: KvmHypervisor, spec: InstanceSpec, info: Any) -> InstanceSpec:
    """The guest as it runs on the source (its disks resolved here), on its machine."""
    if not isinstance(info, dict) or not isinstance(info.get("spec"), dict):
        raise errors.OpExecError(f"Invalid migration information for {spec.name}")
    received = InstanceSpec.from_wire(hv.paths, info["spec"], incoming=True)
    if received.name != spec.name:
        raise errors.OpExecError(f"Migration information of {received.name}, not {spec.name}")
    machine = info.get("machine")
    if isinstance(machine, str) and machine:
        received = dataclasses.replace(
            received, hvparams={**received.hvparams, "machine_version": machine}
        )
    return received


def _check_bridges(spec: InstanceSpec) -> None:
    for nic in spec.nics:
        if nic.mode == netdev.MODE_BRIDGED:
            problem = netdev.bridge_problem(nic.link)
            if problem:
                raise errors.OpExecError(
                    f"Can't accept instance {spec.name}: NIC {nic.index}: {problem}"
                )


def _fresh_creds(hv: KvmHypervisor, directory: Path) -> None:
    _remove_tree(directory)
    qemu_tls.write_creds(hv.paths, directory, qemu_tls.ENDPOINT_SERVER)


def _remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


async def _set_caps(monitor: Monitor, spec: InstanceSpec, caps: dict[str, bool]) -> None:
    """Ganeti's migration_caps (``a:b``) on, plus ``caps``."""
    wanted = dict(caps)
    for name in str(spec.hvparams.get("migration_caps") or "").split(_MIGRATION_CAPS_DELIM):
        if name:
            wanted[name] = True
    await monitor.execute(
        "migrate-set-capabilities",
        {"capabilities": [{"capability": k, "state": v} for k, v in wanted.items()]},
    )


def _parameters(spec: InstanceSpec, accepted: Mapping[str, Any]) -> dict[str, Any]:
    """Bandwidth (MiB/s) and downtime (ms) as Ganeti's parameters mean them."""
    hvp = spec.hvparams
    return {
        "max-bandwidth": int(hvp.get("migration_bandwidth") or 0) * _MIB,
        "downtime-limit": int(hvp.get("migration_downtime") or 0),
        "tls-creds": tls.CREDS_ID,
        "tls-hostname": str(accepted["tls_hostname"]),
    }


async def _export_disks(monitor: Monitor, address: str, disks: list[DiskSpec]) -> int:
    """Serve ``disks`` writable over NBD (TLS) on a port we bound; the port."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listening:
        listening.bind((address, 0))
        listening.listen(4)
        port = int(listening.getsockname()[1])
        await monitor.send_fd(listening.fileno(), _NBD_FD)
    await monitor.execute(
        "nbd-server-start",
        {"addr": {"type": "fd", "data": {"str": _NBD_FD}}, "tls-creds": tls.CREDS_ID},
    )
    nodes = await _root_nodes(monitor)
    for disk in disks:
        name = _export(disk)
        await monitor.execute(
            "block-export-add",
            {"type": "nbd", "id": name, "node-name": nodes[name], "name": name, "writable": True},
        )
    return port


async def _root_nodes(monitor: Monitor) -> dict[str, str]:
    """The node name of each drive (``-drive`` names only its device)."""
    answer = await monitor.execute("query-block")
    return {
        str(device["device"]): str(device["inserted"]["node-name"])
        for device in answer
        if device.get("inserted")
    }


async def _start_mirrors(
    monitor: Monitor, disks: list[DiskSpec], accepted: Mapping[str, Any], namespaces: bool
) -> None:
    address, port = str(accepted["address"]), int(accepted["nbd_port"])
    server: dict[str, str] = {"type": "inet", "host": address, "port": str(port)}
    for disk in disks:
        name = _export(disk)
        if namespaces:  # no network in QEMU's namespace: noded connects for it
            await migration_fd.connect(monitor, address, port, f"mig-{name}")
            server = {"type": "fd", "str": f"mig-{name}"}
        await monitor.execute(
            "blockdev-add",
            {
                "driver": "nbd",
                "node-name": f"mig-{name}",
                "server": server,
                "export": name,
                "tls-creds": tls.CREDS_ID,
                "tls-hostname": str(accepted["tls_hostname"]),
            },
        )
        await monitor.execute(
            "blockdev-mirror",
            {
                "job-id": f"mig-{name}",
                "device": name,
                "target": f"mig-{name}",
                "sync": "full",
                "auto-dismiss": True,
            },
        )


def _event_status(event: Mapping[str, Any]) -> str | None:
    if event["event"] == "BLOCK_JOB_ERROR":
        raise errors.OpExecError(f"Copying a disk failed: {event.get('data')}")
    if event["event"] != "MIGRATION":
        return None
    return str((event.get("data") or {}).get("status") or "") or None


async def _wait_events(out: Outgoing, kind: str, jobs: list[str]) -> None:
    """Until each of ``jobs`` sent ``kind``; a job failing before that fails."""
    waiting = set(jobs)
    while waiting:
        event = await out.listener.get()
        raw = event.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if event["event"] == "BLOCK_JOB_ERROR" or (
            event["event"] == "BLOCK_JOB_COMPLETED" and data.get("error")
        ):
            raise errors.OpExecError(f"Copying disk {data.get('device')} failed: {data}")
        if event["event"] == kind:
            waiting.discard(str(data.get("device")))


async def _forget(monitor: Monitor | None, out: Outgoing) -> None:
    """End what a migration left on the source: its task, mirrors, credentials."""
    if out.task is not None:
        out.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await out.task
    if monitor is None:
        return
    monitor.unlisten(out.listener)
    for job in out.jobs:
        with contextlib.suppress(errors.OpExecError):
            await monitor.execute("block-job-cancel", {"device": job, "force": True})
    for job in out.jobs:
        with contextlib.suppress(errors.OpExecError):
            await monitor.execute("blockdev-del", {"node-name": job})
    await _drop_creds(monitor)


async def _drop_creds(monitor: Monitor) -> None:
    """Forget the migration's TLS credentials (none is fine)."""
    with contextlib.suppress(errors.OpExecError):
        await monitor.execute("migrate-set-parameters", {"tls-creds": ""})
    with contextlib.suppress(errors.OpExecError):
        await monitor.execute("object-del", {"id": tls.CREDS_ID})
