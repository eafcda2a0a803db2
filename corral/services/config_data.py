"""``config.data``: the configuration in Ganeti 3.0.2's layout (its
``ConfigData.ToDict``), a read-only export of Corral's store.

The top level is Ganeti's: ``version``, ``cluster``, ``nodes``,
``nodegroups``, ``instances``, ``networks``, ``disks`` and ``filters``
(objects by uuid), ``serial_no`` (the cluster serial), ``ctime`` and
``mtime``.  Objects carry Ganeti's keys, values left out where Ganeti leaves
them out (unset ones); an instance names its disks by uuid and the disks
are their own table, as in Ganeti 3.0.  Keys of settings Corral has not
(LVM, DRBD, SSH host keys...) hold the values a Ganeti cluster has that does
not use them.  Private OS parameters are ``<redacted>`` (secret ones are never
stored at all).

:func:`take_image` runs on the event loop (it only collects references to
the committed objects, which commits replace and never change, and the
networks' pools); :func:`render` is the slow part and runs in a thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import diskparams as DP
from corral.netpool import network_dict
from corral.objects import Cluster, Disk, Instance, Node, NodeGroup
from corral.objects.filter_rule import FilterRule

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager

# Corral's own cluster settings, which Ganeti's cluster object has not.
_CORRAL_ONLY = frozenset({"noded_port", "name"})
# Ganeti's cluster keys for what Corral has not, at an unused Ganeti's values.
_GANETI_UNUSED: dict[str, Any] = {
    "candidate_certs": {},
    "data_collectors": {},
    "disk_state_static": {},
    "drbd_usermode_helper": "",
    "gluster_storage_dir": "",
    "highest_used_port": 0,
    "hv_state_static": {},
    "install_image": "",
    "instance_communication_network": "",
    "prealloc_wipe_disks": False,
    "reserved_lvs": [],
    "rsahostkeypub": "",
    "dsahostkeypub": "",
    "tcpudp_port_pool": [],
    "use_external_mip_script": False,
    "volume_group_name": "",
    "zeroing_image": "",
}
_FILTER_KEYS = ("watermark", "priority", "predicates", "action", "reason_trail", "uuid")


@dataclass(frozen=True)
class ConfigImage:
    """The committed objects at one cluster serial (references, not copies)."""

    serial: int
    cluster: Cluster
    nodes: list[Node]
    groups: list[NodeGroup]
    instances: list[Instance]
    filters: list[FilterRule]
    # Networks as Ganeti's dicts (their pools are computed from the config's NIC index).
    networks: dict[str, dict[str, Any]]


def take_image(cfg: ConfigManager) -> ConfigImage:
    """The configuration as it is now (cheap: run it on the event loop)."""
    return ConfigImage(
        serial=cfg.serial,
        cluster=cfg.cluster,
        nodes=cfg.nodes(),
        groups=cfg.groups(),
        instances=cfg.instances(),
        filters=cfg.filter_rules(),
        networks={n.uuid: network_dict(cfg, n) for n in cfg.networks()},
    )


def _set(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` without the unset (None) ones, as Ganeti's ToDict leaves them out."""
    return {key: value for key, value in values.items() if value is not None}


def _redacted(params: dict[str, Any]) -> dict[str, Any]:
    return dict.fromkeys(params, C.REDACTED)


def _cluster(cluster: Cluster) -> dict[str, Any]:
    values = {k: v for k, v in cluster.model_dump().items() if k not in _CORRAL_ONLY}
    values["osparams_private_cluster"] = {
        os_name: _redacted(params) for os_name, params in cluster.osparams_private_cluster.items()
    }
    values["tags"] = sorted(cluster.tags)
    return {
        **_GANETI_UNUSED,
        **values,
        "cluster_name": cluster.name,
        "compression_tools": list(C.IEC_DEFAULT_TOOLS),
        "diskparams": DP.DISK_DT_DEFAULTS,
        "primary_ip_family": 10 if ":" in cluster.master_ip else 2,
    }


def _node(node: Node, master: str) -> dict[str, Any]:
    values = node.model_dump()
    # Ganeti's master is always a master candidate.
    values["master_candidate"] = node.master_candidate or node.uuid == master
    values["tags"] = sorted(node.tags)
    return values


def _group(group: NodeGroup) -> dict[str, Any]:
    values = group.model_dump()
    values["tags"] = sorted(group.tags)
    return values


def _disk(disk: Disk, inst: Instance) -> dict[str, Any]:
    values = _set(disk.model_dump(exclude={"children"}))
    if disk.children:
        values["children"] = [_disk(child, inst) for child in disk.children]
    # Corral's disks keep no times of their own: their instance's.
    return {**values, "params": {}, "ctime": inst.ctime, "mtime": inst.mtime}


def _instance(inst: Instance) -> dict[str, Any]:
    values = inst.model_dump(exclude={"disks", "nics"})
    values["osparams_private"] = _redacted(inst.osparams_private)
    values["nics"] = [_set(nic.model_dump()) for nic in inst.nics]
    values["disks"] = [disk.uuid for disk in inst.disks]
    values["tags"] = sorted(inst.tags)
    return _set(values)


def _filter(rule: FilterRule) -> dict[str, Any]:
    values = rule.model_dump()
    return {key: values[key] for key in _FILTER_KEYS} | {"serial_no": rule.serial_no}


def config_dict(image: ConfigImage) -> dict[str, Any]:
    """The whole ``config.data`` as a dictionary."""
    master = image.cluster.master_node
    return {
        **_top(image),
        "cluster": _cluster(image.cluster),
        "nodes": {n.uuid: _node(n, master) for n in image.nodes},
        "nodegroups": {g.uuid: _group(g) for g in image.groups},
        "instances": {i.uuid: _instance(i) for i in image.instances},
        "disks": {d.uuid: _disk(d, i) for i in image.instances for d in i.disks},
        "networks": image.networks,
        "filters": {r.uuid: _filter(r) for r in image.filters},
    }


def _top(image: ConfigImage) -> dict[str, Any]:
    """The top level's plain values."""
    objects = [image.cluster, *image.nodes, *image.groups, *image.instances]
    return {
        "version": C.CONFIG_VERSION,
        "serial_no": image.serial,
        "ctime": image.cluster.ctime,
        "mtime": max(obj.mtime for obj in objects),
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def render(image: ConfigImage) -> bytes:
    """The bytes of ``config.data``: compact JSON, keys sorted (the same
    configuration always gives the same bytes)."""
    return _dumps(config_dict(image)).encode("utf-8") + b"\n"


class Renderer:
    """:func:`render`'s bytes at a cost that grows with the change, not with
    the configuration: each object's JSON is kept with the object it was made
    of, and made again only for a new object (a commit replaces every object
    it changes).  For one thread at a time (the exporter's)."""

    def __init__(self) -> None:
        # uuid → (the object, its JSON); for instances, their disks' JSON too.
        self._nodes: dict[str, tuple[Node, str, str]] = {}
        self._groups: dict[str, tuple[NodeGroup, str]] = {}
        self._instances: dict[str, tuple[Instance, str, list[tuple[str, str]]]] = {}

    def render(self, image: ConfigImage) -> bytes:
        """The bytes :func:`render` gives for ``image``."""
        master = image.cluster.master_node
        nodes = {}
        for node in image.nodes:
            kept = self._nodes.get(node.uuid)
            if kept is None or kept[0] is not node or kept[2] != master:
                kept = (node, _dumps(_node(node, master)), master)
            nodes[node.uuid] = kept
        self._nodes = nodes
        groups = {}
        for group in image.groups:
            kept_group = self._groups.get(group.uuid)
            if kept_group is None or kept_group[0] is not group:
                kept_group = (group, _dumps(_group(group)))
            groups[group.uuid] = kept_group
        self._groups = groups
        instances = {}
        for inst in image.instances:
            kept_inst = self._instances.get(inst.uuid)
            if kept_inst is None or kept_inst[0] is not inst:
                pairs = [(d.uuid, _dumps(_disk(d, inst))) for d in inst.disks]
                kept_inst = (inst, _dumps(_instance(inst)), pairs)
            instances[inst.uuid] = kept_inst
        self._instances = instances
        disks = {uuid: text for _, _, kept_disks in instances.values() for uuid, text in kept_disks}
        parts = {
            **{key: _dumps(value) for key, value in _top(image).items()},
            "cluster": _dumps(_cluster(image.cluster)),
            "nodes": _object({uuid: kept[1] for uuid, kept in nodes.items()}),
            "nodegroups": _object({uuid: kept[1] for uuid, kept in groups.items()}),
            "instances": _object({uuid: kept[1] for uuid, kept in instances.items()}),
            "disks": _object(disks),
            "networks": _dumps(image.networks),
            "filters": _dumps({r.uuid: _filter(r) for r in image.filters}),
        }
        return _object(parts).encode("utf-8") + b"\n"


def _object(members: dict[str, str]) -> str:
    """A JSON object of members already in JSON, keys sorted."""
    return "{" + ",".join(f"{json.dumps(k)}:{members[k]}" for k in sorted(members)) + "}"
