"""Parameter tables behind the query fields: Ganeti's titles of backend,
hypervisor and node parameters (node parameters' defaults and filling:
:mod:`corral.services.ndparams`)."""

from __future__ import annotations

# Backend parameters with a title of their own (the others are titled by name).
BE_TITLES: dict[str, str] = {
    "auto_balance": "Auto_balance",
    "maxmem": "ConfigMaxMem",
    "minmem": "ConfigMinMem",
    "vcpus": "ConfigVCPUs",
}

# Hypervisor parameters with a title of their own (the others are titled by name).
HV_TITLES: dict[str, str] = {
    "acpi": "ACPI",
    "boot_order": "Boot_order",
    "cdrom_image_path": "CDROM_image_path",
    "cpu_type": "cpu_type",
    "disk_type": "Disk_type",
    "initrd_path": "Initrd_path",
    "kernel_path": "Kernel_path",
    "nic_type": "NIC_type",
    "pae": "PAE",
    "pci_pass": "pci_pass",
    "vnc_bind_address": "VNC_bind_address",
}

ND_TITLES: dict[str, str] = {
    "exclusive_storage": "ExclusiveStorage",
    "oob_program": "OutOfBandProgram",
    "ovs": "OpenvSwitch",
    "ovs_link": "OpenvSwitchLink",
    "ovs_name": "OpenvSwitchName",
    "spindle_count": "SpindleCount",
}
