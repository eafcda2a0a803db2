"""The hypervisor parameter tables: Ganeti's kvm names, types and defaults; each
check's good and bad values; the compatibility rule for parameters Corral does
not implement; the checks across parameters; the node-side checks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral import hvparams as HV
from corral import params as P
from corral import paramtypes as typed_params
from corral.hvparams import kvm, rows

# Ganeti 3.0.2's constants.HVC_DEFAULTS[HT_KVM], written out (the conformance
# test compares the table with Ganeti's library itself).
GANETI_KVM_DEFAULTS: dict[str, Any] = {
    "acpi": True, "boot_order": "disk", "cdrom2_image_path": "", "cdrom_disk_type": "",
    "cdrom_image_path": "", "cpu_cores": 0, "cpu_mask": "all", "cpu_sockets": 0,
    "cpu_threads": 0, "cpu_type": "", "disk_aio": "threads", "disk_cache": "default",
    "disk_discard": "default", "disk_type": "paravirtual", "floppy_image_path": "",
    "initrd_path": "", "kernel_args": "ro", "kernel_path": "/boot/vmlinuz-3-kvmU", "keymap": "",
    "kvm_extra": "", "kvm_flag": "", "kvm_path": "/usr/bin/kvm", "kvm_pci_reservations": 12,
    "machine_version": "", "mem_path": "", "migration_bandwidth": 32, "migration_caps": "",
    "migration_downtime": 30, "migration_mode": "live", "migration_port": 8102,
    "nic_type": "paravirtual", "reboot_behavior": "reboot", "root_path": "/dev/vda1",
    "scsi_controller_type": "lsi", "security_domain": "", "security_model": "none",
    "serial_console": True, "serial_speed": 38400, "soundhw": "", "spice_bind": "",
    "spice_image_compression": "", "spice_ip_version": 0, "spice_jpeg_wan_compression": "",
    "spice_password_file": "", "spice_playback_compression": True, "spice_streaming_video": "",
    "spice_tls_ciphers": "HIGH:-DES:-3DES:-EXPORT:-DH", "spice_use_tls": False,
    "spice_use_vdagent": True, "spice_zlib_glz_wan_compression": "", "usb_devices": "",
    "usb_mouse": "", "use_chroot": False, "use_guest_agent": False, "use_localtime": False,
    "user_shutdown": False, "vga": "", "vhost_net": False, "virtio_net_queues": 1,
    "vnc_bind_address": "", "vnc_password_file": "", "vnc_tls": False, "vnc_x509_path": "",
    "vnc_x509_verify": False, "vnet_hdr": True,
}  # fmt: skip

# A valid value other than the default for every parameter Corral does not build.
NOT_BUILT_SAMPLES: dict[str, Any] = {
    "cdrom2_image_path": "/srv/two.iso", "cdrom_disk_type": "ide", "cpu_cores": 2,
    "cpu_mask": "0-1", "cpu_sockets": 1, "cpu_threads": 2, "disk_discard": "unmap",
    "floppy_image_path": "/srv/f.img", "kvm_pci_reservations": 4, "migration_caps": "x-rdma",
    "scsi_controller_type": "megasas", "soundhw": "hda", "spice_bind": "127.0.0.1",
    "spice_image_compression": "glz", "spice_ip_version": 4, "spice_jpeg_wan_compression": "auto",
    "spice_password_file": "/etc/spice.pw", "spice_playback_compression": False,
    "spice_streaming_video": "all", "spice_tls_ciphers": "HIGH", "spice_use_tls": True,
    "spice_use_vdagent": False, "spice_zlib_glz_wan_compression": "never", "usb_devices": "a:b",
    "use_guest_agent": True, "vga": "std", "virtio_net_queues": 4, "vnc_tls": True,
    "vnc_x509_path": "/etc/x509", "vnc_x509_verify": True,
}  # fmt: skip


def refused(hv: str, values: dict[str, Any], *words: str, filled: bool = False) -> str:
    with pytest.raises(errors.OpPrereqError) as err:
        checked = P.check_hvparams(hv, values)
        if filled:
            P.check_filled_hvparams(hv, P.fill(P.HV_DEFAULTS[hv], checked))
    message, code = err.value.args
    assert code == "wrong_input"
    assert "\n" not in message
    for word in words:
        assert word in message
    return str(message)


def accepted(hv: str, values: dict[str, Any]) -> dict[str, Any]:
    checked = P.check_hvparams(hv, values)
    P.check_filled_hvparams(hv, P.fill(P.HV_DEFAULTS[hv], checked))
    return checked


def test_the_kvm_table_has_ganetis_65_names_and_defaults() -> None:
    ganetis = {k: v for k, v in P.HV_DEFAULTS["kvm"].items() if k not in kvm.EXTENSIONS}
    assert ganetis == GANETI_KVM_DEFAULTS
    names = [p.name for p in kvm.PARAMS if p.name not in kvm.EXTENSIONS]
    assert len(names) == 65 and names == sorted(GANETI_KVM_DEFAULTS)


def test_corrals_own_kvm_parameters() -> None:
    assert {"use_network_rules", "use_namespaces"} == kvm.EXTENSIONS
    assert not kvm.EXTENSIONS & set(GANETI_KVM_DEFAULTS)
    assert P.HV_DEFAULTS["kvm"]["use_network_rules"] is True
    assert accepted("kvm", {"use_network_rules": False}) == {"use_network_rules": False}
    refused("kvm", {"use_network_rules": "maybe"}, "use_network_rules")
    assert P.HV_DEFAULTS["kvm"]["use_namespaces"] is False
    refused("kvm", {"use_namespaces": "maybe"}, "use_namespaces")


def test_the_types_are_those_the_commands_check() -> None:
    for hv in ("fake", "kvm"):
        for name, kind in P.HV_TYPES[hv].items():
            assert typed_params.HV_PARAMETER_TYPES[name] == kind, name
    assert P.HV_TYPES["kvm"]["root_path"] == rows.VTYPE_MAYBE_STRING
    assert (rows.VTYPE_STRING, rows.VTYPE_INT, rows.VTYPE_BOOL) == (P.T_STRING, P.T_INT, P.T_BOOL)


def test_every_default_passes_its_own_checks() -> None:
    for hv in ("fake", "kvm"):
        HV.check_filled(hv, P.HV_DEFAULTS[hv])


def test_the_built_sets_name_real_parameters_and_values() -> None:
    names = {p.name for p in kvm.PARAMS}
    assert names >= kvm.BUILT
    assert set(kvm.BUILT_VALUES) <= kvm.BUILT
    assert set(NOT_BUILT_SAMPLES) == names - kvm.BUILT
    for p in kvm.PARAMS:
        assert p.built == (p.name in kvm.BUILT)
        assert all(p.check.test is None or p.check.test(v) for v in p.only), p.name
        assert not p.only or p.default in p.only


GOOD: list[tuple[str, Any]] = [
    ("kvm_path", "/usr/bin/qemu-system-x86_64"),
    ("kernel_path", ""),
    ("kernel_path", "/boot/vmlinuz"),
    ("initrd_path", "/boot/initrd.img"),
    ("cdrom_image_path", "https://example.com/d.iso"),
    ("mem_path", "/dev/hugepages"),
    ("vnc_password_file", "/etc/ganeti/vnc.pw"),
    ("boot_order", "network"),
    ("nic_type", "e1000"),
    ("disk_type", "ide"),
    ("disk_cache", "writeback"),
    ("disk_aio", ""),
    ("kvm_flag", "disabled"),
    ("kvm_flag", ""),
    ("security_model", "pool"),
    ("reboot_behavior", "exit"),
    ("usb_mouse", "tablet"),
    ("migration_port", "1"),
    ("migration_port", 65534),
    ("migration_bandwidth", "0"),
    ("migration_downtime", 0),
    ("migration_mode", "non-live"),
    ("acpi", "false"),
    ("serial_speed", "115200"),
]
BAD: list[tuple[str, Any, str]] = [
    ("kvm_path", "", "cannot be empty"),
    ("kvm_path", "usr/bin/kvm", "absolute"),
    ("kernel_path", "/boot/../boot/vmlinuz", "normalized"),
    ("initrd_path", "initrd.img", "absolute"),
    ("cdrom_image_path", "gopher://x/d.iso", "URL"),
    ("mem_path", "hugepages", "absolute"),
    ("boot_order", "tape", "disk, cdrom, floppy, network"),
    ("boot_order", "", "cannot be empty"),
    ("nic_type", "virtio", "paravirtual, e1000"),
    ("disk_type", "nvme", "paravirtual, ide"),
    ("disk_cache", "unsafe", "writethrough"),
    ("disk_aio", "io_uring", "threads, native"),
    ("kvm_flag", "on", "enabled, disabled"),
    ("security_model", "root", "none, user, pool"),
    ("reboot_behavior", "halt", "reboot, exit"),
    ("usb_mouse", "trackball", "mouse, tablet"),
    ("migration_port", 0, "1 to 65534"),
    ("migration_port", 65535, "1 to 65534"),
    ("migration_bandwidth", -1, "0 or more"),
    ("migration_downtime", "-5", "0 or more"),
    ("migration_mode", "offline", "live, non-live"),
    ("migration_mode", "", "cannot be empty"),
    ("cpu_mask", "2-1", "CPU numbers"),
    ("cpu_mask", "0-1-2", "CPU numbers"),
    ("spice_ip_version", 5, "4, 6"),
    ("kvm_pci_reservations", 33, "0 to 32"),
    ("virtio_net_queues", 9, "1 to 8"),
    ("spice_streaming_video", "some", "off, all, filter"),
]


@pytest.mark.parametrize(("name", "value"), GOOD)
def test_good_values_are_accepted(name: str, value: Any) -> None:
    accepted("kvm", {name: value})


@pytest.mark.parametrize(("name", "value", "hint"), BAD)
def test_bad_values_are_refused_saying_what_to_give(name: str, value: Any, hint: str) -> None:
    message = refused("kvm", {name: value}, f"'{name}'", hint)
    assert "not implemented" not in message


def test_types_are_converted_as_given_on_the_command_line() -> None:
    checked = P.check_hvparams("kvm", {"acpi": "false", "migration_port": "9000", "vnet_hdr": 0})
    assert checked == {"acpi": False, "migration_port": 9000, "vnet_hdr": False}
    refused("kvm", {"migration_port": "many"}, "integer")


def test_cpu_masks_as_ganeti_parses_them() -> None:
    mask: str | int
    for mask in ("all", "0", "0-3,5", "0-1:all:2,3", "1::2"):
        assert rows.multi_cpu_mask_ok(mask), mask
    for mask in ("a", "0-1-2", "3-1", "-1", "1,", 7):
        assert not rows.multi_cpu_mask_ok(mask), mask


@pytest.mark.parametrize(("name", "value"), sorted(NOT_BUILT_SAMPLES.items()))
def test_a_parameter_not_built_takes_only_its_default(name: str, value: Any) -> None:
    default = GANETI_KVM_DEFAULTS[name]
    assert accepted("kvm", {name: default}) == {name: default}
    assert P.check_hvparams("kvm", {name: None}, allow_none=True) == {name: None}
    assert P.check_hvparams("kvm", {name: "default"}, allow_none=True) == {name: None}
    message = refused("kvm", {name: value}, f"'{name}'", "not implemented by Corral yet")
    assert message.endswith(f"leave it at its default ({default!r})")


def test_values_not_built_of_a_built_parameter_are_refused() -> None:
    assert refused("kvm", {"boot_order": "floppy"}) == (
        "The value 'floppy' of the kvm hypervisor parameter 'boot_order' is not implemented"
        " by Corral yet; use one of disk, cdrom, network"
    )
    refused("kvm", {"disk_type": "scsi-hd"}, "use one of paravirtual, ide")


def test_the_not_built_message() -> None:
    assert refused("kvm", {"spice_bind": "127.0.0.1"}) == (
        "The kvm hypervisor parameter 'spice_bind' is not implemented by Corral yet;"
        " leave it at its default ('')"
    )


CROSS_BAD: list[tuple[dict[str, Any], str]] = [
    ({"boot_order": "cdrom"}, "set cdrom_image_path"),
    ({"kernel_path": "/vmlinuz", "root_path": ""}, "set root_path"),
    ({"security_model": "user"}, "set security_domain"),
    ({"security_model": "none", "security_domain": "nobody"}, "security_domain to ''"),
    ({"security_model": "pool", "security_domain": "nobody"}, "'pool'"),
    ({"serial_speed": 12345}, "115200"),
    ({"serial_speed": 0}, "38400"),
    ({"disk_aio": "native"}, "disk_cache=none"),
    ({"disk_aio": "native", "disk_cache": "writeback"}, "disk_cache=none"),
]
CROSS_GOOD: list[dict[str, Any]] = [
    {"boot_order": "cdrom", "cdrom_image_path": "/srv/install.iso"},
    {"kernel_path": "", "root_path": ""},
    {"security_model": "user", "security_domain": "nobody"},
    {"serial_console": False, "serial_speed": 12345},
    {"disk_aio": "native", "disk_cache": "none"},
    {"use_namespaces": True, "vnc_bind_address": "127.0.0.1"},
    {"use_namespaces": True, "vnc_bind_address": "0.0.0.0", "vnc_password_file": "/etc/pw"},
]


@pytest.mark.parametrize(("values", "hint"), CROSS_BAD)
def test_checks_across_parameters_refuse(values: dict[str, Any], hint: str) -> None:
    P.check_hvparams("kvm", values)  # each value is fine alone
    refused("kvm", values, hint, filled=True)


@pytest.mark.parametrize("values", CROSS_GOOD)
def test_checks_across_parameters_accept(values: dict[str, Any]) -> None:
    accepted("kvm", values)


def test_checks_across_not_built_parameters_as_ganeti() -> None:
    # Not settable through Corral, but a filled dict from elsewhere is judged as Ganeti does.
    spice = {"spice_bind": "", "spice_use_tls": True}
    assert kvm_cross(spice) == "SPICE: spice_use_tls needs spice_bind: set spice_bind, or" + (
        " spice_use_tls to its default"
    )
    assert "make them agree" in str(kvm_cross({"spice_bind": "::1", "spice_ip_version": 4}))
    assert kvm_cross({"spice_bind": "::1", "spice_ip_version": 6}) is None
    assert "set vnc_x509_path" in str(kvm_cross({"vnc_x509_verify": True}))


def kvm_cross(values: dict[str, Any]) -> str | None:
    full = {**GANETI_KVM_DEFAULTS, **values}
    for check in HV.TABLES["kvm"].cross_checks:
        problem = check(full)
        if problem is not None:
            return problem
    return None


def test_filled_parameters_none_and_missing_names_are_the_defaults() -> None:
    P.check_filled_hvparams("kvm", {"kernel_path": None, "security_model": "none"})
    with pytest.raises(errors.OpPrereqError, match="Unknown kvm hypervisor parameter 'colour'"):
        P.check_filled_hvparams("kvm", {"colour": "red"})
    with pytest.raises(errors.OpPrereqError, match="Unknown hypervisor 'xen-pvm'"):
        P.check_filled_hvparams("xen-pvm", {})


def test_the_fake_hypervisor_keeps_its_errors() -> None:
    assert refused("fake", {"migration_mode": "teleport"}) == (
        "Invalid value 'teleport' for the fake hypervisor parameter 'migration_mode':"
        " use one of live, non-live"
    )
    refused("fake", {"speed": 9}, "Unknown fake hypervisor parameter 'speed'")
    refused("fake", {"kernel_path": ""}, "Unknown fake hypervisor parameter")
    assert accepted("fake", {"migration_mode": "non-live"}) == {"migration_mode": "non-live"}


def _node_setup(tmp_path: Path) -> dict[str, Any]:
    kvm_bin = tmp_path / "kvm"
    kvm_bin.write_text("#!/bin/sh\n")
    kvm_bin.chmod(0o755)
    kernel, pw = tmp_path / "vmlinuz", tmp_path / "vnc.pw"
    kernel.write_bytes(b"")
    pw.write_text("secret\n")
    return {
        "kvm_path": str(kvm_bin),
        "kernel_path": str(kernel),
        "vnc_password_file": str(pw),
        "vnc_bind_address": "127.0.0.1",
        "mem_path": str(tmp_path),
        "cdrom_image_path": "http://example.com/d.iso",
    }


def test_node_problems_none_when_everything_is_there(tmp_path: Path) -> None:
    hv = _node_setup(tmp_path)
    assert HV.node_problems("kvm", hv) == []
    for bind in ("lo", "::1", "/run/vnc.sock"):
        assert HV.node_problems("kvm", {**hv, "vnc_bind_address": bind}) == []
    user = {"security_model": "user", "security_domain": "root"}
    assert HV.node_problems("kvm", {**hv, **user}) == []
    assert HV.node_problems("fake", {"migration_mode": "live"}) == []


def test_node_problems_name_each_missing_thing(tmp_path: Path) -> None:
    hv = _node_setup(tmp_path)
    os.chmod(hv["kvm_path"], 0o644)
    missing = str(tmp_path / "nothing")
    bad = {
        **hv,
        "kernel_path": missing,
        "initrd_path": missing,
        "vnc_password_file": missing,
        "mem_path": hv["kernel_path"],
        "cdrom_image_path": missing,
        "vnc_bind_address": "no-such-if0",
        "security_model": "user",
        "security_domain": "corral-no-such-user",
    }
    problems = HV.node_problems("kvm", bad)
    assert problems == [
        f"cdrom_image_path '{missing}' does not exist or is not a file on this node:"
        " create it, or change cdrom_image_path",
        f"initrd_path '{missing}' does not exist or is not a file on this node:"
        " create it, or change initrd_path",
        f"kernel_path '{missing}' does not exist or is not a file on this node:"
        " create it, or change kernel_path",
        f"kvm_path '{hv['kvm_path']}' does not exist or is not an executable file on this"
        " node: create it, or change kvm_path",
        f"mem_path '{hv['kernel_path']}' is not a directory on this node:"
        " create it, or change mem_path",
        f"vnc_password_file '{missing}' does not exist or is not a file on this node:"
        " create it, or change vnc_password_file",
        "The security domain user 'corral-no-such-user' does not exist on this node:"
        " create it, or change security_domain",
        "vnc_bind_address 'no-such-if0' is neither an IP address, an interface of this node,"
        " nor an absolute path: give one of those",
    ]


def test_node_problems_from_qemus_own_answers(tmp_path: Path) -> None:
    hv = _node_setup(tmp_path)
    machines = "Supported machines are:\npc-i440fx-7.2        Standard PC (i440FX + PIIX, 1996)\n"
    known = {**hv, "machine_version": "pc-i440fx-7.2"}
    assert HV.node_problems("kvm", known, qemu_machines=machines) == []
    problems = HV.node_problems("kvm", {**hv, "machine_version": "pc-q99"}, qemu_machines=machines)
    assert problems == [
        f"{hv['kvm_path']} does not support the machine version 'pc-q99': see its"
        " '-machine help' for the versions it has"
    ]
    spice = {**hv, "vnc_bind_address": "", "spice_bind": "127.0.0.1"}
    assert HV.node_problems("kvm", spice, qemu_help="-spice [port=<nr>]\n") == []
    assert HV.node_problems("kvm", spice, qemu_help="-vnc display\n") == [
        f"{hv['kvm_path']} has no SPICE support: set spice_bind to ''"
    ]
    both = {**spice, "vnc_bind_address": "127.0.0.1", "spice_bind": "nonexistent0"}
    assert HV.node_problems("kvm", both, qemu_help="-spice x\n") == [
        "Both SPICE and VNC are configured: set vnc_bind_address or spice_bind to ''",
        "spice_bind 'nonexistent0' is neither an IP address nor an interface of this node",
    ]
