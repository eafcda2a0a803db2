"""The cluster as an allocator sees it: Ganeti's iallocator input.

Built once per request from the configuration and the nodes' answers, and
fed alike to the built-in allocator and to external scripts.  Memory, CPUs
and storage come from the online vm-capable nodes, asked in parallel; a node
that does not answer is shown offline (so that no allocator, Corral's or a
script written for Ganeti, places anything on it), with the reason logged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from corral import ipolicy as IP
from corral.objects import Cluster, Instance, Node
from corral.objects.instance import ADMIN_UP
from corral.rpc.calls_instance import all_instances_info, hypervisor_info
from corral.rpc.calls_node import node_info
from corral.services.allocator.requests import Request, disk_space_total
from corral.services.params import filled_beparams, filled_nicparams
from corral.storage import templates

if TYPE_CHECKING:
    from corral.services.context import Master

log = logging.getLogger(__name__)

IALLOCATOR_VERSION = 2


def reports_storage(template: str) -> bool:
    """Whether the nodes report free space for ``template``'s disks: the
    templates whose space is counted, the file-based ones (the others are not
    checked for disk space: diskless, adopted devices)."""
    kind = templates.DISK_TEMPLATES.get(template)
    return kind is not None and kind.counts_space


async def build_input(
    master: Master, request: Request, hypervisor: str, disk_template: str
) -> dict[str, Any]:
    """The allocator's whole input for ``request``."""
    cfg = master.cfg
    cluster = cfg.cluster
    nodes = cfg.nodes()
    instances = cfg.instances()
    live = await _node_data(master, nodes, hypervisor, disk_template)
    names = {n.uuid: n.name for n in nodes}
    return {
        "version": IALLOCATOR_VERSION,
        "cluster_name": cluster.name,
        "cluster_tags": sorted(cluster.tags),
        "enabled_hypervisors": list(cluster.enabled_hypervisors),
        "ipolicy": cluster.ipolicy,
        "nodegroups": {
            g.uuid: {
                "name": g.name,
                "alloc_policy": g.alloc_policy,
                "networks": list(g.networks),
                "ipolicy": IP.group_ipolicy(cluster.ipolicy, g.ipolicy),
                "tags": sorted(g.tags),
            }
            for g in cfg.groups()
        },
        "nodes": {
            n.name: _node_entry(cluster, n, live.get(n.uuid), instances, disk_template)
            for n in nodes
        },
        "instances": {i.name: _instance_entry(cluster, i, names) for i in instances},
        "request": request.to_dict(),
    }


async def _node_data(
    master: Master, nodes: list[Node], hypervisor: str, disk_template: str
) -> dict[str, dict[str, Any]]:
    """node uuid → the answers of hypervisor_info, node_info and
    all_instances_info, for the nodes that gave all three."""
    cluster = master.cfg.cluster
    targets = [n for n in nodes if n.vm_capable and not n.offline]
    if not targets:
        return {}
    rpc = master.rpc
    unit = templates.capacity_unit(disk_template, cluster)
    hv, info, running = await asyncio.gather(
        rpc.results(targets, hypervisor_info(hypervisor, unit.to_wire())),
        rpc.results(targets, node_info([])),
        # Only the hypervisors in use: the call fails as a whole on a node that
        # lacks one of those asked, and an enabled one may be unavailable there.
        rpc.results(targets, all_instances_info(_hypervisors_in_use(master, hypervisor))),
    )
    out: dict[str, dict[str, Any]] = {}
    for node in targets:
        results = (hv[node.uuid], info[node.uuid], running[node.uuid])
        failed = [r for r in results if r.failed]
        if failed:
            log.warning("Node %s left out of allocation: %s", node.uuid, failed[0].fail_msg)
            continue
        out[node.uuid] = {
            "hv": hv[node.uuid].payload,
            "node": info[node.uuid].payload,
            "running": running[node.uuid].payload,
        }
    return out


def _hypervisors_in_use(master: Master, requested: str) -> list[str]:
    """The requested hypervisor and those of the cluster's instances."""
    return sorted({requested, *(i.hypervisor for i in master.cfg.instances())})


def _node_entry(
    cluster: Cluster,
    node: Node,
    live: dict[str, Any] | None,
    instances: list[Instance],
    disk_template: str,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "tags": sorted(node.tags),
        "primary_ip": node.primary_ip,
        "secondary_ip": node.secondary_ip,
        # An unreachable node is offline for the allocators (see the module doc).
        "offline": node.offline or (node.vm_capable and live is None),
        "drained": node.drained,
        "master_candidate": node.master_candidate,
        "group": node.group,
        "master_capable": node.master_capable,
        "vm_capable": node.vm_capable,
        "ndparams": {**cluster.ndparams, **node.ndparams},
    }
    if live is not None:
        entry.update(_dynamic(cluster, node, live, instances, disk_template))
    return entry


def _dynamic(
    cluster: Cluster,
    node: Node,
    live: dict[str, Any],
    instances: list[Instance],
    disk_template: str,
) -> dict[str, Any]:
    """Ganeti's dynamic node data: memory (as Ganeti counts it: an instance
    marked up but not running keeps its memory reserved), disk, CPUs."""
    hv, info, running = live["hv"], live["node"], live["running"]
    mem_free = int(hv["memory_free"])
    pri_mem = pri_up_mem = 0
    for inst in instances:
        if inst.primary_node != node.uuid:
            continue
        maxmem = int(filled_beparams(cluster, inst)["maxmem"])
        pri_mem += maxmem
        if inst.admin_state == ADMIN_UP:
            used = int(running.get(inst.name, {}).get("memory", 0))
            mem_free -= max(0, maxmem - used)
            pri_up_mem += maxmem
    reported = reports_storage(disk_template)
    return {
        "total_memory": int(hv["memory_total"]),
        "reserved_memory": int(hv.get("memory_dom0", 0)),
        "free_memory": mem_free,
        "total_disk": int(hv["storage_total"]) if reported else 0,
        "free_disk": int(hv["storage_free"]) if reported else 0,
        "total_spindles": 0,
        "free_spindles": 0,
        "total_cpus": int(info["cpu_total"]),
        "reserved_cpus": int(info["cpu_dom0"]),
        "i_pri_memory": pri_mem,
        "i_pri_up_memory": pri_up_mem,
    }


def _instance_entry(cluster: Cluster, inst: Instance, names: dict[str, str]) -> dict[str, Any]:
    be = filled_beparams(cluster, inst)
    nics = []
    for nic in inst.nics:
        params = filled_nicparams(cluster, nic)
        entry = {"mac": nic.mac, "ip": nic.ip, "mode": params["mode"], "link": params["link"]}
        if params["mode"] == "bridged":
            entry["bridge"] = params["link"]
        nics.append(entry)
    disks = [
        {"dev_type": d.dev_type, "size": d.size, "mode": d.mode, "spindles": d.spindles}
        for d in inst.disks
    ]
    return {
        "tags": sorted(inst.tags),
        "admin_state": inst.admin_state,
        "vcpus": be["vcpus"],
        "memory": be["maxmem"],
        "spindle_use": be["spindle_use"],
        "os": inst.os,
        "nodes": [names.get(uuid, uuid) for uuid in inst.all_nodes],
        "nics": nics,
        "disks": disks,
        "disk_template": inst.disk_template,
        "disks_active": inst.disks_active,
        "hypervisor": inst.hypervisor,
        "disk_space_total": disk_space_total(disks),
    }
