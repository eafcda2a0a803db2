"""QEMU's command line for an instance: a pure function of the instance and
of what the node decided for this start (sockets, taps, user, machine).

The mapping of each hypervisor parameter follows Ganeti's hv_kvm; QEMU 7.2's
current option spellings are used (``server=on``, ``-accel``, ``-device``).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.node import qemu_tls
from corral.node.hypervisor.spec import DiskSpec, InstanceSpec, NicSpec
from corral.node.storage import qsd
from corral.node.storage.mirrored import Link, alone_size

VNC_BASE_PORT = 5900
VNC_TLS_ID = "vnctls0"
# disk_type → QEMU's device for a disk ("scsi" is Ganeti's old bus name).
DISK_DEVICES = {
    "paravirtual": "virtio-blk-pci",
    "ide": "ide-hd",
    "scsi": "scsi-hd",
    "scsi-hd": "scsi-hd",
}
SCSI_DEVICES = frozenset({"scsi-hd"})
# nic_type → QEMU's NIC model.
NIC_DEVICES = {
    "paravirtual": "virtio-net-pci",
    "e1000": "e1000",
    "rtl8139": "rtl8139",
    "i82551": "i82551",
    "i82557b": "i82557b",
    "i82559er": "i82559er",
    "ne2k_isa": "ne2k_isa",
    "ne2k_pci": "ne2k_pci",
    "pcnet": "pcnet",
}
# boot_order → QEMU's -boot letter (without a kernel_path).
BOOT_LETTERS = {"disk": "c", "cdrom": "d", "floppy": "a", "network": "n"}
SANDBOX = "on,obsolete=deny,resourcecontrol=deny"
# What makes a stock cloud image look for corral-metad: cloud-init's ds-identify
# enables its OpenStack datasource on this SMBIOS product, which reads the
# OpenStack tree at 169.254.169.254 in cloud-init's first (local) stage over a
# DHCP lease of its own and writes the whole network configuration before the
# network starts.  (NoCloud's seed URL in the SMBIOS serial works too, but is a
# network-stage source: the guest comes up on a fallback DHCP configuration
# first and is reconfigured after, a slower boot.)
METADATA_SMBIOS = "type=1,product=OpenStack Nova"


@dataclass(frozen=True)
class Launch:
    """What the node decided for this start of the instance."""

    qmp_socket: Path
    serial_socket: Path
    pidfile: Path
    machine: str  # resolved: the default machine of this QEMU if none is set
    use_kvm: bool  # KVM works on this node (used when kvm_flag is "")
    # Per NIC, the open files of its tap (QEMU detects vnet_hdr on them).
    taps: tuple[tuple[int, ...], ...] = ()
    runas: str | None = None  # a user name or "uid:gid"
    chroot: Path | None = None
    network_port: int | None = None
    sandbox: bool = True
    # In namespaces of its own (use_namespaces): QEMU is not daemonized (it is
    # PID 1 there) and gets its QMP and serial sockets bound by the node, as
    # descriptors (QMP's, the serial console's or None).
    socket_fds: tuple[int, int | None] | None = None
    # The directory of the client credentials the mirrored disks' NBD links
    # use (None: no mirrored disk); QEMU loads them at its start.
    mirror_creds: str | None = None


def build(spec: InstanceSpec, launch: Launch) -> list[str]:
    """The argv that starts ``spec`` (always paused: ``-S``; the node sends
    ``cont`` once its monitor listens)."""
    hvp = spec.hvparams
    argv = [str(hvp["kvm_path"]), "-name", spec.name, "-m", str(spec.memory)]
    argv += ["-smp", _smp(spec.vcpus, hvp)]
    if spec.uuid:
        argv += ["-uuid", spec.uuid]
    argv += ["-machine", launch.machine, "-accel", accel(hvp, launch.use_kvm)]
    if hvp.get("cpu_type"):
        argv += ["-cpu", str(hvp["cpu_type"])]
    argv += ["-device", "virtio-balloon"]
    if launch.socket_fds is None:
        argv += ["-pidfile", str(launch.pidfile), "-daemonize"]
    argv.append("-S")
    if not hvp.get("acpi", True):
        argv.append("-no-acpi")
    if hvp.get("reboot_behavior") == "exit":
        argv.append("-no-reboot")
    if hvp.get("use_localtime"):
        argv += ["-rtc", "base=localtime"]
    if hvp.get("mem_path"):
        argv += ["-mem-path", str(hvp["mem_path"]), "-mem-prealloc"]
    argv += _boot(hvp)
    argv += _sockets(hvp, launch)
    argv += _display(spec, launch)
    argv += _mirror_creds(launch)
    argv += _disks(spec.disks, hvp, unprivileged=bool(launch.runas))
    argv += _nics(spec.nics, launch.taps, hvp)
    if any(_communication(nic) for nic in spec.nics):
        argv += ["-smbios", METADATA_SMBIOS]
    argv += _security(launch)
    argv += [word for word in str(hvp.get("kvm_extra") or "").split(" ") if word]
    return argv


def _sockets(hvp: Mapping[str, Any], launch: Launch) -> list[str]:
    """QMP and the serial console: unix sockets QEMU binds, or the node's."""
    serial = bool(hvp.get("serial_console"))
    if launch.socket_fds is None:
        argv = ["-qmp", f"unix:{launch.qmp_socket},server=on,wait=off"]
        if serial:
            return [*argv, "-serial", f"unix:{launch.serial_socket},server=on,wait=off"]
        return [*argv, "-serial", "none"]
    qmp_fd, serial_fd = launch.socket_fds
    argv = ["-chardev", f"socket,id=qmp,fd={qmp_fd},server=on,wait=off"]
    argv += ["-mon", "chardev=qmp,mode=control"]
    if serial and serial_fd is not None:
        argv += ["-chardev", f"socket,id=serial,fd={serial_fd},server=on,wait=off"]
        return [*argv, "-serial", "chardev:serial"]
    return [*argv, "-serial", "none"]


def accel(hvp: Mapping[str, Any], kvm_works: bool) -> str:
    """``kvm`` or ``tcg``: forced by ``kvm_flag``, else KVM where it works."""
    flag = hvp.get("kvm_flag") or ""
    if flag == "enabled":
        return "kvm"
    if flag == "disabled":
        return "tcg"
    return "kvm" if kvm_works else "tcg"


def _smp(vcpus: int, hvp: Mapping[str, Any]) -> str:
    parts = [str(vcpus)]
    for key, name in (
        ("cpu_cores", "cores"),
        ("cpu_threads", "threads"),
        ("cpu_sockets", "sockets"),
    ):
        if hvp.get(key):
            parts.append(f"{name}={hvp[key]}")
    return ",".join(parts)


def kernel_append(hvp: Mapping[str, Any]) -> str:
    """The kernel command line as Ganeti builds it: root=, kernel_args, and the
    serial console."""
    words = []
    if hvp.get("root_path"):
        words.append(f"root={hvp['root_path']}")
    if hvp.get("kernel_args"):
        words.append(str(hvp["kernel_args"]))
    if hvp.get("serial_console"):
        words.append(f"console=ttyS0,{hvp['serial_speed']}")
    return " ".join(words)


def _boot(hvp: Mapping[str, Any]) -> list[str]:
    argv: list[str] = []
    cdrom = hvp.get("cdrom_image_path")
    if cdrom:
        argv += ["-drive", f"file={cdrom},format=raw,media=cdrom,readonly=on,if=ide"]
    if hvp.get("kernel_path"):
        argv += ["-kernel", str(hvp["kernel_path"])]
        if hvp.get("initrd_path"):
            argv += ["-initrd", str(hvp["initrd_path"])]
        argv += ["-append", kernel_append(hvp)]
        return argv
    order = str(hvp.get("boot_order") or "disk")
    if order not in BOOT_LETTERS:
        raise errors.OpExecError(f"Unknown boot_order '{order}'")
    return [*argv, "-boot", BOOT_LETTERS[order]]


def _display(spec: InstanceSpec, launch: Launch) -> list[str]:
    hvp = spec.hvparams
    argv: list[str] = []
    if hvp.get("keymap"):
        argv += ["-k", str(hvp["keymap"])]
    mouse = hvp.get("usb_mouse")
    address = str(hvp.get("vnc_bind_address") or "")
    if mouse or address:
        argv += ["-usb", "-device", "usb-mouse" if mouse == "mouse" else "usb-tablet"]
    if not address:
        return [*argv, "-display", "none"]
    outside = launch.socket_fds is not None  # in namespaces: noded listens
    return [*argv, *vnc_options(address, launch.network_port, hvp, outside)]


def vnc_enabled(spec: InstanceSpec, port: int | None) -> bool:
    """Whether QEMU serves VNC (a bind address and a port above 5900)."""
    return bool(spec.hvparams.get("vnc_bind_address")) and port is not None and port > VNC_BASE_PORT


def vnc_ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """``vnc_bind_address`` as an IP address (OpExecError if it is not one)."""
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        raise errors.OpExecError(
            f"Invalid vnc_bind_address '{address}': use an IP address"
        ) from None


def vnc_options(
    address: str, port: int | None, hvp: Mapping[str, Any], outside: bool = False
) -> list[str]:
    """``-vnc`` (the display is the instance's network port - 5900) and the
    TLS credentials it uses; ``outside``: QEMU listens nowhere, noded hands
    it its clients (:mod:`.vnc_listener`)."""
    ip = vnc_ip(address)
    if port is None or port <= VNC_BASE_PORT:
        return ["-vnc", "none"]  # Ganeti starts without VNC (and logs it) in this case
    display = port - VNC_BASE_PORT
    if outside:
        value = "none"
    elif str(ip) == "0.0.0.0":
        value = f":{display}"
    elif ip.version == 6:
        value = f"[{address}]:{display}"
    else:
        value = f"{address}:{display}"
    tls = vnc_tls_creds(hvp)
    if tls:
        value += f",tls-creds={VNC_TLS_ID}"
    if hvp.get("vnc_password_file"):
        value += ",password=on"
    return [*tls, "-vnc", value]


def vnc_tls_creds(hvp: Mapping[str, Any]) -> list[str]:
    """The ``-object`` of VNC's TLS credentials (``vnc_tls``): anonymous, or
    the certificates of ``vnc_x509_path``, the client's checked with
    ``vnc_x509_verify`` (Ganeti's mapping)."""
    if not hvp.get("vnc_tls"):
        return []
    x509 = str(hvp.get("vnc_x509_path") or "")
    if not x509:
        return ["-object", f"tls-creds-anon,id={VNC_TLS_ID},endpoint=server"]
    verify = "yes" if hvp.get("vnc_x509_verify") else "no"
    return [
        "-object",
        f"tls-creds-x509,id={VNC_TLS_ID},endpoint=server,dir={x509},verify-peer={verify}",
    ]


def disk_cache(disk: DiskSpec, hvp: Mapping[str, Any]) -> str:
    """The ``aio``/``cache`` options of a disk, as Ganeti chooses them.

    Disks every node sees get no host cache, or a migration corrupts them
    (Ganeti forces cache=none on its externally mirrored templates)."""
    if hvp.get("disk_aio") == "native":
        return "aio=native,cache=none"
    cache = "none" if disk.shared else str(hvp.get("disk_cache") or "default")
    return "aio=threads" if cache == "default" else f"aio=threads,cache={cache}"


def _disks(
    disks: tuple[DiskSpec, ...], hvp: Mapping[str, Any], unprivileged: bool = False
) -> list[str]:
    kind = str(hvp.get("disk_type") or "paravirtual")
    device = DISK_DEVICES.get(kind)
    if device is None:
        raise errors.OpExecError(
            f"disk_type '{kind}' is not implemented by Corral; use one of"
            f" {', '.join(sorted(DISK_DEVICES))}"
        )
    argv: list[str] = []
    if device in SCSI_DEVICES and disks:
        argv += ["-device", f"{hvp.get('scsi_controller_type') or 'lsi'},id=scsi"]
    for disk in disks:
        drive = f"disk{disk.index}"
        if disk.mirror is not None:
            argv += _mirrored_disk(disk, disk.mirror, device, drive)
            continue
        options = f"file={disk.path},format=raw,if=none,id={drive},{disk_cache(disk, hvp)}"
        if disk.mode != "rw":
            options += ",readonly=on"
        elif unprivileged:
            # Kept open read-write while inactive (an incoming migration, the
            # source after it): QEMU would reopen it by path when it needs to
            # write again, which its unprivileged user may not.
            options += ",auto-read-only=off"
        argv += ["-drive", options, "-device", f"{device},drive={drive},id={drive}-dev"]
    return argv


def _mirror_creds(launch: Launch) -> list[str]:
    if launch.mirror_creds is None:
        return []
    creds = qemu_tls.object_option(qsd.CREDS_ID, launch.mirror_creds, qemu_tls.ENDPOINT_CLIENT)
    return ["-object", creds]


def _mirrored_disk(disk: DiskSpec, link: Link, device: str, drive: str) -> list[str]:
    """A mirrored disk: the quorum over the local copy and the secondary's
    export; a failed write pauses the guest (werror=stop) rather than
    failing in it, until the node decides what follows."""
    graph = qsd.quorum_blockdev(
        disk.path,
        link.host,
        link.port,
        link.export,
        qsd.CREDS_ID,
        link.peer_name,
        alone_size(disk.size, link),
    )
    graph["read-only"] = disk.mode != "rw"
    node = str(graph["node-name"])
    return [
        "-blockdev",
        json.dumps(graph, separators=(",", ":")),
        "-device",
        f"{device},drive={node},id={drive}-dev,werror=stop,rerror=stop",
    ]


def _nics(
    nics: tuple[NicSpec, ...], taps: tuple[tuple[int, ...], ...], hvp: Mapping[str, Any]
) -> list[str]:
    if not nics:
        return ["-nic", "none"]
    if len(taps) != len(nics):
        raise ValueError(f"{len(nics)} NICs but {len(taps)} taps")
    kind = str(hvp.get("nic_type") or "paravirtual")
    model = NIC_DEVICES.get(kind)
    if model is None:
        raise errors.OpExecError(f"Unknown nic_type '{kind}'")
    argv: list[str] = []
    # The communication NIC first on the PCI bus: it is the guest's first NIC,
    # the one cloud-init asks DHCP on for the metadata service (its "fallback").
    pairs = sorted(zip(nics, taps, strict=True), key=lambda pair: not _communication(pair[0]))
    for nic, tap in pairs:
        netdev = f"netdev{nic.index}"
        fds = ":".join(str(fd) for fd in tap)
        value = f"tap,id={netdev},{'fds' if len(tap) > 1 else 'fd'}={fds}"
        if hvp.get("vhost_net") and kind == "paravirtual":
            value += ",vhost=on"
        argv += ["-netdev", value, "-device", f"{model},netdev={netdev},mac={nic.mac}"]
    return argv


def _communication(nic: NicSpec) -> bool:
    return (nic.name or "").startswith(C.INSTANCE_COMMUNICATION_NIC_PREFIX)


def _security(launch: Launch) -> list[str]:
    argv: list[str] = []
    if launch.runas:
        argv += ["-runas", launch.runas]
    if launch.chroot is not None:
        argv += ["-chroot", str(launch.chroot)]
    if launch.sandbox:
        # spawn and elevateprivileges stay allowed: -daemonize forks, -runas
        # changes the uid after the filter is in place.
        argv += ["-sandbox", SANDBOX]
    return argv
