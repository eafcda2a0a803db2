"""The kvm hypervisor: instances are QEMU processes (KVM, or TCG without it).

Each guest is a daemonized QEMU started paused; noded holds one QMP
connection per guest (:class:`~.monitor.Monitor`), follows its events, and
notices its exit through a pidfd.  What a restarted noded needs lives in the
runtime files (:mod:`.runtime`): :meth:`KvmHypervisor.resume` reconnects to
the guests still running and removes the leftovers of those that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from corral import errors
from corral import hypervisors as H
from corral.node import netdev, qemu_process
from corral.node.communication import is_communication_nic
from corral.node.hypervisor.base import REBOOT_SOFT, Hypervisor
from corral.node.hypervisor.kvm import (
    cmdline,
    config_drive,
    isolation,
    mirror_resync,
    process,
    security,
    vnc_listener,
)
from corral.node.hypervisor.kvm.console import console_info
from corral.node.hypervisor.kvm.guest_mirrors import GuestMirrors, Link
from corral.node.hypervisor.kvm.migration import Migrations
from corral.node.hypervisor.kvm.mirror_creds import mirror_creds
from corral.node.hypervisor.kvm.mirror_resync import Progress
from corral.node.hypervisor.kvm.monitor import Monitor
from corral.node.hypervisor.kvm.runtime import Layout, Runtime, alive, process_start
from corral.node.hypervisor.kvm.vnc_listener import VncListener
from corral.node.hypervisor.spec import (
    STATE_SHUTDOWN,
    ConsoleInfo,
    InstanceInfo,
    InstanceSpec,
    MirrorFault,
    NicSpec,
)
from corral.node.meminfo import memory_info
from corral.node.metad_feed import MetadFeed
from corral.node.netdev import dhcp
from corral.node.netrules import NetRules
from corral.node.storage import qsd
from corral.node.storage.mirrored import Link as MirrorLink
from corral.node.uidpool import UidPool
from corral.paths import Paths

log = logging.getLogger(__name__)

# Ganeti's constants.KVM_PATH; the environment may name another QEMU.
DEFAULT_KVM_PATH = "/usr/bin/kvm"
KVM_PATH_ENV = "CORRAL_KVM_PATH"
# After QMP's quit (or a failed ACPI stop), how long QEMU gets before SIGKILL.
_QUIT_GRACE = 10.0
# sun_path holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107


def kvm_binary() -> str:
    """The QEMU this node offers kvm with."""
    return os.environ.get(KVM_PATH_ENV) or DEFAULT_KVM_PATH


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


class KvmHypervisor(Hypervisor):
    NAME = H.HT_KVM

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.layout = Layout(paths.run_dir)
        self.monitors: dict[str, Monitor] = {}
        self.vnc: dict[str, VncListener] = {}  # noded's VNC listeners (namespaces)
        self._locks: dict[str, asyncio.Lock] = {}
        self._reaping: dict[str, asyncio.Task[None]] = {}
        self.migrations = Migrations(self)
        self.metad = MetadFeed(paths)
        self.netrules = NetRules(paths)
        self.mirrors = GuestMirrors()

    @classmethod
    def problem(cls, paths: Paths) -> str | None:
        binary = kvm_binary()
        if not _executable(binary):
            return (
                f"kvm is not offered: the QEMU binary {binary} is missing (install qemu-system-x86)"
            )
        return None

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    def serial_socket(self, name: str) -> Path | None:
        path = self.layout.serial(name)
        return path if name in self.monitors and path.exists() else None

    # noded's start and stop
    async def resume(self) -> None:
        """Reconnect to the guests that kept running; clean up after the others."""
        self.layout.ensure()
        await self.netrules.restore(self._ruled())
        for name in self.layout.names():
            runtime = self.layout.read_runtime(name)
            if runtime is not None and alive(runtime):
                try:
                    monitor = await self._attach(runtime)
                    self._resume_vnc(runtime, monitor)
                    continue
                except errors.OpExecError as err:
                    log.error("Instance %s runs but its QMP does not answer: %s", name, err)
                    continue
            log.info("Instance %s died while noded was down; cleaning up", name)
            await self._cleanup(name, runtime)
        await self.migrations.resume()

    def _resume_vnc(self, runtime: Runtime, monitor: Monitor) -> None:
        """Listen again for the VNC of a guest in namespaces."""
        found = vnc_listener.endpoint(
            runtime.spec.get("hvparams") or {}, _network_port(runtime.spec)
        )
        if found is None:
            return
        try:
            self.vnc[runtime.name] = VncListener(vnc_listener.bind(*found), monitor)
        except errors.OpExecError as err:
            log.error("Instance %s runs without VNC: %s", runtime.name, err)

    def _ruled(self) -> dict[str, int]:
        """The running guests whose QEMU the network rules cover, with its uid."""
        return ruled_guests(self.layout)

    async def close(self) -> None:
        self.metad.close()
        for listener in list(self.vnc.values()):
            await listener.close()
        self.vnc.clear()
        for monitor in list(self.monitors.values()):
            await monitor.close()
        self.monitors.clear()

    async def _attach(self, runtime: Runtime) -> Monitor:
        self.mirrors.follow(runtime.name, runtime.argv)
        monitor = Monitor(
            runtime.name,
            self.layout.qmp(runtime.name),
            runtime.pid,
            self._exited,
            self.mirrors.io_error,
        )
        await monitor.connect()
        await self.mirrors.refresh(runtime.name, monitor)
        self.monitors[runtime.name] = monitor
        return monitor

    def _exited(self, monitor: Monitor) -> None:
        """The guest's QEMU is gone: clean up after it (from the monitor)."""
        if self.monitors.get(monitor.name) is monitor:
            del self.monitors[monitor.name]
            self.mirrors.forget(monitor.name)
        task = asyncio.create_task(self._reap(monitor), name=f"kvm-reap-{monitor.name}")
        self._reaping[monitor.name] = task
        task.add_done_callback(lambda _: self._reaping.pop(monitor.name, None))

    async def _reap(self, monitor: Monitor) -> None:
        runtime = self.layout.read_runtime(monitor.name)
        if runtime is not None and runtime.pid != monitor.pid:
            return  # started again meanwhile: what is recorded is the new guest's
        if monitor.user_shutdown:
            log.info("Instance %s was shut down from inside", monitor.name)
            self.layout.shutdown_mark(monitor.name).touch(mode=0o600)
        await self._cleanup(monitor.name, runtime)

    async def _cleanup(self, name: str, runtime: Runtime | None) -> None:
        """Remove what a dead guest left: its VNC listener, metadata, rules,
        taps' routes, its uid, its files."""
        listener = self.vnc.pop(name, None)
        if listener is not None:
            await listener.close()
        await self.metad.withdraw(name)
        await self.netrules.release(name)
        if runtime is not None:
            for tap in runtime.taps:
                await self._remove_tap(tap)
            if runtime.uid is not None:
                await asyncio.to_thread(UidPool(self.paths).release, runtime.uid)
        self.layout.remove(name)

    # Mirrored disks
    MIRRORS = True

    async def mirror_faults(self, wait: float) -> list[MirrorFault]:
        return await self.mirrors.faults(wait)

    async def mirror_resync(
        self, name: str, peer: MirrorLink, progress: Progress, full: bool = False
    ) -> None:
        monitor = self.monitors.get(name)
        if monitor is None:
            raise errors.OpExecError(f"Instance {name} is not running on this node")
        disk = peer.export
        if not self.mirrors.alone(name, disk):
            raise errors.OpExecError(f"Disk {disk} of {name} is written to both copies already")
        link = Link(qsd.quorum_name(disk), disk, peer.host, peer.port)
        await mirror_resync.resync(monitor, link, peer.peer_name, progress, full)
        self.mirrors.linked(name, link)

    async def mirror_join(self, spec: InstanceSpec) -> None:
        """Link each mirrored disk of a guest received here (paused, not run
        yet) to its secondary's copy, the source's: current, as the guest
        has written nothing since it left the source."""
        monitor = self.monitors.get(spec.name)
        if monitor is None:
            raise errors.OpExecError(f"Instance {spec.name} is not running on this node")
        for disk in spec.disks:
            peer = disk.mirror
            if peer is None or peer.alone or not self.mirrors.alone(spec.name, peer.export):
                continue
            link = Link(qsd.quorum_name(peer.export), peer.export, peer.host, peer.port)
            await mirror_resync.join(monitor, link, peer.peer_name)
            self.mirrors.linked(spec.name, link)

    async def mirror_degrade(self, name: str, disk: str) -> None:
        async with self._lock(name):
            monitor = self.monitors.get(name)
            if monitor is None:
                raise errors.OpExecError(f"Instance {name} is not running on this node")
            await self.mirrors.degrade(name, disk, monitor)

    # Life cycle
    async def start(self, spec: InstanceSpec, paused: bool = False) -> None:
        await self.start_with(spec, paused)

    async def start_with(
        self,
        spec: InstanceSpec,
        paused: bool,
        extra: tuple[str, ...] = (),
        binds: tuple[Path, ...] = (),
    ) -> Monitor:
        """Start ``spec`` with ``extra`` QEMU options (a migration's incoming
        ones) and, in namespaces, ``binds``: the files they name."""
        async with self._lock(spec.name):
            reaping = self._reaping.get(spec.name)
            if reaping is not None:
                await reaping  # the last run's cleanup first
            runtime = self.layout.read_runtime(spec.name)
            if spec.name in self.monitors or (runtime is not None and alive(runtime)):
                raise errors.OpExecError(f"Instance '{spec.name}' is already running")
            vnc_password = _check_start(spec)
            self._check_sockets(spec.name)
            self.layout.ensure()
            await self._cleanup(spec.name, runtime)
            self.layout.shutdown_mark(spec.name).unlink(missing_ok=True)
            listening = _vnc_socket(spec)
            try:
                monitor = await self._launch(spec, extra, binds)
                await self.metad.publish(spec)
                await self._go(spec, monitor, vnc_password, listening, paused)
            except BaseException:
                if listening is not None:
                    listening.close()
                raise
            return monitor

    async def _go(
        self,
        spec: InstanceSpec,
        monitor: Monitor,
        vnc_password: str | None,
        listening: socket.socket | None,
        paused: bool,
    ) -> None:
        """The started QEMU's VNC password, noded's VNC listener for it, and
        ``cont`` unless ``paused``; QEMU killed on failure."""
        try:
            if vnc_password is not None and cmdline.vnc_enabled(spec, _network_port(spec.wire)):
                await monitor.execute("change-vnc-password", {"password": vnc_password})
            if listening is not None:  # clients once the password is set
                self.vnc[spec.name] = VncListener(listening, monitor)
            if not paused:
                await monitor.execute("cont")
        except BaseException:
            await self._kill(monitor)
            raise

    def _check_sockets(self, name: str) -> None:
        for path in (self.layout.qmp(name), self.layout.serial(name)):
            size = len(os.fsencode(path))
            if size > MAX_SOCKET_PATH:
                raise errors.OpExecError(
                    f"Cannot start instance {name}: its socket path {path} is {size} bytes long;"
                    f" unix sockets allow {MAX_SOCKET_PATH}: use a shorter instance name"
                )

    async def _launch(
        self, spec: InstanceSpec, extra: tuple[str, ...] = (), binds: tuple[Path, ...] = ()
    ) -> Monitor:
        """Start QEMU (paused), record it, connect its monitor; ``binds``: more
        files an isolated QEMU reads (a migration's credentials)."""
        hvp = spec.hvparams
        name = spec.name
        machine = str(hvp.get("machine_version") or "") or await process.default_machine(
            str(hvp["kvm_path"])
        )
        chroot = (
            security.prepare_chroot(self.layout.chroot(name)) if hvp.get("use_chroot") else None
        )
        taps = await self._make_taps(spec)
        try:
            async with security.runas(self.paths, name, hvp) as (runas, uid):
                rules_uid = security.ruled_uid(hvp, uid)
                if rules_uid is not None:
                    await self.netrules.guard(name, rules_uid)
                launch = cmdline.Launch(
                    qmp_socket=self.layout.qmp(name),
                    serial_socket=self.layout.serial(name),
                    pidfile=self.layout.pidfile(name),
                    machine=machine,
                    use_kvm=process.kvm_works(),
                    taps=tuple(t.fds for t in taps),
                    runas=runas,
                    chroot=chroot,
                    network_port=_network_port(spec.wire),
                )
                drive = await config_drive.prepare(self.layout, spec)
                fds = [fd for tap in taps for fd in tap.fds]
                try:
                    if hvp.get("use_namespaces"):
                        own = [(p, False) for p in (self.layout.config_drive(name), *binds)]
                        # The chroot, or a directory at its place: where a
                        # migration's credentials are handed to QEMU.
                        shared = chroot or security.prepare_chroot(self.layout.chroot(name))
                        own.append((shared, True))
                        argv, pid = await self._start_isolated(
                            spec, launch, (*drive, *extra), own, fds
                        )
                    else:
                        with mirror_creds(self.paths, spec) as creds:
                            launch = dataclasses.replace(launch, mirror_creds=creds)
                            argv = [*cmdline.build(spec, launch), *drive, *extra]
                            await qemu_process.run_daemonized(f"instance {name}", argv, fds)
                        pid = None
                finally:
                    for tap in taps:
                        tap.close()
                runtime = self._record(
                    spec, argv, [t.name for t in taps], (uid, rules_uid), chroot, pid
                )
                return await self._attach_new(runtime)
        except BaseException:
            await self._cleanup(name, self.layout.read_runtime(name))
            for tap in taps:
                await self._remove_tap(tap.name)
            raise

    async def _start_isolated(
        self,
        spec: InstanceSpec,
        launch: cmdline.Launch,
        extra: tuple[str, ...],
        own: list[tuple[Path, bool]],
        fds: list[int],
    ) -> tuple[list[str], int]:
        """Start QEMU in namespaces of its own (:mod:`.isolation`): its argv and pid."""
        name = spec.name
        serial = self.layout.serial(name) if spec.hvparams.get("serial_console") else None
        runas = security.numeric(launch.runas)  # no /etc/passwd in its namespace
        with isolation.bound_sockets(self.layout.qmp(name), serial) as sockets:
            launch = dataclasses.replace(launch, socket_fds=sockets, runas=runas)
            argv = [*cmdline.build(spec, launch), *extra]
            passed = [*fds, *(fd for fd in sockets if fd is not None)]
            pid = await isolation.start(
                name,
                self.layout.nsroot(name),
                self.layout.log(name),
                isolation.binds(spec, own),
                argv,
                passed,
            )
        self.layout.pidfile(name).write_text(f"{pid}\n")
        return argv, pid

    async def _make_taps(self, spec: InstanceSpec) -> list[netdev.Tap]:
        taps: list[netdev.Tap] = []
        try:
            for nic in spec.nics:
                tap = netdev.create_tap(
                    netdev.tap_name(spec.uuid or spec.name, nic.index, str(self.paths.root)),
                    vnet_hdr=bool(spec.hvparams.get("vnet_hdr", True)),
                )
                taps.append(tap)
                if is_communication_nic(nic):
                    await asyncio.to_thread(netdev.configure_communication, tap.name, nic.ip)
                    await self._serve_dhcp(spec.name, tap.name, nic)
                    continue
                await asyncio.to_thread(
                    netdev.configure_nic, tap.name, nic.mode, nic.link, nic.ip, nic.mac, nic.vlan
                )
        except BaseException:
            for tap in taps:
                tap.close()
                await asyncio.to_thread(dhcp.stop, self.paths.run_dir, tap.name)
            raise
        return taps

    async def _serve_dhcp(self, name: str, tap: str, nic: NicSpec) -> None:
        """DHCP for the guest on its communication tap; without it (no
        dnsmasq) the guest runs, and must set its address itself."""
        try:
            # configure_communication refused a NIC without an address.
            await asyncio.to_thread(dhcp.start, self.paths.run_dir, tap, nic.mac, str(nic.ip))
        except errors.OpExecError as err:
            log.warning("Instance %s: %s", name, err)

    async def _remove_tap(self, tap: str) -> None:
        """Remove ``tap``, its routes, and its DHCP server if it has one."""
        await asyncio.to_thread(dhcp.stop, self.paths.run_dir, tap)
        await asyncio.to_thread(netdev.remove_tap, tap)

    def _record(
        self,
        spec: InstanceSpec,
        argv: list[str],
        taps: list[str],
        uids: tuple[int | None, int | None],
        chroot: Path | None,
        pid: int | None = None,
    ) -> Runtime:
        """Write the runtime file; ``uids``: the pool's uid, the ruled uid;
        ``pid``: QEMU's, when not in its pidfile."""
        uid, rules_uid = uids
        if pid is None:
            pid = qemu_process.read_pid(str(self.layout.pidfile(spec.name)))
        start = process_start(pid) if pid is not None else None
        if pid is None or start is None:
            raise errors.OpExecError(f"Failed to start instance {spec.name}: QEMU is gone")
        runtime = Runtime(
            name=spec.name,
            argv=argv,
            # Without the OS's private parameters: they stay off the disk.
            spec={k: v for k, v in spec.wire.items() if k != "osspec"},
            pid=pid,
            pid_start=start,
            started=time.time(),
            memory=spec.memory,
            vcpus=spec.vcpus,
            taps=taps,
            uid=uid,
            chroot=str(chroot) if chroot is not None else None,
            rules_uid=rules_uid,
            namespaces=bool(spec.hvparams.get("use_namespaces")),
        )
        self.layout.write_runtime(runtime)
        if uid is not None:
            self.layout.uidfile(spec.name).write_text(f"{uid}\n")
        return runtime

    async def _attach_new(self, runtime: Runtime) -> Monitor:
        try:
            return await self._attach(runtime)
        except errors.OpExecError:
            qemu_process.kill(runtime.pid)
            if not runtime.namespaces:
                raise
            # QEMU answers on a socket the node bound: a QEMU that stopped
            # at its start is seen here, and its output says why.
            text = isolation.output(self.layout.log(runtime.name))
            raise errors.OpExecError(
                f"Failed to start instance {runtime.name}: QEMU exited: {text}"
            ) from None
        except BaseException:
            qemu_process.kill(runtime.pid)
            raise

    async def stop(self, name: str, timeout: int = 120, force: bool = False) -> None:
        async with self._lock(name):
            monitor = self.monitors.get(name)
            if monitor is None:
                runtime = self.layout.read_runtime(name)
                if runtime is not None and alive(runtime):
                    qemu_process.kill(runtime.pid)  # running, but its monitor is lost
                await self._cleanup(name, runtime)
            else:
                acpi = bool(self._hvparams(name).get("acpi", True))
                if acpi and not force:
                    await self._powerdown(monitor, timeout)
                await self._kill(monitor)
            self.layout.shutdown_mark(name).unlink(missing_ok=True)

    async def _powerdown(self, monitor: Monitor, timeout: int) -> None:
        """ACPI's power button; wait up to ``timeout`` seconds for the guest."""
        monitor.stopping = True
        with contextlib.suppress(errors.OpExecError):
            await monitor.execute("system_powerdown")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(monitor.exited.wait(), timeout)

    async def _kill(self, monitor: Monitor) -> None:
        """End QEMU now (QMP quit, SIGKILL if that fails) and wait for the cleanup."""
        monitor.stopping = True
        if not monitor.exited.is_set():
            with contextlib.suppress(errors.OpExecError):
                await monitor.execute("quit")
            try:
                await asyncio.wait_for(monitor.exited.wait(), _QUIT_GRACE)
            except TimeoutError:
                qemu_process.kill(monitor.pid)
                await monitor.exited.wait()
        task = self._reaping.get(monitor.name)
        if task is not None:
            await task

    def _hvparams(self, name: str) -> dict[str, Any]:
        runtime = self.layout.read_runtime(name)
        return dict((runtime.spec.get("hvparams") if runtime else None) or {})

    async def reboot(self, spec: InstanceSpec, kind: str, timeout: int) -> None:
        """soft: the guest is reset in place (Ganeti re-executes the same QEMU
        command line, which the guest sees as a reset); hard: stopped and
        started again with the instance's current parameters."""
        monitor = self.monitors.get(spec.name)
        if monitor is None:
            raise errors.OpExecError(f"Failed to reboot instance {spec.name}: not running")
        if kind == REBOOT_SOFT:
            await monitor.execute("system_reset")
            return
        await self.stop(spec.name, timeout)
        await self.start(spec)

    async def instances_info(self, names: Iterable[str] | None = None) -> list[InstanceInfo]:
        wanted = set(names) if names is not None else None
        now = time.time()
        out = []
        for name, monitor in sorted(self.monitors.items()):
            runtime = self.layout.read_runtime(name)
            if runtime is None or (wanted is not None and name not in wanted):
                continue
            out.append(
                InstanceInfo(
                    name, runtime.memory, runtime.vcpus, monitor.state, now - runtime.started
                )
            )
        for name in self.layout.user_shutdowns():
            if name not in self.monitors and (wanted is None or name in wanted):
                out.append(InstanceInfo(name, 0, 0, STATE_SHUTDOWN, 0.0))
        return out

    async def node_info(self) -> dict[str, Any]:
        """The host's memory (QEMU's use is in it already) and what the
        running guests were given."""
        used = sum(info.memory for info in await self.instances_info())
        return {**memory_info(), "instances_memory": used}

    async def console(self, spec: InstanceSpec, node_name: str) -> ConsoleInfo:
        return console_info(spec, node_name, self.layout.serial(spec.name))

    async def balloon(self, spec: InstanceSpec, memory: int) -> None:
        monitor = self.monitors.get(spec.name)
        runtime = self.layout.read_runtime(spec.name)
        if monitor is None or runtime is None:
            raise errors.OpExecError(f"Instance '{spec.name}' is not running")
        await monitor.execute("balloon", {"value": memory * 1024 * 1024})
        runtime.memory = memory
        self.layout.write_runtime(runtime)

    # Live migration: see .migration
    async def migration_info(self, spec: InstanceSpec) -> Any:
        return await self.migrations.info(spec)

    async def accept_instance(self, spec: InstanceSpec, info: Any, target: str) -> Any:
        return await self.migrations.accept(spec, info, target)

    async def migrate_instance(
        self, cluster_name: str, spec: InstanceSpec, target: str, live: bool, accepted: Any = None
    ) -> None:
        if not isinstance(accepted, dict):
            raise errors.OpExecError("Migration needs the target's answer to accept_instance")
        await self.migrations.migrate(spec, live, {**accepted, "address": target})

    async def migration_status(self, spec: InstanceSpec) -> dict[str, Any]:
        return await self.migrations.status(spec)

    async def finalize_migration_dst(self, spec: InstanceSpec, info: Any, success: bool) -> None:
        await self.migrations.finalize_dst(spec, success)

    async def finalize_migration_src(self, spec: InstanceSpec, success: bool, live: bool) -> None:
        await self.migrations.finalize_src(spec, success)


def ruled_guests(layout: Layout) -> dict[str, int]:
    """Instance → the uid the network rules cover, for the guests running
    under ``layout`` whose QEMU is ruled."""
    out = {}
    for name in layout.names():
        runtime = layout.read_runtime(name)
        if runtime is not None and runtime.rules_uid is not None and alive(runtime):
            out[name] = runtime.rules_uid
    return out


def _network_port(wire: Mapping[str, Any]) -> int | None:
    port = wire.get("network_port")
    return port if isinstance(port, int) and not isinstance(port, bool) else None


def _vnc_socket(spec: InstanceSpec) -> socket.socket | None:
    """noded's VNC listener for a QEMU in namespaces, bound before QEMU
    starts: a port in use fails the start, as it fails QEMU's own listener."""
    found = vnc_listener.endpoint(spec.hvparams, _network_port(spec.wire))
    if found is None:
        return None
    try:
        return vnc_listener.bind(*found)
    except errors.OpExecError as err:
        raise errors.OpExecError(f"Cannot start instance {spec.name}: {err}") from None


def _check_start(spec: InstanceSpec) -> str | None:
    """What must hold before QEMU runs; the VNC password, if one is set."""
    hvp = spec.hvparams
    kvm_path = str(hvp.get("kvm_path") or "")
    if not _executable(kvm_path):
        raise errors.OpExecError(
            f"Cannot start instance {spec.name}: the QEMU binary '{kvm_path}' (kvm_path)"
            " does not exist on this node"
        )
    for key in ("kernel_path", "initrd_path"):
        path = str(hvp.get(key) or "")
        if path and not os.path.isfile(path):
            raise errors.OpExecError(
                f"Cannot start instance {spec.name}: {key} '{path}' does not exist on this node"
            )
    if hvp.get("use_namespaces") and any(disk.mirror is not None for disk in spec.disks):
        # QEMU in namespaces of its own has no network to reach the secondary.
        raise errors.OpExecError(
            f"Cannot start instance {spec.name}: its mirrored disks need the network, which"
            " QEMU in namespaces of its own lacks (use_namespaces); set use_namespaces=false"
        )
    password_file = str(hvp.get("vnc_password_file") or "")
    if not password_file:
        return None
    try:
        with open(password_file) as handle:
            return handle.readline().rstrip("\n")
    except OSError as err:
        raise errors.OpExecError(
            f"Cannot start instance {spec.name}: cannot read the VNC password file"
            f" '{password_file}' (vnc_password_file): {err.strerror}"
        ) from None
