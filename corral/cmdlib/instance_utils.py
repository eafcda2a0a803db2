"""What the instance logical units share: filled parameters, hook and OS
environments, OS checks, placement checks, MAC addresses."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.cmdlib import config_drive
from corral.objects import NIC, Disk, Instance, Network, Node, NodeGroup
from corral.osdef import guest_settings, install_settings, media
from corral.osdef.definition import split_name
from corral.osdef.spec import OsSpec
from corral.rpc.calls_instance import (
    all_instances_info,
    hypervisor_info,
    hypervisor_validate_params,
)
from corral.rpc.calls_os import os_diagnose, os_validate
from corral.rpc.wire import (
    DiskEntry,
    DiskWire,
    InstanceWire,
    JsonObject,
    NetworkEntry,
    NicEntry,
    RunningInstance,
)
from corral.services.ndparams import node_ndparams
from corral.services.params import (
    filled_beparams,
    filled_hvparams,
    filled_nicparams,
    os_spec,
)
from corral.storage import templates
from corral.storage.reservations import JobLedger

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.config.manager import ConfigManager

MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


def job_os_spec(
    lu: LogicalUnit[Any],
    os_name: str,
    public: Mapping[str, Any],
    private: Mapping[str, Any] | None = None,
    secret: Mapping[str, Any] | None = None,
    *,
    strict: bool = True,
) -> OsSpec:
    """The OS spec this job's scripts get (:func:`corral.services.params.os_spec`);
    its private and secret values are scrubbed from what the job reports (its
    log, result and error), as noded scrubs them from the scripts' logs.
    The config drive's settings are the guest's: the scripts do not get them."""
    spec = os_spec(lu.cfg.cluster, os_name, public, private, secret, strict=strict)
    lu.ctx.hide(spec.hidden_values())
    params = install_settings.without_settings(guest_settings.without_settings(spec.params))
    return OsSpec(spec.name, params)


# Environments
def instance_hook_env(
    cfg: ConfigManager, inst: Instance, *, status: Any = None, disk_ids: bool = True
) -> dict[str, Any]:
    """Ganeti's BuildInstanceHookEnv (without the GANETI_ prefix).

    ``disk_ids`` adds each disk's DEV_TYPE and logical-id variables, as Ganeti
    does for existing instances (not for instance-add, whose disks are specs).
    """
    cluster = cfg.cluster
    be = filled_beparams(cluster, inst)
    env: dict[str, Any] = {
        "OP_TARGET": inst.name,
        "INSTANCE_NAME": inst.name,
        "INSTANCE_PRIMARY": node_name(cfg, inst.primary_node),
        "INSTANCE_SECONDARIES": " ".join(node_name(cfg, n) for n in inst.secondary_nodes),
        "INSTANCE_OS_TYPE": inst.os,
        "INSTANCE_STATUS": inst.admin_state if status is None else status,
        "INSTANCE_MINMEM": be["minmem"],
        "INSTANCE_MAXMEM": be["maxmem"],
        "INSTANCE_MEMORY": be["maxmem"],
        "INSTANCE_VCPUS": be["vcpus"],
        "INSTANCE_DISK_TEMPLATE": inst.disk_template,
        "INSTANCE_HYPERVISOR": inst.hypervisor,
        "INSTANCE_TAGS": " ".join(sorted(inst.tags)),
        "INSTANCE_NIC_COUNT": len(inst.nics),
        "INSTANCE_DISK_COUNT": len(inst.disks),
    }
    for idx, nic in enumerate(inst.nics):
        nicp = filled_nicparams(cluster, nic)
        prefix = f"INSTANCE_NIC{idx}_"
        if nic.name:
            env[prefix + "NAME"] = nic.name
        env[prefix + "UUID"] = nic.uuid
        env[prefix + "IP"] = nic.ip or ""
        env[prefix + "MAC"] = nic.mac
        env[prefix + "MODE"] = nicp["mode"]
        env[prefix + "LINK"] = nicp["link"]
        env[prefix + "VLAN"] = nicp["vlan"]
        if nic.network is not None:
            env.update(_nic_network_hook_env(cfg, prefix, nic.network))
        if nicp["mode"] in ("bridged", "openvswitch"):
            env[prefix + "BRIDGE"] = nicp["link"]
    for idx, disk in enumerate(inst.disks):
        prefix = f"INSTANCE_DISK{idx}_"
        if disk.name:
            env[prefix + "NAME"] = disk.name
        env[prefix + "UUID"] = disk.uuid
        env[prefix + "SIZE"] = disk.size
        env[prefix + "MODE"] = disk.mode
        if disk_ids:
            env.update(_disk_id_hook_env(prefix, disk))
    for key, value in be.items():
        env[f"INSTANCE_BE_{key}"] = value
    for key, value in filled_hvparams(cluster, inst).items():
        env[f"INSTANCE_HV_{key}"] = value
    return env


def _nic_network_hook_env(cfg: ConfigManager, prefix: str, uuid: str) -> dict[str, Any]:
    """Ganeti's Network.HooksDict of a NIC's network (its uuid as the name
    if the network is gone)."""
    network = cfg.get(Network, uuid)
    if network is None:
        return {prefix + "NETWORK_NAME": uuid}
    env = {
        prefix + "NETWORK_NAME": network.name,
        prefix + "NETWORK_UUID": network.uuid,
        prefix + "NETWORK_TAGS": " ".join(sorted(network.tags)),
    }
    optional = {"SUBNET": network.network, "GATEWAY": network.gateway,
                "SUBNET6": network.network6, "GATEWAY6": network.gateway6,
                "MAC_PREFIX": network.mac_prefix}  # fmt: skip
    env.update({f"{prefix}NETWORK_{key}": value for key, value in optional.items() if value})
    return env


def network_entry(network: Network) -> NetworkEntry:
    """A network as nodes see it (the OS scripts' NIC_<n>_NETWORK_* variables)."""
    return {
        "name": network.name,
        "uuid": network.uuid,
        "tags": sorted(network.tags),
        "subnet": network.network,
        "gateway": network.gateway,
        "subnet6": network.network6,
        "gateway6": network.gateway6,
        "mac_prefix": network.mac_prefix,
    }


def _disk_id_hook_env(prefix: str, disk: Disk) -> dict[str, Any]:
    """Ganeti's BuildDiskLogicalIDEnv: DEV_TYPE, and DRIVER/ID for file and adopted disks."""
    env: dict[str, Any] = {}
    # File-based and adopted disks: [driver, path] (Ganeti's shapes).
    if templates.disk_path(disk) is not None:
        env[prefix + "DRIVER"], env[prefix + "ID"] = disk.logical_id
    env[prefix + "DEV_TYPE"] = disk.dev_type
    return env


def instance_descriptor(cfg: ConfigManager, inst: Instance) -> InstanceWire:
    """The instance as nodes need it: filled parameters, disk paths, NIC modes."""
    cluster = cfg.cluster
    be = filled_beparams(cluster, inst)
    desc: InstanceWire = {
        "name": inst.name,
        "uuid": inst.uuid,
        "os": inst.os,
        "ctime": inst.ctime,
        "mtime": inst.mtime,
        "primary_node": inst.primary_node,
        "secondary_nodes": inst.secondary_nodes,
        "hypervisor": inst.hypervisor,
        "network_port": inst.network_port,
        "beparams": be,
        "hvparams": filled_hvparams(cluster, inst),
        "memory": be["maxmem"],
        "vcpus": be["vcpus"],
        "disks": [_disk_descriptor(cfg, d) for d in inst.disks],
        "nics": [_nic_descriptor(cfg, n) for n in inst.nics],
    }
    drive = config_drive.record(cfg, inst)
    if drive is not None:
        desc["config_drive"] = drive
    return desc


def start_descriptor(
    cfg: ConfigManager, inst: Instance, hide: Callable[[list[str]], None] | None = None
) -> InstanceWire:
    """The instance as a start needs it (instance_start, a migration's
    accept_instance): with a communication NIC, also its OS with the public and
    private parameters, which the node's metad serves the guest (secret ones
    live one install only, never on a start).  ``hide`` gets the private values
    to scrub from the job's reports."""
    desc = instance_descriptor(cfg, inst)
    if inst.os and has_communication_nic(inst):
        spec = os_spec(cfg.cluster, inst.os, inst.osparams, inst.osparams_private, strict=False)
        if hide is not None:
            hide(spec.hidden_values())
        desc["osspec"] = spec.to_wire()
    return desc


def first_boot(desc: InstanceWire, inst: Instance) -> InstanceWire:
    """A start descriptor of ``inst`` as its start by the operator or its add
    sends it: the first after an install (self_install) has its install
    hypervisor parameters over the usual ones; later starts are in ``run`` mode."""
    if inst.self_install:
        hvparams = install_hvparams(inst.hypervisor, inst.osparams)
        desc["hvparams"] = {**desc["hvparams"], **hvparams}
    return desc


def install_hvparams(hypervisor: str, osparams: Mapping[str, Any]) -> dict[str, Any]:
    """The self_install hypervisor parameters the ``install-hv-*`` OS parameters
    give, checked and typed; OpPrereqError for an unknown or bad one."""
    return P.check_hvparams(hypervisor, install_settings.install_hvparams(osparams))


def has_communication_nic(inst: Instance) -> bool:
    """Whether ``inst`` has an instance communication NIC (by Ganeti's name)."""
    return any(
        (nic.name or "").startswith(C.INSTANCE_COMMUNICATION_NIC_PREFIX) for nic in inst.nics
    )


def _nic_descriptor(cfg: ConfigManager, nic: NIC) -> NicEntry:
    """A NIC with its filled parameters (and its network, if it is on one)."""
    params = filled_nicparams(cfg.cluster, nic)
    entry: NicEntry = {
        "mac": nic.mac,
        "uuid": nic.uuid,
        "ip": nic.ip,
        "name": nic.name,
        "mode": params["mode"],
        "link": params["link"],
        "vlan": params["vlan"],
    }
    network = cfg.get(Network, nic.network) if nic.network else None
    if network is not None:
        entry["network"] = network_entry(network)
    return entry


def disk_wire(cfg: ConfigManager, disk: Disk) -> DiskWire:
    """``disk`` as node calls take it; a disk whose copies link their nodes
    (mirrored) with the nodes' names and secondary IPs."""
    template = templates.DISK_TEMPLATES.get(disk.dev_type)
    if template is None or template.mirroring is not templates.Mirroring.INTERNAL:
        return disk.description().to_wire()
    nodes = (cfg.lookup(Node, uuid) for uuid in disk.nodes)
    return disk.description(tuple((n.name, n.secondary_ip) for n in nodes)).to_wire()


def _disk_descriptor(cfg: ConfigManager, disk: Disk) -> DiskEntry:
    """A disk as the hypervisor and OS scripts see it; noded takes the path
    from ``description`` (its template checks it), never from the master."""
    template = templates.DISK_TEMPLATES.get(disk.dev_type)
    return {
        "uuid": disk.uuid,
        "size": disk.size,
        "mode": disk.mode,
        "name": disk.name,
        "description": disk_wire(cfg, disk),
        "backend_type": "block" if template is None else template.backend_type(disk),
    }


def node_name(cfg: ConfigManager, node_uuid: str) -> str:
    node = cfg.get(Node, node_uuid)
    return node.name if node is not None else node_uuid


# OS checks
async def node_os_info(lu: LogicalUnit[Any], node: Node, os_name: str) -> JsonObject:
    """The OS as the node sees it; OpPrereqError if it is missing or invalid there."""
    base, _ = split_name(os_name)
    oses = await lu.master.rpc.run(
        node, os_diagnose(), f"Cannot get the OS list of node {node.name}"
    )
    for entry in oses:
        if entry["name"] == base:
            if not entry["valid"]:
                raise errors.OpPrereqError(
                    f"OS '{base}' is not valid on node {node.name}: {entry['error']}", C.ECODE_INVAL
                )
            return dict(entry)
    raise errors.OpPrereqError(
        f"OS '{base}' not found on node {node.name}; known: "
        + (", ".join(e["name"] for e in oses if e["valid"]) or "none"),
        C.ECODE_INVAL,
    )


def check_variant(os_name: str, info: dict[str, Any], force_variant: bool) -> None:
    """Ganeti's variant rules: required and listed when the OS has variants."""
    base, variant = split_name(os_name)
    variants = info.get("variants") or []
    if not variants:
        if variant:
            raise errors.OpPrereqError(
                f"OS '{base}' doesn't support variants ('{variant}' given)", C.ECODE_INVAL
            )
        return
    if force_variant:
        return
    if not variant:
        raise errors.OpPrereqError(
            f"OS name '{base}' must include a variant; choose one of {', '.join(variants)}"
            f" (e.g. {base}+{variants[0]})",
            C.ECODE_INVAL,
        )
    if variant not in variants:
        raise errors.OpPrereqError(
            f"Unsupported OS variant '{variant}' of '{base}'; supported: {', '.join(variants)}",
            C.ECODE_INVAL,
        )


async def verify_osparams(lu: LogicalUnit[Any], nodes: list[Node], spec: OsSpec) -> None:
    """Run the OS's parameter checks on ``nodes``; OpPrereqError on refusal."""
    results = await lu.master.rpc.results(
        nodes, os_validate(spec.to_wire(), lu.op.debug_level or 0)
    )
    for node in nodes:
        results[node.uuid].get(
            f"OS parameters validation failed on node {node.name}", C.ECODE_INVAL
        )


def check_params_declared(os_name: str, info: dict[str, Any], names: list[str]) -> None:
    declared = {p[0] for p in info.get("parameters", [])}
    # Corral's own (design-os's image and package) need no declaration.
    unknown = sorted(set(media.declared_elsewhere(names)) - declared)
    if unknown:
        raise errors.OpPrereqError(
            f"OS '{split_name(os_name)[0]}' does not declare the parameter(s)"
            f" {', '.join(unknown)}; declared: {', '.join(sorted(declared)) or 'none'}",
            C.ECODE_INVAL,
        )


# Placement
async def check_node_resources(
    lu: LogicalUnit[Any],
    node: Node,
    hypervisor: str,
    memory: int,
    disk_mib: int,
    purpose: str = "the instance",
    disk_template: str | None = None,
) -> None:
    """Refuse when the node lacks the memory (to start) or the space for
    ``disk_mib`` MiB of ``disk_template`` disks (by default: file disks)."""
    unit = templates.capacity_unit(disk_template, lu.cfg.cluster)
    info = await lu.master.rpc.run(
        node,
        hypervisor_info(hypervisor, unit.to_wire()),
        f"Cannot get the resources of node {node.name}",
    )
    if memory and memory > info["memory_free"]:
        raise errors.OpPrereqError(
            f"Not enough memory on node {node.name} for {purpose}: needed {memory} MiB,"
            f" available {info['memory_free']} MiB",
            C.ECODE_NORES,
        )
    if disk_mib and disk_mib > info["storage_free"]:
        raise errors.OpPrereqError(
            f"Not enough disk space on target node {node.name}: required {disk_mib} MiB, available"
            f" {info['storage_free']} MiB in {unit.key}",
            C.ECODE_NORES,
        )


def exclusive_storage(cfg: ConfigManager, node_uuids: list[str]) -> bool:
    """Whether exclusive storage is in effect on any of the nodes (a node
    parameter set for the cluster or a group)."""
    for uuid in node_uuids:
        node = cfg.get(Node, uuid)
        group = cfg.get(NodeGroup, node.group) if node is not None else None
        if node is None or group is None:
            continue
        if node_ndparams(cfg.cluster, group, node)["exclusive_storage"]:
            return True
    return False


def check_spindles(disks: list[dict[str, Any]], exclusive: bool, required: bool) -> None:
    """Ganeti's rule: disks have spindles when exclusive storage is in effect
    (if ``required``), and never otherwise."""
    for disk in disks:
        spindles = disk.get("spindles")
        if spindles is not None and not exclusive:
            raise errors.OpPrereqError(
                "Spindles in instance disks cannot be specified when exclusive storage is"
                " not active",
                C.ECODE_INVAL,
            )
        if spindles is None and exclusive and required:
            raise errors.OpPrereqError(
                "You must specify spindles in instance disks when exclusive storage is active",
                C.ECODE_INVAL,
            )


def check_device_names(kind: str, devices: list[Any]) -> None:
    """Ganeti's ValidateDeviceNames: no purely numeric name (identifiers that
    are numbers are indices), no name used twice or equal to another device's
    uuid; ``devices`` are specs (dicts) or disks and NICs."""
    taken: list[str] = []
    for device in devices:
        if isinstance(device, dict):
            name = device.get("name")
        else:
            name = device.name
            taken.append(device.uuid)
        if isinstance(name, str | int) and not isinstance(name, bool):
            try:
                int(name)
            except ValueError:
                pass
            else:
                raise errors.OpPrereqError(
                    f"Invalid name '{name}'. Purely numeric {kind} names are not allowed",
                    C.ECODE_INVAL,
                )
        if isinstance(name, str) and name.lower() != "none":
            if name in taken:
                raise errors.OpPrereqError(f"{kind} name '{name}' already used", C.ECODE_NOTUNIQUE)
            taken.append(name)


def ledger(lu: LogicalUnit[Any], instance: str) -> JobLedger:
    """What the unit's instance ``instance`` may hold alone (disks' devices,
    ports): it reserves there what it takes, until the unit's job ends."""
    return JobLedger(lu.cfg.reservations, str(lu.ctx.job_id), instance, lu.cfg.instances)


async def check_hvparams_on_nodes(
    lu: LogicalUnit[Any], nodes: list[Node], hypervisor: str, hvparams: dict[str, Any]
) -> None:
    """Ganeti's CheckHVParams: the cluster's parameters filled with ``hvparams``,
    checked by each online vm_capable node (files, users, what QEMU offers)."""
    filled = P.fill(lu.cfg.cluster.hvparams.get(hypervisor, {}), hvparams)
    targets = [n for n in nodes if n.vm_capable and not n.offline]
    results = await lu.master.rpc.results(targets, hypervisor_validate_params(hypervisor, filled))
    for node in targets:
        results[node.uuid].get(f"Hypervisor parameter validation failed on node {node.name}")


async def running_instances(
    lu: LogicalUnit[Any], node: Node, hypervisors: list[str]
) -> dict[str, RunningInstance]:
    return await lu.master.rpc.run(
        node, all_instances_info(hypervisors), f"Cannot get the instances of node {node.name}"
    )


# Addresses
def generate_mac(prefix: str, taken: set[str]) -> str:
    """A MAC from the cluster prefix that no NIC has yet."""
    for _ in range(1000):
        mac = prefix + ":" + ":".join(f"{random.randint(0, 255):02x}" for _ in range(3))
        if mac not in taken:
            taken.add(mac)
            return mac
    raise errors.OpPrereqError(
        "Cannot generate a unique MAC address; the prefix is full", C.ECODE_NORES
    )


def check_mac(mac: str) -> str:
    mac = mac.lower()
    if not MAC_RE.match(mac):
        raise errors.OpPrereqError(
            f"Invalid MAC address '{mac}': use six hex octets such as aa:00:00:12:34:56",
            C.ECODE_INVAL,
        )
    return mac
