"""``config.data``: the configuration in Ganeti 3.0.2's layout (its
``ConfigData.ToDict``), a read-only export of Corral's store.

The top level is Ganeti's: ``version``, ``cluster``, ``nodes``,
``nodegroups``, ``instances``, ``networks``, ``disks`` and ``filters``
(objects by uuid), ``serial_no`` (the cluster serial), ``ctime`` and
``mtime``.  Objects carry Ganeti's keys, values left out where Ganeti leaves
them out (unset ones); an instance names its disks by uuid and the disks
are their own table, as in Ganeti 3.0, detached disks (no instance's) too.
Keys of settings Corral has not (LVM, DRBD, SSH host keys...) hold the values
a Ganeti cluster has that does not use them.  Private OS parameters are
``<redacted>`` (secret ones are never stored at all).

:func:`take_image` runs on the event loop (it only collects references to
the committed objects, which commits replace and never change, and the
networks' pools); :func:`render` is the slow part and runs in a thread.
"""

from __future__ import annotations

import bisect
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import diskparams as DP
from corral.netpool import network_dict
from corral.objects import Cluster, ConfigObject, DetachedDisk, Disk, Instance, Node, NodeGroup
from corral.objects.filter_rule import FilterRule

if TYPE_CHECKING:
    from corral.config.manager import Change, ConfigManager

# Corral's own cluster settings, which Ganeti's cluster object has not.
_CORRAL_ONLY = frozenset({"noded_port", "name", "etcd_members"})
# Corral's own instance settings (design-os's self_install), which Ganeti's has not.
_INSTANCE_CORRAL_ONLY = frozenset({"self_install"})
# Ganeti's cluster keys for what Corral has not, at an unused Ganeti's values.
_GANETI_UNUSED: dict[str, Any] = {
    "candidate_certs": {},
    "data_collectors": {},
    "disk_state_static": {},
    "drbd_usermode_helper": "",
    "gluster_storage_dir": "",
    "highest_used_port": 0,
    "hv_state_static": {},
    "prealloc_wipe_disks": False,
    "reserved_lvs": [],
    "rsahostkeypub": "",
    "dsahostkeypub": "",
    "tcpudp_port_pool": [],
    "volume_group_name": "",
    "zeroing_image": "",
}
_FILTER_KEYS = ("watermark", "priority", "predicates", "action", "reason_trail", "uuid")


@dataclass(frozen=True)
class ConfigImage:
    """The committed objects at one cluster serial (references, not copies)."""

    serial: int
    mtime: float  # the last commit's time
    cluster: Cluster
    nodes: list[Node]
    groups: list[NodeGroup]
    instances: list[Instance]  # in no order
    filters: list[FilterRule]
    detached: list[DetachedDisk]
    # Networks as Ganeti's dicts (their pools are computed from the config's NIC index).
    networks: dict[str, dict[str, Any]]
    # The commits since serial ``since`` (see ConfigManager.changes_since),
    # if asked for and still known.
    since: int | None = None
    changes: list[Change] | None = None


def take_image(cfg: ConfigManager, since: int | None = None) -> ConfigImage:
    """The configuration as it is now, with the commits since serial
    ``since`` if given (cheap: run it on the event loop)."""
    return ConfigImage(
        serial=cfg.serial,
        mtime=cfg.mtime,
        cluster=cfg.cluster,
        nodes=cfg.nodes(),
        groups=cfg.groups(),
        instances=cfg.table(Instance),
        filters=cfg.filter_rules(),
        detached=cfg.detached_disks(),
        networks={n.uuid: network_dict(cfg, n) for n in cfg.networks()},
        since=since,
        changes=None if since is None else cfg.changes_since(since),
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


# A mirrored disk's state: Corral's alone (Ganeti's Disk has no such slots).
_DISK_CORRAL_ONLY = frozenset({"outdated", "generation"})


def _disk(disk: Disk, holder: ConfigObject) -> dict[str, Any]:
    """A disk; ``holder``: its instance, or its detached disk's row."""
    values = _set(disk.model_dump(exclude={"children", *_DISK_CORRAL_ONLY}))
    if disk.children:
        values["children"] = [_disk(child, holder) for child in disk.children]
    # Corral's disks keep no times of their own: their holder's.
    return {**values, "params": {}, "ctime": holder.ctime, "mtime": holder.mtime}


def _disks(image: ConfigImage) -> dict[str, tuple[ConfigObject, Disk]]:
    """Every disk by uuid, each with its holder (instance or detached row)."""
    held: dict[str, tuple[ConfigObject, Disk]] = {
        d.uuid: (i, d) for i in image.instances for d in i.disks
    }
    held.update((row.uuid, (row, row.disk)) for row in image.detached)
    return held


def _instance(inst: Instance) -> dict[str, Any]:
    values = inst.model_dump(exclude={"disks", "nics", *_INSTANCE_CORRAL_ONLY})
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
        "disks": {uuid: _disk(d, holder) for uuid, (holder, d) in _disks(image).items()},
        "networks": image.networks,
        "filters": {r.uuid: _filter(r) for r in image.filters},
    }


def _top(image: ConfigImage) -> dict[str, Any]:
    """The top level's plain values."""
    return {
        "version": C.CONFIG_VERSION,
        "serial_no": image.serial,
        "ctime": image.cluster.ctime,
        "mtime": image.mtime,
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def render(image: ConfigImage) -> bytes:
    """The bytes of ``config.data``: compact JSON, keys sorted (the same
    configuration always gives the same bytes)."""
    return _dumps(config_dict(image)).encode("utf-8") + b"\n"


class _Section:
    """One top-level table's JSON, kept with the objects it was made of: an
    entry is made again only for a new object, the table's text only when an
    entry changed (or ``context``, which every entry depends on)."""

    def __init__(self) -> None:
        # uuid → (its object, its member of the table: '"uuid":{...}')
        self._kept: dict[str, tuple[object, str]] = {}
        self._context: object = None
        self._text = "{}"

    def text(
        self, items: dict[str, tuple[object, Callable[[], str]]], context: object = None
    ) -> str:
        """The table's JSON; ``items``: uuid → (the object, a maker of its JSON)."""
        changed = context != self._context or items.keys() != self._kept.keys()
        if context != self._context:
            self._kept, self._context = {}, context
        kept = {}
        for uuid, (obj, make) in items.items():
            old = self._kept.get(uuid)
            if old is None or old[0] is not obj:
                old, changed = (obj, f"{json.dumps(uuid)}:{make()}"), True
            kept[uuid] = old
        self._kept = kept
        if changed:
            self._text = "{" + ",".join(kept[uuid][1] for uuid in sorted(kept)) + "}"
        return self._text


class _Table:
    """A big top-level table (instances, disks) kept member by member in
    uuid order: a change costs what it changes, plus one join (in C)."""

    def __init__(self) -> None:
        self._sources: dict[str, object] = {}  # uuid → the object its member was made of
        self._members: dict[str, str] = {}  # uuid → '"uuid":{...}'
        self._order: list[str] = []
        self._text: str | None = "{}"

    def put(self, uuid: str, source: object, make: Callable[[], str]) -> None:
        """The member of ``uuid``, made again unless made of ``source`` already."""
        if self._sources.get(uuid) is source:
            return
        if uuid not in self._members:
            bisect.insort(self._order, uuid)
        self._sources[uuid] = source
        self._members[uuid] = f"{json.dumps(uuid)}:{make()}"
        self._text = None

    def drop(self, uuid: str) -> None:
        if self._members.pop(uuid, None) is not None:
            del self._sources[uuid]
            del self._order[bisect.bisect_left(self._order, uuid)]
            self._text = None

    def reset(self, items: dict[str, tuple[object, Callable[[], str]]]) -> None:
        """Exactly ``items`` (uuid → (source, maker)); members made of the
        same objects are kept."""
        sources, members = self._sources, self._members
        self._sources, self._members = {}, {}
        for uuid, (source, make) in items.items():
            if sources.get(uuid) is source:
                self._sources[uuid], self._members[uuid] = source, members[uuid]
            else:
                self._sources[uuid] = source
                self._members[uuid] = f"{json.dumps(uuid)}:{make()}"
        self._order = sorted(self._members)
        self._text = None

    def text(self) -> str:
        if self._text is None:
            self._text = "{" + ",".join(map(self._members.__getitem__, self._order)) + "}"
        return self._text


class Renderer:
    """:func:`render`'s bytes at a cost that grows with the change, not with
    the configuration: each object's JSON is kept with the object it was made
    of (a commit replaces every object it changes, and changes none in place);
    instances and disks follow the commits since the last image rendered
    (:attr:`serial`), other tables are compared object by object (they are
    small).  For one thread at a time (the exporter's)."""

    def __init__(self) -> None:
        self._nodes = _Section()
        self._groups = _Section()
        self._instances = _Table()
        self._disks = _Table()
        self._held: dict[str, list[str]] = {}  # instance uuid → its disks' uuids
        self.serial: int | None = None  # the serial of the image last rendered

    def render(self, image: ConfigImage) -> bytes:
        """The bytes :func:`render` gives for ``image``."""
        master = image.cluster.master_node
        nodes = self._nodes.text(
            {n.uuid: (n, functools.partial(_json_of, _node, n, master)) for n in image.nodes},
            context=master,
        )
        groups = self._groups.text(
            {g.uuid: (g, functools.partial(_json_of, _group, g)) for g in image.groups}
        )
        if image.changes is not None and image.since == self.serial:
            for upserts, deletes in image.changes:
                self._follow(upserts, deletes)
        else:
            self._rebuild(image)
        self.serial = image.serial
        parts = {
            **{key: _dumps(value) for key, value in _top(image).items()},
            "cluster": _dumps(_cluster(image.cluster)),
            "nodes": nodes,
            "nodegroups": groups,
            "instances": self._instances.text(),
            "disks": self._disks.text(),
            "networks": _dumps(image.networks),
            "filters": _dumps({r.uuid: _filter(r) for r in image.filters}),
        }
        return _object(parts).encode("utf-8") + b"\n"

    def _rebuild(self, image: ConfigImage) -> None:
        self._instances.reset(
            {i.uuid: (i, functools.partial(_json_of, _instance, i)) for i in image.instances}
        )
        self._disks.reset(
            {
                uuid: (holder, functools.partial(_json_of, _disk, d, holder))
                for uuid, (holder, d) in _disks(image).items()
            }
        )
        self._held = {i.uuid: [d.uuid for d in i.disks] for i in image.instances}

    def _follow(self, upserts: list[ConfigObject], deletes: list[ConfigObject]) -> None:
        """Apply one commit.  The disks it moves go first (a disk detached
        from an instance becomes a row of its own in the same commit)."""
        for obj in (*deletes, *upserts):
            if isinstance(obj, Instance):
                for uuid in self._held.pop(obj.uuid, []):
                    self._disks.drop(uuid)
            elif isinstance(obj, DetachedDisk):
                self._disks.drop(obj.uuid)
        for obj in deletes:
            if isinstance(obj, Instance):
                self._instances.drop(obj.uuid)
        for obj in upserts:
            if isinstance(obj, Instance):
                self._instances.put(obj.uuid, obj, functools.partial(_json_of, _instance, obj))
                self._held[obj.uuid] = [d.uuid for d in obj.disks]
                for d in obj.disks:
                    self._disks.put(d.uuid, obj, functools.partial(_json_of, _disk, d, obj))
            elif isinstance(obj, DetachedDisk):
                self._disks.put(obj.uuid, obj, functools.partial(_json_of, _disk, obj.disk, obj))


def _json_of(convert: Callable[..., dict[str, Any]], *args: Any) -> str:
    return _dumps(convert(*args))


def _object(members: dict[str, str]) -> str:
    """A JSON object of members already in JSON, keys sorted."""
    return "{" + ",".join(f"{json.dumps(k)}:{members[k]}" for k in sorted(members)) + "}"
