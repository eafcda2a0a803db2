"""The node resource's live fields: memory, CPUs, storage and boot id as the
nodes report them.

A query asks only the calls its fields need: ``node_info`` for the boot id
and CPUs (with the default storage unit when a storage field is asked), and
``hypervisor_info`` for memory as the default hypervisor sees it (a running
instance's memory is not free).  An offline node is not asked: its fields are
RS_OFFLINE; a node that does not answer, or a value it does not report, is
RS_NODATA.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.objects import Cluster, Node
from corral.query.fields import NODATA, OFFLINE, Field
from corral.rpc.calls_instance import hypervisor_info
from corral.rpc.calls_node import node_info
from corral.storage import templates

if TYPE_CHECKING:
    from corral.rpc.result import RpcResult
    from corral.services.context import Master

# What live fields need (see FieldSet.needs), and so which calls are made;
# the calls are named by the first and last.
NODE_INFO = "node_info"
STORAGE = "storage"
HV_INFO = "hypervisor_info"

Extract = Callable[[dict[str, Any]], Any]


def _key(key: str) -> Extract:
    return lambda payload: payload.get(key)


def _storage(key: str) -> Extract:
    """A value of the default storage unit, the first one asked for."""

    def extract(payload: dict[str, Any]) -> Any:
        units = payload.get("storage") or []
        return units[0].get(key) if units else None

    return extract


def _spindles(payload: dict[str, Any]) -> Any:
    """Spindles are reported for LVM physical volumes only, which Corral's nodes
    do not have: no data, and these fields need no call of their own."""
    return None


# name, title, kind, what it needs, value from the answer of the need's call, description
_LIVE_FIELDS: tuple[tuple[str, str, str, str | None, Extract, str], ...] = (
    (
        "bootid",
        "BootID",
        C.QFT_TEXT,
        NODE_INFO,
        _key("bootid"),
        "Random UUID renewed for each system reboot, can be used for detecting reboots"
        " by tracking changes",
    ),
    (
        "cnodes",
        "CNodes",
        C.QFT_NUMBER,
        NODE_INFO,
        _key("cpu_nodes"),
        "Number of NUMA domains on node (if exported by hypervisor)",
    ),
    (
        "cnos",
        "CNOs",
        C.QFT_NUMBER,
        NODE_INFO,
        _key("cpu_dom0"),
        "Number of logical processors used by the node OS (dom0 for Xen)",
    ),
    (
        "csockets",
        "CSockets",
        C.QFT_NUMBER,
        NODE_INFO,
        _key("cpu_sockets"),
        "Number of physical CPU sockets (if exported by hypervisor)",
    ),
    (
        "ctotal",
        "CTotal",
        C.QFT_NUMBER,
        NODE_INFO,
        _key("cpu_total"),
        "Number of logical processors",
    ),
    (
        "dfree",
        "DFree",
        C.QFT_UNIT,
        STORAGE,
        _storage("free"),
        "Available storage space on storage unit",
    ),
    (
        "dtotal",
        "DTotal",
        C.QFT_UNIT,
        STORAGE,
        _storage("total"),
        "Total storage space on storage unit for instance disk allocation",
    ),
    (
        "spfree",
        "SpFree",
        C.QFT_NUMBER,
        None,
        _spindles,
        "Available spindles in volume group (exclusive storage only)",
    ),
    (
        "sptotal",
        "SpTotal",
        C.QFT_NUMBER,
        None,
        _spindles,
        "Total spindles in volume group (exclusive storage only)",
    ),
    (
        "mfree",
        "MFree",
        C.QFT_UNIT,
        HV_INFO,
        _key("memory_free"),
        "Memory available for instance allocations",
    ),
    (
        "mnode",
        "MNode",
        C.QFT_UNIT,
        HV_INFO,
        _key("memory_dom0"),
        "Amount of memory used by node (dom0 for Xen)",
    ),
    (
        "mtotal",
        "MTotal",
        C.QFT_UNIT,
        HV_INFO,
        _key("memory_total"),
        "Total amount of memory of physical machine",
    ),
)

# The call whose answer holds what a need asks for (spindles: see _spindles).
_SOURCE = {NODE_INFO: NODE_INFO, STORAGE: NODE_INFO, HV_INFO: HV_INFO, None: NODE_INFO}


def live_fields() -> list[Field]:
    """The node fields that come from the nodes themselves."""
    return [
        Field(name, title, kind, doc, _getter(_SOURCE[need], extract), (need,) if need else ())
        for name, title, kind, need, extract, doc in _LIVE_FIELDS
    ]


def _getter(source: str, extract: Extract) -> Callable[[Any], Any]:
    def getter(row: Any) -> Any:
        if row.obj.offline:
            return OFFLINE
        payload = row.live.get(source)
        value = None if payload is None else extract(payload)
        return NODATA if value is None else value

    return getter


def storage_units(cluster: Cluster) -> list[list[str]]:
    """The default storage unit: that of the first enabled disk template whose
    space is counted (none if no such template is enabled)."""
    for name in cluster.enabled_disk_templates:
        template = templates.DISK_TEMPLATES.get(name)
        unit = template.capacity_unit(cluster) if template is not None else None
        if unit is not None:
            return [unit.to_wire()]
    return []


async def gather(master: Master, nodes: list[Node], needs: set[str]) -> dict[str, dict[str, Any]]:
    """node uuid → call name → the call's answer (None if the call failed),
    for the online nodes and the calls that ``needs`` ask for."""
    cluster = master.cfg.cluster
    targets = [n for n in nodes if not n.offline]
    calls: dict[str, Awaitable[Mapping[str, RpcResult[Any]]]] = {}
    if targets and needs & {NODE_INFO, STORAGE}:
        units = storage_units(cluster) if STORAGE in needs else []
        calls[NODE_INFO] = master.rpc.results(targets, node_info(units))
    if targets and HV_INFO in needs:
        hypervisor = cluster.enabled_hypervisors[0]
        unit = templates.default_unit(cluster)
        calls[HV_INFO] = master.rpc.results(targets, hypervisor_info(hypervisor, unit.to_wire()))
    answers = dict(zip(calls, await asyncio.gather(*calls.values()), strict=True))
    live: dict[str, dict[str, Any]] = {node.uuid: {} for node in targets}
    for call, results in answers.items():
        for uuid, result in results.items():
            live[uuid][call] = result.value
    return live
