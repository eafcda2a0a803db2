"""Ganeti 3.0.2's own library and Corral agree on the hypervisor parameters:
the defaults and types exactly, and, for sample values of the parameters Corral
implements, whether ``KVMHypervisor.CheckParameterSyntax`` (with Ganeti's
defaults filled in) accepts them. Parameters Corral does not implement are left
out: Corral refuses their non-default values by design."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corral import errors
from corral import hvparams as HV
from corral import params as P
from corral.hvparams import kvm
from tests.conformance.ganeti import ganeti_library
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import config_serial, failed, ok

# Overrides of the defaults, each judged as a whole; typed, as after Ganeti's
# ForceDictType. Only built parameters and built values.
SAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("kvm", {}),
    ("kvm", {"kvm_path": "/usr/bin/qemu-system-x86_64"}),
    ("kvm", {"kvm_path": ""}),
    ("kvm", {"kvm_path": "usr/bin/kvm"}),
    ("kvm", {"kvm_path": "/usr/bin/../bin/kvm"}),
    ("kvm", {"kernel_path": ""}),
    ("kvm", {"kernel_path": "/boot/vmlinuz"}),
    ("kvm", {"kernel_path": "boot/vmlinuz"}),
    ("kvm", {"kernel_path": "/boot//vmlinuz"}),
    ("kvm", {"kernel_path": "/vmlinuz", "root_path": ""}),
    ("kvm", {"kernel_path": "/vmlinuz", "root_path": None}),
    ("kvm", {"kernel_path": "", "root_path": ""}),
    ("kvm", {"initrd_path": "/boot/initrd.img"}),
    ("kvm", {"initrd_path": "initrd.img"}),
    ("kvm", {"kernel_args": "console=ttyS0 quiet"}),
    ("kvm", {"boot_order": "cdrom"}),
    ("kvm", {"boot_order": "cdrom", "cdrom_image_path": "/srv/install.iso"}),
    ("kvm", {"boot_order": "cdrom", "cdrom_image_path": "http://example.com/a.iso"}),
    ("kvm", {"cdrom_image_path": "install.iso"}),
    ("kvm", {"cdrom_image_path": "gopher://example.com/a.iso"}),
    ("kvm", {"boot_order": "network"}),
    ("kvm", {"boot_order": "tape"}),
    ("kvm", {"boot_order": ""}),
    ("kvm", {"acpi": False}),
    ("kvm", {"serial_speed": 115200}),
    ("kvm", {"serial_speed": 12345}),
    ("kvm", {"serial_speed": 0}),
    ("kvm", {"serial_console": False, "serial_speed": 12345}),
    ("kvm", {"vnc_bind_address": "0.0.0.0"}),
    ("kvm", {"vnc_bind_address": "anything"}),
    ("kvm", {"vnc_password_file": "/etc/vnc.pw"}),
    ("kvm", {"vnc_password_file": "vnc.pw"}),
    ("kvm", {"disk_type": "ide"}),
    ("kvm", {"disk_type": "floppy"}),
    ("kvm", {"disk_type": ""}),
    ("kvm", {"nic_type": "e1000"}),
    ("kvm", {"nic_type": "rtl8139"}),
    ("kvm", {"nic_type": "virtio"}),
    ("kvm", {"disk_cache": "none"}),
    ("kvm", {"disk_cache": "unsafe"}),
    ("kvm", {"disk_cache": ""}),
    ("kvm", {"disk_aio": "native"}),
    ("kvm", {"disk_aio": "native", "disk_cache": "none"}),
    ("kvm", {"disk_aio": ""}),
    ("kvm", {"disk_aio": "io_uring"}),
    ("kvm", {"kvm_flag": "enabled"}),
    ("kvm", {"kvm_flag": "disabled"}),
    ("kvm", {"kvm_flag": "on"}),
    ("kvm", {"security_model": "user"}),
    ("kvm", {"security_model": "user", "security_domain": "nobody"}),
    ("kvm", {"security_model": "pool"}),
    ("kvm", {"security_model": "pool", "security_domain": "nobody"}),
    ("kvm", {"security_domain": "nobody"}),
    ("kvm", {"security_model": "root"}),
    ("kvm", {"security_model": ""}),
    ("kvm", {"use_chroot": True}),
    ("kvm", {"migration_port": 1}),
    ("kvm", {"migration_port": 65534}),
    ("kvm", {"migration_port": 65535}),
    ("kvm", {"migration_port": 0}),
    ("kvm", {"migration_port": -1}),
    ("kvm", {"migration_bandwidth": 0}),
    ("kvm", {"migration_bandwidth": -1}),
    ("kvm", {"migration_downtime": 0}),
    ("kvm", {"migration_downtime": -5}),
    ("kvm", {"migration_mode": "non-live"}),
    ("kvm", {"migration_mode": "offline"}),
    ("kvm", {"migration_mode": ""}),
    ("kvm", {"cpu_type": "host"}),
    ("kvm", {"machine_version": "pc"}),
    ("kvm", {"kvm_extra": "-no-hpet"}),
    ("kvm", {"user_shutdown": True}),
    ("kvm", {"reboot_behavior": "exit"}),
    ("kvm", {"reboot_behavior": "halt"}),
    ("kvm", {"vhost_net": True, "vnet_hdr": False}),
    ("kvm", {"mem_path": "/dev/hugepages"}),
    ("kvm", {"mem_path": "hugepages"}),
    ("kvm", {"use_localtime": True}),
    ("kvm", {"keymap": "de"}),
    ("kvm", {"usb_mouse": "tablet"}),
    ("kvm", {"usb_mouse": "trackball"}),
    ("fake", {}),
    ("fake", {"migration_mode": "non-live"}),
    ("fake", {"migration_mode": "teleport"}),
    ("fake", {"migration_mode": ""}),
]

_GANETI = """
import json, sys
from ganeti import constants as C, errors, hypervisor
samples = json.load(sys.stdin)
out = {"defaults": {}, "types": {}, "outcomes": []}
for hv in (C.HT_KVM, C.HT_FAKE):
    out["defaults"][hv] = C.HVC_DEFAULTS[hv]
    out["types"][hv] = {k: C.HVS_PARAMETER_TYPES[k] for k in C.HVC_DEFAULTS[hv]}
for hv, values in samples:
    filled = dict(C.HVC_DEFAULTS[hv], **values)
    try:
        hypervisor.GetHypervisorClass(hv).CheckParameterSyntax(filled)
        out["outcomes"].append(True)
    except errors.HypervisorError:
        out["outcomes"].append(False)
print(json.dumps(out))
"""


def ganetis(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` without Corral's own kvm parameters (Ganeti has none of them)."""
    return {k: v for k, v in values.items() if k not in kvm.EXTENSIONS}


def corral_accepts(hv: str, values: dict[str, Any]) -> bool:
    """Corral's checks of a parameter change, then of the filled result."""
    try:
        checked = P.check_hvparams(hv, values)
        P.check_filled_hvparams(hv, P.fill(P.HV_DEFAULTS[hv], checked))
    except errors.OpPrereqError:
        return False
    return True


def test_samples_use_built_parameters_only() -> None:
    for hv, values in SAMPLES:
        for name in values:
            assert HV.TABLES[hv].params[name].built, name


def test_same_defaults_types_and_verdicts_as_ganeti(ganeti: Path) -> None:
    result = ganeti_library(_GANETI, stdin=json.dumps(SAMPLES))
    assert result.rc == 0, result.stderr
    theirs = json.loads(result.stdout)
    assert theirs["defaults"] == {
        "kvm": ganetis(P.HV_DEFAULTS["kvm"]),
        "fake": P.HV_DEFAULTS["fake"],
    }
    assert theirs["types"] == {"kvm": ganetis(P.HV_TYPES["kvm"]), "fake": P.HV_TYPES["fake"]}
    ours = [corral_accepts(hv, values) for hv, values in SAMPLES]
    differing = [s for s, a, b in zip(SAMPLES, ours, theirs["outcomes"], strict=True) if a != b]
    assert differing == []
    assert 20 < theirs["outcomes"].count(False) < len(SAMPLES) - 20  # both kinds well sampled


def test_refusals_through_the_commands(gcluster: TestCluster) -> None:
    """A fake cluster as before; kvm values refused by masterd, nothing changed."""
    before = config_serial(gcluster)
    for arg, text in (
        ("kvm:spice_bind=127.0.0.1", "'spice_bind' is not implemented by Corral yet;"),
        ("kvm:migration_port=65535", "'migration_port': use a port from 1 to 65534"),
        ("kvm:cpu_mask=3-1", "'cpu_mask': use CPU numbers"),
        ("fake:migration_mode=teleport", "'migration_mode': use one of live, non-live"),
        ("fake:kernel_path=/vmlinuz", "Unknown fake hypervisor parameter 'kernel_path'"),
    ):
        failed(gcluster.gnt("cluster", "modify", "-H", arg), text, "wrong_input")
    assert config_serial(gcluster) == before
    info = ok(gcluster.gnt("cluster", "info"))
    assert "kvm" not in info and "migration_mode: live" in info
