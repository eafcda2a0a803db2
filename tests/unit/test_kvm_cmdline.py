"""QEMU's command line built from an instance (corral.node.hypervisor.kvm.cmdline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from corral.hvparams import DEFAULTS
from corral.node.hypervisor.kvm import cmdline, isolation
from corral.node.hypervisor.spec import DiskSpec, InstanceSpec, NicSpec

RUN = Path("/run/kvm")


def spec(
    disks: tuple[DiskSpec, ...] = (), nics: tuple[NicSpec, ...] = (), **hvp: Any
) -> InstanceSpec:
    return InstanceSpec(
        name="inst1.example.com",
        uuid="0b2c8f1e-uuid",
        hypervisor="kvm",
        os="debootstrap",
        memory=256,
        vcpus=2,
        hvparams={**DEFAULTS["kvm"], **hvp},
        beparams={},
        disks=disks,
        nics=nics,
    )


def launch(**kw: Any) -> cmdline.Launch:
    values: dict[str, Any] = {
        "qmp_socket": RUN / "ctrl/inst1.qmp",
        "serial_socket": RUN / "ctrl/inst1.serial",
        "pidfile": RUN / "pid/inst1",
        "machine": "pc-i440fx-7.2",
        "use_kvm": False,
        **kw,
    }
    return cmdline.Launch(**values)


def disk(index: int, mode: str = "rw", shared: bool = False) -> DiskSpec:
    return DiskSpec(index, f"u{index}", Path(f"/srv/d{index}"), mode, 1024, "file", shared)


def option(argv: list[str], name: str) -> list[str]:
    """Every value of option ``name``."""
    return [argv[i + 1] for i, word in enumerate(argv) if word == name]


def test_basics() -> None:
    argv = cmdline.build(spec(), launch())
    assert argv[0] == "/usr/bin/kvm"
    assert option(argv, "-name") == ["inst1.example.com"]
    assert option(argv, "-m") == ["256"]
    assert option(argv, "-smp") == ["2"]
    assert option(argv, "-uuid") == ["0b2c8f1e-uuid"]
    assert option(argv, "-machine") == ["pc-i440fx-7.2"]
    assert option(argv, "-pidfile") == ["/run/kvm/pid/inst1"]
    assert "-daemonize" in argv and "-S" in argv
    assert option(argv, "-qmp") == ["unix:/run/kvm/ctrl/inst1.qmp,server=on,wait=off"]
    assert option(argv, "-serial") == ["unix:/run/kvm/ctrl/inst1.serial,server=on,wait=off"]
    assert option(argv, "-display") == ["none"] and "-vnc" not in argv
    assert option(argv, "-nic") == ["none"]
    assert option(argv, "-sandbox") == [cmdline.SANDBOX]
    assert "-runas" not in argv and "-chroot" not in argv and "-no-acpi" not in argv


def test_sockets_bound_by_the_node_in_namespaces() -> None:
    """use_namespaces: QEMU is PID 1 of its namespace (no -daemonize, no
    pidfile of its own) and its sockets are the node's descriptors."""
    argv = cmdline.build(spec(), launch(socket_fds=(7, 8)))
    assert "-daemonize" not in argv and "-pidfile" not in argv and "-S" in argv
    assert "-qmp" not in argv
    assert option(argv, "-chardev") == [
        "socket,id=qmp,fd=7,server=on,wait=off",
        "socket,id=serial,fd=8,server=on,wait=off",
    ]
    assert option(argv, "-mon") == ["chardev=qmp,mode=control"]
    assert option(argv, "-serial") == ["chardev:serial"]
    argv = cmdline.build(spec(serial_console=False), launch(socket_fds=(7, None)))
    assert option(argv, "-chardev") == ["socket,id=qmp,fd=7,server=on,wait=off"]
    assert option(argv, "-serial") == ["none"]


@pytest.mark.parametrize(
    ("flag", "kvm_works", "accel"),
    [("", True, "kvm"), ("", False, "tcg"), ("enabled", False, "kvm"), ("disabled", True, "tcg")],
)
def test_accel(flag: str, kvm_works: bool, accel: str) -> None:
    argv = cmdline.build(spec(kvm_flag=flag), launch(use_kvm=kvm_works))
    assert option(argv, "-accel") == [accel]


def test_direct_kernel_boot_append_line() -> None:
    hvp: dict[str, Any] = {"kernel_path": "/k", "initrd_path": "/i", "kernel_args": "ro quiet"}
    argv = cmdline.build(spec(serial_speed=115200, **hvp), launch())
    assert option(argv, "-kernel") == ["/k"] and option(argv, "-initrd") == ["/i"]
    assert option(argv, "-append") == ["root=/dev/vda1 ro quiet console=ttyS0,115200"]
    assert "-boot" not in argv
    argv = cmdline.build(spec(serial_console=False, root_path="", **hvp), launch())
    assert option(argv, "-append") == ["ro quiet"]
    assert option(argv, "-serial") == ["none"]


@pytest.mark.parametrize(("order", "letter"), [("disk", "c"), ("cdrom", "d"), ("network", "n")])
def test_boot_from_disk(order: str, letter: str) -> None:
    argv = cmdline.build(spec(kernel_path="", boot_order=order), launch())
    assert option(argv, "-boot") == [letter] and "-kernel" not in argv


def test_disks_per_type_cache_and_read_only() -> None:
    disks = (disk(0), disk(1, mode="ro"), disk(2, shared=True))
    argv = cmdline.build(spec(disks, disk_cache="writeback"), launch())
    assert option(argv, "-drive") == [
        "file=/srv/d0,format=raw,if=none,id=disk0,aio=threads,cache=writeback",
        "file=/srv/d1,format=raw,if=none,id=disk1,aio=threads,cache=writeback,readonly=on",
        "file=/srv/d2,format=raw,if=none,id=disk2,aio=threads,cache=none",
    ]
    assert option(argv, "-device")[1:] == [
        "virtio-blk-pci,drive=disk0,id=disk0-dev",
        "virtio-blk-pci,drive=disk1,id=disk1-dev",
        "virtio-blk-pci,drive=disk2,id=disk2-dev",
    ]
    argv = cmdline.build(spec((disk(0),), disk_type="ide", disk_aio="native"), launch())
    assert option(argv, "-drive") == [
        "file=/srv/d0,format=raw,if=none,id=disk0,aio=native,cache=none"
    ]
    assert "ide-hd,drive=disk0,id=disk0-dev" in option(argv, "-device")
    argv = cmdline.build(spec((disk(0),), disk_type="scsi-hd"), launch())
    assert option(argv, "-device")[1:] == ["lsi,id=scsi", "scsi-hd,drive=disk0,id=disk0-dev"]
    with pytest.raises(errors.OpExecError, match="disk_type 'mtd' is not implemented"):
        cmdline.build(spec((disk(0),), disk_type="mtd"), launch())


def test_an_unprivileged_qemu_keeps_its_writable_disks_open_read_write() -> None:
    """Not reopened by path (which its user may not) when a migration makes
    them inactive: QEMU's auto-read-only off."""
    argv = cmdline.build(spec((disk(0), disk(1, mode="ro"))), launch(runas="47360:47360"))
    assert option(argv, "-drive") == [
        "file=/srv/d0,format=raw,if=none,id=disk0,aio=threads,auto-read-only=off",
        "file=/srv/d1,format=raw,if=none,id=disk1,aio=threads,readonly=on",
    ]


def test_nics_on_passed_tap_files() -> None:
    nics = (
        NicSpec(0, "n0", "aa:00:00:11:22:33", "bridged", "br0"),
        NicSpec(1, "n1", "aa:00:00:44:55:66", "routed", ""),
    )
    argv = cmdline.build(spec(nics=nics, vhost_net=True), launch(taps=((7,), (8, 9))))
    assert option(argv, "-netdev") == [
        "tap,id=netdev0,fd=7,vhost=on",
        "tap,id=netdev1,fds=8:9,vhost=on",
    ]
    assert option(argv, "-device")[1:] == [
        "virtio-net-pci,netdev=netdev0,mac=aa:00:00:11:22:33",
        "virtio-net-pci,netdev=netdev1,mac=aa:00:00:44:55:66",
    ]
    argv = cmdline.build(spec(nics=nics[:1], nic_type="e1000"), launch(taps=((7,),)))
    assert option(argv, "-netdev") == ["tap,id=netdev0,fd=7"]
    assert option(argv, "-device")[1:] == ["e1000,netdev=netdev0,mac=aa:00:00:11:22:33"]


def test_a_communication_nic_comes_first_and_names_the_platform() -> None:
    """cloud-init's ds-identify enables its OpenStack datasource on the SMBIOS
    product, which asks DHCP on the guest's first NIC: the communication one."""
    comm = NicSpec(1, "n1", "aa:00:00:44:55:66", "routed", "communication_rt",
                   name=C.INSTANCE_COMMUNICATION_NIC_PREFIX + "inst1")  # fmt: skip
    data = NicSpec(0, "n0", "aa:00:00:11:22:33", "bridged", "br0")
    argv = cmdline.build(spec(nics=(data, comm)), launch(taps=((7,), (8,))))
    assert option(argv, "-netdev") == ["tap,id=netdev1,fd=8", "tap,id=netdev0,fd=7"]
    assert option(argv, "-smbios") == ["type=1,product=OpenStack Nova"]
    argv = cmdline.build(spec(nics=(data,)), launch(taps=((7,),)))
    assert "-smbios" not in argv


def test_vnc_display_from_network_port() -> None:
    argv = cmdline.build(spec(vnc_bind_address="127.0.0.1"), launch(network_port=11005))
    assert option(argv, "-vnc") == ["127.0.0.1:5105"] and "-display" not in argv
    assert option(argv, "-device")[-1] == "usb-tablet"
    hvp: dict[str, Any] = {"vnc_bind_address": "::1", "vnc_password_file": "/etc/pw"}
    argv = cmdline.build(spec(**hvp), launch(network_port=5901))
    assert option(argv, "-vnc") == ["[::1]:1,password=on"]
    argv = cmdline.build(spec(vnc_bind_address="0.0.0.0"), launch(network_port=5902))
    assert option(argv, "-vnc") == [":2"]
    argv = cmdline.build(spec(vnc_bind_address="127.0.0.1"), launch(network_port=None))
    assert option(argv, "-vnc") == ["none"]
    with pytest.raises(errors.OpExecError, match="Invalid vnc_bind_address 'eth0'"):
        cmdline.build(spec(vnc_bind_address="eth0"), launch(network_port=11005))


def test_vnc_served_through_the_node_in_namespaces() -> None:
    """use_namespaces: QEMU's VNC listens nowhere (noded hands it its
    clients), with the same password and TLS options."""
    hvp: dict[str, Any] = {"vnc_bind_address": "0.0.0.0", "vnc_password_file": "/etc/pw"}
    argv = cmdline.build(spec(**hvp), launch(network_port=11005, socket_fds=(7, 8)))
    assert option(argv, "-vnc") == ["none,password=on"] and "-display" not in argv
    assert option(argv, "-device")[-1] == "usb-tablet"
    hvp = {"vnc_bind_address": "::1", "vnc_tls": True, "vnc_x509_path": "/etc/x509"}
    argv = cmdline.build(spec(**hvp), launch(network_port=11005, socket_fds=(7, 8)))
    assert option(argv, "-vnc") == ["none,tls-creds=vnctls0"]
    assert option(argv, "-object") == [
        "tls-creds-x509,id=vnctls0,endpoint=server,dir=/etc/x509,verify-peer=no"
    ]
    # No display for the guest at all without a valid port, as without namespaces.
    argv = cmdline.build(spec(**hvp), launch(network_port=5900, socket_fds=(7, 8)))
    assert option(argv, "-vnc") == ["none"] and "-object" not in argv


def test_tls_certificates_bound_into_the_namespace(tmp_path: Path) -> None:
    """vnc_x509_path is bound read-only, only when vnc_tls uses it."""
    tls: dict[str, Any] = {"vnc_tls": True, "vnc_x509_path": str(tmp_path)}
    assert (str(tmp_path), False) in isolation.binds(spec(**tls), [])
    off = {**tls, "vnc_tls": False}
    assert str(tmp_path) not in dict(isolation.binds(spec(**off), []))


@pytest.mark.parametrize(
    ("hvp", "objects", "vnc"),
    [
        ({"vnc_tls": True}, ["tls-creds-anon,id=vnctls0,endpoint=server"],
         "127.0.0.1:1,tls-creds=vnctls0"),
        ({"vnc_tls": True, "vnc_x509_path": "/x", "vnc_x509_verify": True,
          "vnc_password_file": "/pw"},
         ["tls-creds-x509,id=vnctls0,endpoint=server,dir=/x,verify-peer=yes"],
         "127.0.0.1:1,tls-creds=vnctls0,password=on"),
        ({"vnc_tls": False, "vnc_x509_path": "/x"}, [], "127.0.0.1:1"),
    ],
)  # fmt: skip
def test_vnc_tls_as_ganeti_maps_it(hvp: dict[str, Any], objects: list[str], vnc: str) -> None:
    """vnc_tls: anonymous TLS, or the certificates of vnc_x509_path (the
    client's checked with vnc_x509_verify), as QEMU's tls-creds object."""
    argv = cmdline.build(spec(vnc_bind_address="127.0.0.1", **hvp), launch(network_port=5901))
    assert option(argv, "-object") == objects
    assert option(argv, "-vnc") == [vnc]


def test_misc_parameters() -> None:
    hvp: dict[str, Any] = {
        "acpi": False,
        "reboot_behavior": "exit",
        "cpu_type": "qemu64",
        "machine_version": "pc-q35-7.2",
        "use_localtime": True,
        "keymap": "de",
        "kvm_extra": "-device  virtio-rng-pci -no-hpet",
    }
    argv = cmdline.build(spec(**hvp), launch(machine="pc-q35-7.2"))
    assert "-no-acpi" in argv and "-no-reboot" in argv
    assert option(argv, "-cpu") == ["qemu64"]
    assert option(argv, "-rtc") == ["base=localtime"]
    assert option(argv, "-k") == ["de"]
    # kvm_extra comes last, split on spaces (empty words dropped)
    assert argv[-3:] == ["-device", "virtio-rng-pci", "-no-hpet"]


def test_security_options() -> None:
    argv = cmdline.build(spec(), launch(runas="5000:5000", chroot=Path("/run/kvm/chroot/i")))
    assert option(argv, "-runas") == ["5000:5000"]
    assert option(argv, "-chroot") == ["/run/kvm/chroot/i"]
