"""The kvm hypervisor's parameters: Ganeti 3.0.2's 65 names, types and defaults
(``constants.HVC_DEFAULTS[HT_KVM]``), their checks (``hv_kvm.PARAMETERS``), and
which of them Corral implements (``BUILT``, ``BUILT_VALUES``); then Corral's
own (``EXTENSIONS``), which Ganeti does not have.
"""

from __future__ import annotations

import os
from typing import Any

from corral.hvparams import rows as R
from corral.hvparams.rows import VTYPE_BOOL as BOOL
from corral.hvparams.rows import VTYPE_INT as INT
from corral.hvparams.rows import VTYPE_MAYBE_STRING as MAYBE_STRING
from corral.hvparams.rows import VTYPE_STRING as STRING

# Ganeti's value sets (constants.HT_KVM_VALID_*, HT_VALID_*), in a readable order.
BOOT_ORDERS = ("disk", "cdrom", "floppy", "network")
NIC_TYPES = (
    "paravirtual", "e1000", "rtl8139", "i82551", "i82557b", "i82559er", "ne2k_isa", "ne2k_pci",
    "pcnet",
)  # fmt: skip
DISK_TYPES = (
    "paravirtual", "ide", "scsi", "sd", "mtd", "pflash", "scsi-block", "scsi-generic", "scsi-hd",
    "scsi-cd",
)  # fmt: skip
SCSI_CONTROLLER_TYPES = ("lsi", "megasas", "virtio-scsi-pci")
DISCARD_TYPES = ("default", "ignore", "unmap")
MOUSE_TYPES = ("mouse", "tablet")
CACHE_TYPES = ("default", "none", "writethrough", "writeback")
AIO_TYPES = ("threads", "native")
SECURITY_MODELS = ("none", "user", "pool")
KVM_FLAGS = ("enabled", "disabled")
REBOOT_BEHAVIORS = ("reboot", "exit")
SPICE_LOSSLESS = ("auto_glz", "auto_lz", "glz", "lz", "quic", "off")
SPICE_LOSSY = ("auto", "always", "never")
SPICE_VIDEO = ("off", "all", "filter")
SERIAL_SPEEDS = (
    75, 110, 300, 600, 1200, 1800, 2400, 4800, 9600, 14400, 19200, 28800, 38400, 57600, 115200,
    230400, 345600, 460800,
)  # fmt: skip
QEMU_PCI_SLOTS = 32

# What Corral's kvm implements: simple mappings onto QEMU's command line. The
# others take only Ganeti's default (the compatibility rule); grow these sets
# as the hypervisor grows.
BUILT = frozenset(
    {
        "acpi", "boot_order", "cdrom_image_path", "cpu_type", "disk_aio", "disk_cache",
        "disk_type", "initrd_path", "kernel_args", "kernel_path", "keymap", "kvm_extra",
        "kvm_flag", "kvm_path", "machine_version", "mem_path", "migration_bandwidth",
        "migration_downtime", "migration_mode", "migration_port", "nic_type", "reboot_behavior",
        "root_path", "security_domain", "security_model", "serial_console", "serial_speed",
        "usb_mouse", "use_chroot", "use_localtime", "user_shutdown", "vhost_net",
        "vnc_bind_address", "vnc_password_file", "vnet_hdr", "use_network_rules",
        "use_namespaces",
    }
)  # fmt: skip
# Built parameters of which Corral implements only some values.
BUILT_VALUES: dict[str, tuple[Any, ...]] = {
    "boot_order": ("disk", "cdrom", "network"),
    "disk_type": ("paravirtual", "ide"),
}


def _executable_file(path: Any) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


# The kvm binary must also be executable (Ganeti only asks for a file).
_KVM_PATH = R.Check(
    R.is_norm_abs_path,
    "use an absolute, normalized path",
    True,
    _executable_file,
    "does not exist or is not an executable file",
)
_SPICE_IP_VERSION = R.Check(lambda v: v in (0, 4, 6), "use 4, 6, or 0 for any")
_PCI_RESERVATIONS = R.int_range(0, QEMU_PCI_SLOTS, f"use 0 to {QEMU_PCI_SLOTS} PCI slots")

_ROWS: tuple[tuple[str, str, Any, R.Check], ...] = (
    ("acpi", BOOL, True, R.NO_CHECK),
    ("boot_order", STRING, "disk", R.one_of(BOOT_ORDERS, True)),
    ("cdrom2_image_path", STRING, "", R.FILE_OR_URL_OPT),
    ("cdrom_disk_type", STRING, "", R.one_of(DISK_TYPES, False)),
    ("cdrom_image_path", STRING, "", R.FILE_OR_URL_OPT),
    ("cpu_cores", INT, 0, R.NON_NEGATIVE_OPT),
    ("cpu_mask", STRING, "all", R.MULTI_CPU_MASK_OPT),
    ("cpu_sockets", INT, 0, R.NON_NEGATIVE_OPT),
    ("cpu_threads", INT, 0, R.NON_NEGATIVE_OPT),
    ("cpu_type", STRING, "", R.NO_CHECK),
    ("disk_aio", STRING, "threads", R.one_of(AIO_TYPES, False)),
    ("disk_cache", STRING, "default", R.one_of(CACHE_TYPES, True)),
    ("disk_discard", STRING, "default", R.one_of(DISCARD_TYPES, False)),
    ("disk_type", STRING, "paravirtual", R.one_of(DISK_TYPES, True)),
    ("floppy_image_path", STRING, "", R.file_check(False)),
    ("initrd_path", STRING, "", R.file_check(False)),
    ("kernel_args", STRING, "ro", R.NO_CHECK),
    ("kernel_path", STRING, "/boot/vmlinuz-3-kvmU", R.file_check(False)),
    ("keymap", STRING, "", R.NO_CHECK),
    ("kvm_extra", STRING, "", R.NO_CHECK),
    ("kvm_flag", STRING, "", R.one_of(KVM_FLAGS, False)),
    ("kvm_path", STRING, "/usr/bin/kvm", _KVM_PATH),
    ("kvm_pci_reservations", INT, 12, _PCI_RESERVATIONS),
    ("machine_version", STRING, "", R.NO_CHECK),
    ("mem_path", STRING, "", R.DIR_OPT),
    ("migration_bandwidth", INT, 32, R.NON_NEGATIVE_REQ),
    ("migration_caps", STRING, "", R.NO_CHECK),
    ("migration_downtime", INT, 30, R.NON_NEGATIVE_REQ),
    ("migration_mode", STRING, "live", R.MIGRATION_MODE_REQ),
    ("migration_port", INT, 8102, R.NET_PORT_REQ),
    ("nic_type", STRING, "paravirtual", R.one_of(NIC_TYPES, True)),
    ("reboot_behavior", STRING, "reboot", R.one_of(REBOOT_BEHAVIORS, True)),
    ("root_path", MAYBE_STRING, "/dev/vda1", R.NO_CHECK),
    ("scsi_controller_type", STRING, "lsi", R.one_of(SCSI_CONTROLLER_TYPES, True)),
    ("security_domain", STRING, "", R.NO_CHECK),
    ("security_model", STRING, "none", R.one_of(SECURITY_MODELS, True)),
    ("serial_console", BOOL, True, R.NO_CHECK),
    ("serial_speed", INT, 38400, R.NO_CHECK),
    ("soundhw", STRING, "", R.NO_CHECK),
    ("spice_bind", STRING, "", R.NO_CHECK),
    ("spice_image_compression", STRING, "", R.one_of(SPICE_LOSSLESS, False)),
    ("spice_ip_version", INT, 0, _SPICE_IP_VERSION),
    ("spice_jpeg_wan_compression", STRING, "", R.one_of(SPICE_LOSSY, False)),
    ("spice_password_file", STRING, "", R.file_check(False)),
    ("spice_playback_compression", BOOL, True, R.NO_CHECK),
    ("spice_streaming_video", STRING, "", R.one_of(SPICE_VIDEO, False)),
    ("spice_tls_ciphers", STRING, "HIGH:-DES:-3DES:-EXPORT:-DH", R.NO_CHECK),
    ("spice_use_tls", BOOL, False, R.NO_CHECK),
    ("spice_use_vdagent", BOOL, True, R.NO_CHECK),
    ("spice_zlib_glz_wan_compression", STRING, "", R.one_of(SPICE_LOSSY, False)),
    ("usb_devices", STRING, "", R.NO_CHECK),
    ("usb_mouse", STRING, "", R.one_of(MOUSE_TYPES, False)),
    ("use_chroot", BOOL, False, R.NO_CHECK),
    ("use_guest_agent", BOOL, False, R.NO_CHECK),
    ("use_localtime", BOOL, False, R.NO_CHECK),
    ("user_shutdown", BOOL, False, R.NO_CHECK),
    ("vga", STRING, "", R.NO_CHECK),
    ("vhost_net", BOOL, False, R.NO_CHECK),
    ("virtio_net_queues", INT, 1, R.VIRTIO_NET_QUEUES_OPT),
    ("vnc_bind_address", STRING, "", R.NO_CHECK),
    ("vnc_password_file", STRING, "", R.file_check(False)),
    ("vnc_tls", BOOL, False, R.NO_CHECK),
    ("vnc_x509_path", STRING, "", R.DIR_OPT),
    ("vnc_x509_verify", BOOL, False, R.NO_CHECK),
    ("vnet_hdr", BOOL, True, R.NO_CHECK),
)

# Corral's own parameters (the README documents them).  use_network_rules:
# nftables rules keep the user QEMU runs as off the node's networks
# (corral.node.netrules); on by default, as no Ganeti behaviour depends on
# that access, and without effect under security_model=none (QEMU runs as
# root, whom no rule can tell from noded).  use_namespaces: QEMU runs in PID,
# mount, IPC, UTS and network namespaces of its own (corral.node.hypervisor.
# kvm.isolation); off by default, as it takes QEMU off the node's networks and
# files (a VNC console or a kvm_extra path needs more than it sees).
_CORRAL_ROWS: tuple[tuple[str, str, Any, R.Check], ...] = (
    ("use_network_rules", BOOL, True, R.NO_CHECK),
    ("use_namespaces", BOOL, False, R.NO_CHECK),
)
EXTENSIONS = frozenset(name for name, *_ in _CORRAL_ROWS)

PARAMS = tuple(
    R.HvParam(name, kind, default, check, name in BUILT, BUILT_VALUES.get(name, ()))
    for name, kind, default, check in (*_ROWS, *_CORRAL_ROWS)
)
