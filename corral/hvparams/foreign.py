"""Ganeti's hypervisors that Corral does not run: the names of their
parameters, as Ganeti 3.0.2 declares them (their types are in
:mod:`corral.paramtypes`, which lists every hypervisor's).

Ganeti stores OS-specific parameters for any of its hypervisors
(``gnt-os modify -H xen-pvm:...``), so Corral does too: the names are checked
and the values typed; nothing else reads them.
"""

from __future__ import annotations

from collections.abc import Mapping

from corral import hypervisors as H

PARAMS: Mapping[str, frozenset[str]] = {
    H.HT_XEN_PVM: frozenset(
        {
            "blockdev_prefix", "bootloader_args", "bootloader_path", "cpu_cap", "cpu_mask",
            "cpu_weight", "cpuid", "initrd_path", "kernel_args", "kernel_path",
            "migration_mode", "migration_port", "reboot_behavior", "root_path", "soundhw",
            "use_bootloader", "vif_script", "xen_cmd",
        }
    ),
    H.HT_XEN_HVM: frozenset(
        {
            "acpi", "blockdev_prefix", "boot_order", "cdrom_image_path", "cpu_cap",
            "cpu_mask", "cpu_weight", "cpuid", "device_model", "disk_type", "kernel_path",
            "migration_mode", "migration_port", "nic_type", "pae", "pci_pass",
            "reboot_behavior", "soundhw", "use_localtime", "vif_script", "vif_type",
            "viridian", "vnc_bind_address", "vnc_password_file", "xen_cmd",
        }
    ),
    H.HT_LXC: frozenset(
        {
            "cpu_mask", "devices", "drop_capabilities", "extra_cgroups", "extra_config",
            "num_ttys", "startup_timeout",
        }
    ),
    H.HT_CHROOT: frozenset({"init_script"}),
}  # fmt: skip
