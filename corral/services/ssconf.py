"""Ganeti's ssconf files: small plain-text copies of config values for scripts.

Every key of Ganeti 3.0.2 (its ``constants.VALID_SS_KEYS``), each value as its
wconfd writes it (``Ganeti.WConfd.Ssconf.mkSSConf``): lines joined by
newlines, nodes and groups in nice order of their names, master candidates
(the master among them) in order of their UUIDs, booleans as ``True`` and
``False``, an address family as its number.  A file ends with a newline unless
it is empty (:func:`corral.ssconf_files.file_data`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import weakref
from typing import TYPE_CHECKING, Any

from corral import __version__, ssconf_files, uidpool
from corral import hypervisors as H
from corral.config.manager import ConfigManager
from corral.objects import Instance, Node, NodeGroup
from corral.services.ndparams import ssh_port

if TYPE_CHECKING:
    from corral.paths import Paths

log = logging.getLogger(__name__)

_lines = "\n".join


# Per configuration: (its serial, its instance names' version, the values then).
_computed: weakref.WeakKeyDictionary[ConfigManager, tuple[int, int, dict[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def ssconf_values(cfg: ConfigManager) -> dict[str, str]:
    """Every ssconf key with its value (the file's content without its newline).

    Computed once per cluster serial (the master's own files and the push to
    the other nodes both ask after every change); the instance list, the one
    value that grows with the cluster, only when instance names changed.
    """
    version = cfg.names_version(Instance)
    last = _computed.get(cfg)
    if last is not None and last[0] == cfg.serial:
        return dict(last[2])
    if last is not None and last[1] == version:
        instance_list = last[2]["instance_list"]
    else:
        instance_list = _lines(cfg.nice_names(Instance))
    values = _compute(cfg, instance_list)
    _computed[cfg] = (cfg.serial, version, values)
    return dict(values)


def _compute(cfg: ConfigManager, instance_list: str) -> dict[str, str]:
    cluster = cfg.cluster
    nodes = [cfg.lookup(Node, name) for name in cfg.nice_names(Node)]
    candidates = sorted(
        (n for n in nodes if n.master_candidate or n.uuid == cluster.master_node),
        key=lambda n: n.uuid,
    )
    groups = [cfg.lookup(NodeGroup, name) for name in cfg.nice_names(NodeGroup)]
    values = {
        "cluster_name": cluster.name,
        "cluster_tags": _lines(sorted(cluster.tags)),
        "file_storage_dir": cluster.file_storage_dir,
        "shared_file_storage_dir": cluster.shared_file_storage_dir,
        # Corral has no gluster template (QueryClusterInfo says the same).
        "gluster_storage_dir": "",
        "master_candidates": _lines(n.name for n in candidates),
        "master_candidates_ips": _lines(n.primary_ip for n in candidates),
        # Ganeti's digests of the candidates' client certificates; Corral's
        # nodes trust one another through the cluster CA instead.
        "master_candidates_certs": "",
        "master_ip": cluster.master_ip,
        "master_netdev": cluster.master_netdev,
        "master_netmask": str(cluster.master_netmask),
        "master_node": cfg.master_node.name,
        "node_list": _lines(n.name for n in nodes),
        "node_primary_ips": _lines(f"{n.name} {n.primary_ip}" for n in nodes),
        "node_secondary_ips": _lines(f"{n.name} {n.secondary_ip}" for n in nodes),
        "node_vm_capable": _lines(f"{n.name}={n.vm_capable}" for n in nodes),
        "offline_nodes": _lines(n.name for n in nodes if n.offline),
        "online_nodes": _lines(n.name for n in nodes if not n.offline),
        "primary_ip_family": str(_ip_family(cluster.master_ip)),
        "instance_list": instance_list,
        "release_version": __version__,
        "hypervisor_list": _lines(cluster.enabled_hypervisors),
        "maintain_node_health": str(cluster.maintain_node_health),
        "uid_pool": uidpool.format_pool(cluster.uid_pool, "\n"),
        "nodegroups": _lines(f"{g.uuid} {g.name}" for g in groups),
        # luxid's order: by uuid.
        "networks": _lines(
            f"{n.uuid} {n.name}" for n in sorted(cfg.networks(), key=lambda n: n.uuid)
        ),
        "enabled_user_shutdown": str(cluster.enabled_user_shutdown),
        "ssh_ports": _lines(
            f"{n.name}={ssh_port(cluster, cfg.get(NodeGroup, n.group), n)}" for n in nodes
        ),
    }
    for hv in H.GANETI_HYPERVISORS:
        params = cluster.hvparams.get(hv, {})
        values[f"hvparams_{hv}"] = _lines(f"{k}={_hvparam(params[k])}" for k in sorted(params))
    return values


def _ip_family(address: str) -> int:
    return int(socket.AF_INET6 if ":" in address else socket.AF_INET)


def _hvparam(value: Any) -> str:
    """A value as wconfd shows it: strings bare, numbers as numbers, booleans
    as ``True``/``False``, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, separators=(",", ":"))


# Tables whose objects the ssconf files describe (of instances, only the names).
_SSCONF_TABLES = frozenset({"cluster", "nodes", "nodegroups", "instances", "networks"})


def affects_ssconf(tables: set[str]) -> bool:
    """Whether a change of these config tables may change the ssconf files."""
    return bool(tables & _SSCONF_TABLES)


class SsconfWriter:
    """The master's own ssconf files: each write replaces (atomically) the
    files whose value changed.  Blocking: :class:`MasterSsconf` calls it in a
    thread."""

    def __init__(self, paths: Paths) -> None:
        self._paths = paths
        self._written: dict[str, str] = {}

    def write(self, values: dict[str, str]) -> None:
        """Write every file whose value (``ssconf_values``) differs from the
        last written (or, the first time, from the file's content)."""
        for key, value in values.items():
            if self._written.get(key) != value:
                self._write_file(key, ssconf_files.file_data(value))
        self._written = values

    def _write_file(self, key: str, data: bytes) -> None:
        path = self._paths.ssconf_file(key)
        try:
            if path.read_bytes() == data:
                return
        except OSError:
            pass
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)


class MasterSsconf:
    """The master's ssconf files kept current: a config listener wakes a task
    that writes, in a thread, the files whose value changed (a burst of
    commits, one write).  A job ends once they hold its changes
    (:meth:`current`), as Ganeti's wconfd writes them with the configuration."""

    def __init__(self, cfg: ConfigManager, writer: SsconfWriter) -> None:
        self._cfg = cfg
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._dirty = asyncio.Event()
        self._affected = False  # a commit since the last write may change them
        self._serial = 0  # the cluster serial they hold
        self._progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Write the files as the configuration is now (masterd's start)."""
        serial = self._cfg.serial
        await asyncio.to_thread(self._writer.write, ssconf_values(self._cfg))
        self._serial = serial

    def changed(self, cfg: ConfigManager, tables: set[str]) -> None:
        """The config listener (from any thread: a commit may run in one)."""
        if affects_ssconf(tables):
            self._affected = True
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._dirty.set()
        if self._task is None:
            self._task = self._loop.create_task(self._rounds())

    async def _rounds(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            serial = self._cfg.serial
            if self._affected:
                self._affected = False
                values = ssconf_values(self._cfg)  # on the loop, where the config changes
                try:
                    await asyncio.to_thread(self._writer.write, values)
                except OSError:
                    log.exception("Writing the ssconf files failed")
            async with self._progress:  # even after a failure: no job waits for ever
                self._serial = max(self._serial, serial)
                self._progress.notify_all()

    async def current(self, serial: int) -> None:
        """Wait until the files hold cluster serial ``serial`` (or a later one)."""
        async with self._progress:
            await self._progress.wait_for(lambda: self._serial >= serial)

    async def stop(self) -> None:
        """Stop the task (masterd's shutdown)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
