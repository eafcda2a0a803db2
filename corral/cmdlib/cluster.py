"""Logical units of the cluster: post-init, destroy, query, set params."""

from __future__ import annotations

import asyncio
import platform
import re
import struct
from typing import Any

from corral import __version__, capabilities, errors, uidpool
from corral import constants as C
from corral import diskparams as DP
from corral import ipolicy as IP
from corral import params as P
from corral.cmdlib import cluster_mip_modify as master_ip
from corral.cmdlib import communication
from corral.cmdlib.base import LogicalUnit
from corral.cmdlib.ipolicy_checks import new_violations
from corral.cmdlib.node_moves import submit_jobs
from corral.objects import Cluster, Disk, Instance, Node
from corral.opcodes import cluster as opc
from corral.opcodes.base import OpCode
from corral.osdef import guest_settings, media
from corral.osdef.definition import split_name
from corral.rpc.calls_node import node_capabilities
from corral.services import allocator
from corral.state.etcd.server import ETCD
from corral.storage import templates

_MAC_PREFIX_RE = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")


# Ganeti's default tools and Corral's zstd: what exports and moves may use.
COMPRESSION_TOOLS = list(C.IEC_DEFAULT_TOOLS)


def cluster_info(cluster: Cluster, master_name: str) -> dict[str, Any]:
    """QueryClusterInfo's answer: every key of Ganeti 3.0.2's luxid.

    Features Corral does not have show the value a Ganeti cluster has when it
    does not use them; Corral runs no data collectors.
    """
    return {
        **_versions(),
        "name": cluster.name,
        "master": master_name,
        "default_hypervisor": cluster.enabled_hypervisors[0],
        "enabled_hypervisors": cluster.enabled_hypervisors,
        "hvparams": cluster.hvparams,
        "os_hvp": cluster.os_hvp,
        "beparams": cluster.beparams,
        "osparams": cluster.osparams,
        "ipolicy": cluster.ipolicy,
        "nicparams": cluster.nicparams,
        "ndparams": cluster.ndparams,
        # Accepted only at Ganeti's defaults (see corral.diskparams).
        "diskparams": DP.DISK_DT_DEFAULTS,
        "candidate_pool_size": cluster.candidate_pool_size,
        "max_running_jobs": cluster.max_running_jobs,
        "max_tracked_jobs": cluster.max_tracked_jobs,
        "mac_prefix": cluster.mac_prefix,
        "master_netdev": cluster.master_netdev,
        "master_netmask": cluster.master_netmask,
        "use_external_mip_script": cluster.use_external_mip_script,
        "volume_group_name": None,
        "drbd_usermode_helper": None,
        "file_storage_dir": cluster.file_storage_dir,
        "shared_file_storage_dir": cluster.shared_file_storage_dir,
        "gluster_storage_dir": "",
        "maintain_node_health": cluster.maintain_node_health,
        "ctime": cluster.ctime,
        "mtime": cluster.mtime,
        "uuid": cluster.uuid,
        "tags": sorted(cluster.tags),
        "uid_pool": cluster.uid_pool,
        "default_iallocator": cluster.default_iallocator,
        "default_iallocator_params": cluster.default_iallocator_params,
        "reserved_lvs": [],
        "primary_ip_version": 6 if ":" in cluster.master_ip else 4,
        "prealloc_wipe_disks": False,
        "hidden_os": cluster.hidden_os,
        "blacklisted_os": cluster.blacklisted_os,
        "enabled_disk_templates": cluster.enabled_disk_templates,
        "install_image": cluster.install_image,
        "instance_communication_network": cluster.instance_communication_network,
        "zeroing_image": "",
        "compression_tools": COMPRESSION_TOOLS,
        "enabled_user_shutdown": cluster.enabled_user_shutdown,
        "enabled_data_collectors": {},
        "data_collector_interval": {},
        "modify_ssh_setup": cluster.modify_ssh_setup,
        "ssh_key_type": cluster.ssh_key_type,
        "ssh_key_bits": cluster.ssh_key_bits,
    }


def _versions() -> dict[str, Any]:
    return {
        "software_version": __version__,
        "protocol_version": C.PROTOCOL_VERSION,
        "config_version": C.CONFIG_VERSION,
        "os_api_version": C.OS_API_VERSION,
        "export_version": C.EXPORT_VERSION,
        "vcs_version": f"corral-{__version__}",
        "architecture": [f"{struct.calcsize('P') * 8}bits", platform.machine()],
    }


class LUClusterPostInit(LogicalUnit[opc.OpClusterPostInit]):
    """Runs the cluster-init hooks once the new cluster's daemons are up."""

    OPCODE = opc.OpClusterPostInit
    HPATH = "cluster-init"
    HTYPE = C.HTYPE_CLUSTER
    REQ_BGL = False

    def build_hooks_env(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.cluster.name}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        return [], [self.master_node.uuid]

    async def exec(self) -> Any:
        return True


class LUClusterDestroy(LogicalUnit[opc.OpClusterDestroy]):
    """Checks that the cluster is empty and runs the cluster-destroy hooks.

    The command-line side then stops the daemons and removes the files.
    """

    OPCODE = opc.OpClusterDestroy
    HPATH = "cluster-destroy"
    HTYPE = C.HTYPE_CLUSTER
    POST_HOOKS_IN_EXEC = True

    def build_hooks_env(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.cluster.name}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        return [], [self.master_node.uuid]

    async def check_prereq(self) -> None:
        others = [n.name for n in self.cfg.nodes() if n.uuid != self.master_node.uuid]
        if others:
            raise errors.OpPrereqError(
                f"There are still {len(others)} node(s) in this cluster ({', '.join(others)});"
                " remove them first",
                C.ECODE_INVAL,
            )
        instances = self.cfg.instance_count()
        if instances:
            raise errors.OpPrereqError(
                f"There are still {instances} instance(s) in this cluster; remove them first",
                C.ECODE_INVAL,
            )

    async def exec(self) -> Any:
        # After this opcode the cluster is gone, so the post hooks run now.
        await self.hooks().run_post(None)
        return self.master_node.uuid


class LUClusterQuery(LogicalUnit[opc.OpClusterQuery]):
    OPCODE = opc.OpClusterQuery
    REQ_BGL = False

    async def exec(self) -> Any:
        return cluster_info(self.cfg.cluster, self.master_node.name)


class LUClusterSetParams(LogicalUnit[opc.OpClusterSetParams]):
    """Changes cluster parameters (those the cluster has so far)."""

    OPCODE = opc.OpClusterSetParams
    HPATH = "cluster-modify"
    HTYPE = C.HTYPE_CLUSTER

    def check_arguments(self) -> None:
        op = self.op
        for ranges in (op.uid_pool, op.add_uids, op.remove_uids):
            uidpool.check(ranges or [])
        for hvs in (op.os_hvp or {}).values():
            for hv_name, values in hvs.items():
                if values is not None:  # stored typed, as Ganeti's ForceDictType leaves them
                    hvs[hv_name] = P.check_os_hvparams(hv_name, values)
        if op.mac_prefix is not None and not _MAC_PREFIX_RE.match(op.mac_prefix):
            raise errors.OpPrereqError(
                f"Invalid MAC address prefix '{op.mac_prefix}': use three lower-case hex"
                " octets such as aa:00:00",
                C.ECODE_INVAL,
            )
        if op.install_image:
            # Ganeti's CheckImageValidity, its words; "" (Corral only) clears it.
            media.check_image(op.install_image, "Install image must be an absolute path or a URL")
        if op.master_netmask is not None:
            master_ip.check_netmask(self.cfg.cluster, op.master_netmask)
        if op.enabled_hypervisors == []:
            raise errors.OpPrereqError("At least one hypervisor must be enabled", C.ECODE_INVAL)
        capabilities.check_implemented(
            op.enabled_hypervisors or [], op.enabled_disk_templates or []
        )
        if op.diskparams:
            given = {str(template): params for template, params in op.diskparams.items()}
            DP.check(given, "While verify diskparams options")
        for mods in (op.hidden_os, op.blacklisted_os):
            for mod in mods or []:
                if len(mod) != 2 or mod[0] not in ("add", "remove"):
                    raise errors.OpPrereqError(
                        f'Invalid OS list change {mod!r}: expected ["add"|"remove", os]',
                        C.ECODE_INVAL,
                    )

    def build_hooks_env(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.cluster.name, "NEW_VG_NAME": ""}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = self.master_node.uuid
        return [master], [master]

    async def exec(self) -> Any:
        op = self.op
        cluster = self.cfg.cluster.copy_for_update()
        assert isinstance(cluster, Cluster)
        changes: list[tuple[str, Any]] = []
        for name in (
            "max_running_jobs",
            "max_tracked_jobs",
            "candidate_pool_size",
            "mac_prefix",
            "use_external_mip_script",
            "enabled_hypervisors",
            "enabled_disk_templates",
            "file_storage_dir",
            "shared_file_storage_dir",
            "modify_etc_hosts",
            "maintain_node_health",
            "default_iallocator",
            "default_iallocator_params",
            "install_image",
            "etcd_members",
        ):
            value = getattr(op, name)
            if value is not None and value != getattr(cluster, name):
                setattr(cluster, name, value)
                changes.append((name, value))
        if self.new_uid_pool != cluster.uid_pool:
            cluster.uid_pool = self.new_uid_pool
            changes.append(("uid_pool", self.new_uid_pool))
        self._merge_params(cluster, changes)
        self._merge_osparams(cluster, changes)
        if self.new_ipolicy is not None:
            cluster.ipolicy = self.new_ipolicy
            changes.append(("ipolicy", self.new_ipolicy))
        for name in ("hidden_os", "blacklisted_os"):
            mods = getattr(op, name)
            if mods:
                setattr(cluster, name, _apply_list_mods(getattr(cluster, name), mods))
                changes.append((name, getattr(cluster, name)))
        await master_ip.before_change(self, cluster, changes)
        jobs = self._communication_network(cluster, changes)
        if changes:
            self.tx.update(cluster)
        if self.op.master_netdev:
            await self.checkpoint()  # the master IP comes up as the configuration says
            await master_ip.restart(self)
        if not jobs:
            return None  # as Ganeti's LUClusterSetParams
        # The jobs find the cluster as changed (Ganeti submits them after the commit).
        if not self.op.master_netdev:
            await self.checkpoint()
        return await submit_jobs(self, jobs)

    def _communication_network(
        self, cluster: Cluster, changes: list[tuple[str, Any]]
    ) -> list[list[OpCode]]:
        """Ganeti's _ModifyInstanceCommunicationNetwork: the new name stored,
        the jobs that create the network and connect it to the groups."""
        name = self.op.instance_communication_network
        if name is None:
            return []
        current = cluster.instance_communication_network
        jobs = communication.change_network(self.cfg, current, name, self.feedback)
        if name != current:
            cluster.instance_communication_network = name
            changes.append(("instance_communication_network", name))
        return jobs

    def _merge_params(self, cluster: Cluster, changes: list[tuple[str, Any]]) -> None:
        op = self.op
        if op.beparams:
            be = P.check_beparams(op.beparams, allow_none=True)
            cluster.beparams = {
                **cluster.beparams,
                "default": _merge_dict(cluster.beparams.get("default", {}), be, nested=False),
            }
            changes.append(("beparams", cluster.beparams["default"]))
        if op.nicparams:
            nic = P.check_params(op.nicparams, P.NIC_TYPES, "NIC", allow_none=True)
            cluster.nicparams = {
                **cluster.nicparams,
                "default": _merge_dict(cluster.nicparams.get("default", {}), nic, nested=False),
            }
            changes.append(("nicparams", cluster.nicparams["default"]))
        if op.hvparams:
            hv = {
                name: P.check_hvparams(name, values, allow_none=True)
                for name, values in op.hvparams.items()
            }
            merged = _merge_dict(cluster.hvparams, hv, nested=True)
            for name in hv:
                P.check_filled_hvparams(name, merged.get(name, {}))
            cluster.hvparams = merged
            changes.append(("hvparams", cluster.hvparams))
        if op.enabled_user_shutdown is not None:
            cluster.enabled_user_shutdown = op.enabled_user_shutdown
            changes.append(("enabled_user_shutdown", op.enabled_user_shutdown))
        if op.ndparams:
            cluster.ndparams = _merge_dict(cluster.ndparams, op.ndparams, nested=False)
            changes.append(("ndparams", cluster.ndparams))
        if op.os_hvp:
            cluster.os_hvp = _merged_os_hvp(cluster.os_hvp, op.os_hvp)
            changes.append(("os_hvp", cluster.os_hvp))

    def _check_ipolicy(self) -> None:
        """Ganeti's LUClusterSetParams._CheckIpolicy: instances the new policy
        refuses are only warned about."""
        cluster = self.cfg.cluster
        enabled = self.op.enabled_disk_templates or cluster.enabled_disk_templates
        self.new_ipolicy: dict[str, Any] | None = None
        if not self.op.ipolicy:
            IP.check_vs_disk_templates(cluster.ipolicy, enabled)
            return
        self.new_ipolicy = IP.updated_ipolicy(cluster.ipolicy, self.op.ipolicy)
        IP.check_vs_disk_templates(self.new_ipolicy, enabled)
        violating = new_violations(self.cfg, self.new_ipolicy)
        if violating:
            self.warn(
                "After the ipolicy change the following instances violate them:"
                f" {IP.comma_join(violating)}"
            )

    def _merge_osparams(self, cluster: Cluster, changes: list[tuple[str, Any]]) -> None:
        for name in ("osparams", "osparams_private_cluster"):
            update = getattr(self.op, name)
            if update:
                setattr(cluster, name, _merge_dict(getattr(cluster, name), update, nested=True))
                shown = {os: list(values) for os, values in update.items()}
                changes.append((name, shown if name.endswith("cluster") else update))

    async def check_prereq(self) -> None:
        """The policy is checked against the enabled disk templates; OS parameters
        on the nodes that have the OS ("preseeding" is fine)."""
        if self.op.enabled_disk_templates:
            cluster = self.cfg.cluster
            disabled = [
                t for t in cluster.enabled_disk_templates if t not in self.op.enabled_disk_templates
            ]
            _check_templates_unused(self.cfg.instances(), disabled)
        self._check_ipolicy()
        self.new_uid_pool = self._uid_pool()
        for warning in DP.change_warnings(self.op.diskparams or {}):
            self.warn(warning)
        if self.op.default_iallocator:
            allocator.check_exists(self.master.paths, self.op.default_iallocator)
        network = self.op.instance_communication_network
        existing = communication.find_network(self.cfg, network) if network else None
        for warning in communication.network_warnings(existing) if existing else []:
            self.warn(warning)
        self._check_storage_dirs()
        await self._check_etcd()
        await self._check_nodes_serve()
        for name in ("osparams", "osparams_private_cluster"):
            for os_name, values in (getattr(self.op, name) or {}).items():
                given = {k: v for k, v in values.items() if v is not None}
                private = name != "osparams"
                guest_settings.check(*((given, {}) if not private else ({}, given)), {})
                await self._verify_os(os_name, given, private=private)

    def _uid_pool(self) -> list[list[int]]:
        """The pool after the change, in Ganeti's order: additions, removals
        (of whole ranges only), then a new pool replacing it all."""
        op = self.op
        pool = self.cfg.cluster.uid_pool
        if op.add_uids is not None:
            pool = uidpool.added(pool, op.add_uids)
        if op.remove_uids is not None:
            pool = uidpool.removed(pool, op.remove_uids)
        return pool if op.uid_pool is None else op.uid_pool

    def _check_storage_dirs(self) -> None:
        """Ganeti's checks of a new file or shared file storage directory: it
        may be unset only while its template is disabled, and set while it is
        (with a warning); whether the nodes can use it is verify's to say."""
        cluster, op = self.cfg.cluster, self.op
        enabled = op.enabled_disk_templates or cluster.enabled_disk_templates
        for template, strategy in templates.DISK_TEMPLATES.items():
            value = getattr(op, strategy.unit_setting) if strategy.unit_setting else None
            if value == "" and template in enabled:
                raise errors.OpPrereqError(
                    f"Unsetting the '{template}' storage directory while having '{template}'"
                    " storage enabled is not permitted.",
                    C.ECODE_INVAL,
                )
            if value and template not in enabled:
                self.warn(
                    f"Specified a {template} storage directory, although {template} storage"
                    " is not enabled."
                )

    async def _check_etcd(self) -> None:
        """etcd members can run only where etcd is installed: the master at least
        (verify reports candidates that run no member)."""
        backend, service = self.master.backend, self.master.etcd_members
        in_etcd = backend is not None and backend.kind == "etcd"
        failure = service.move_back_failure if service is not None else None
        if self.op.etcd_members is False and in_etcd and failure is not None:
            # The members stop only once the stores are back in SQLite.
            raise errors.OpPrereqError(
                "Cannot stop the etcd members: the master's stores live in etcd and"
                f" cannot move back into SQLite now ({failure}); fix that and try again",
                C.ECODE_STATE,
            )
        turning_on = self.op.etcd_members and not self.cfg.cluster.etcd_members
        if turning_on and not await asyncio.to_thread(ETCD.exists):
            raise errors.OpPrereqError(
                f"Cannot run etcd members: etcd is not installed ({ETCD} is missing);"
                " install Debian's etcd-server package on the master candidates",
                C.ECODE_ENVIRON,
            )

    async def _check_nodes_serve(self) -> None:
        """Every vm-capable online node must serve what this change newly enables
        (in the directories the change sets)."""
        cluster, op = self.cfg.cluster, self.op
        file_dir = op.file_storage_dir or cluster.file_storage_dir
        shared_dir = op.shared_file_storage_dir or cluster.shared_file_storage_dir
        hypervisors = [
            h for h in op.enabled_hypervisors or [] if h not in cluster.enabled_hypervisors
        ]
        disk_templates = [
            name
            for name in op.enabled_disk_templates or cluster.enabled_disk_templates
            if name not in cluster.enabled_disk_templates
        ]
        nodes = [n for n in self.cfg.nodes() if n.vm_capable and not n.offline]
        if not (hypervisors or disk_templates) or not nodes:
            return
        units = templates.capacity_units(templates.StorageDirs(file_dir, shared_dir))
        results = await self.master.rpc.results(
            nodes, node_capabilities([unit.to_wire() for unit in units])
        )
        reports: dict[str, dict[str, Any] | str] = {
            n.name: results[n.uuid].fail_msg or results[n.uuid].payload for n in nodes
        }
        capabilities.check_reports(reports, hypervisors, disk_templates)

    async def _verify_os(self, os_name: str, values: dict[str, Any], private: bool) -> None:
        from corral.cmdlib import instance_utils as U
        from corral.services.oses import node_oses

        base, _ = split_name(os_name)
        answers = await node_oses(self.master)
        holders = []
        for node_name, entries in answers.items():
            entry = next((e for e in entries or [] if e["name"] == base and e["valid"]), None)
            if entry is not None:
                if "+" in os_name:  # defaults may be set for the OS as a whole
                    U.check_variant(os_name, entry, False)
                U.check_params_declared(os_name, entry, list(values))
                holders.append(self.cfg.lookup(Node, node_name))
        master = self.cfg.master_node
        if master not in holders:
            # Ganeti's words (it checks on the master only): parameters of an
            # OS not installed yet are kept, for when it is.
            self.log_info(f"OS {os_name} not found on node {master.name}, validation skipped")
        if holders and values:
            public, hidden = ({}, values) if private else (values, {})
            spec = U.job_os_spec(self, os_name, public, hidden)
            await U.verify_osparams(self, holders, spec)


def _disk_text(disk: Disk) -> str:
    """A disk as Ganeti's messages show it (its Disk.__str__ for the
    templates Corral has)."""
    children = ", ".join(_disk_text(child) for child in disk.children)
    text = f"<Disk(type={disk.dev_type}, logical_id={tuple(disk.logical_id)!r}"
    text += f", children=[{children}]"
    text += f", visible as /dev/{disk.iv_name}" if disk.iv_name else ", not visible"
    if disk.spindles is not None:
        text += f", spindles={disk.spindles}"
    return text + f", size={disk.size}m)>"


def _check_templates_unused(instances: list[Instance], disabled: list[str]) -> None:
    """Refuse, as Ganeti, to disable a disk template some disk (or, for
    diskless, some instance without disks) uses."""
    for template in disabled:
        used = [
            f"{_disk_text(disk)} (on {inst.name})"
            for inst in instances
            for disk in inst.disks
            if disk.dev_type == template
        ]
        if used:
            raise errors.OpPrereqError(
                f"Cannot disable disk template '{template}', because there is at least one"
                " disk using it:\n * " + "\n * ".join(used),
                C.ECODE_STATE,
            )
        strategy = templates.DISK_TEMPLATES.get(template)
        if strategy is not None and not strategy.has_disks:
            for inst in instances:
                if not inst.disks:
                    raise errors.OpPrereqError(
                        f"Cannot disable disk template '{template}', because there is at"
                        f" least one instance using it:\n * {inst.name}",
                        C.ECODE_STATE,
                    )


def _merged_os_hvp(
    current: dict[str, dict[str, Any]], update: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """OS-specific hypervisor parameters after an update, as Ganeti merges them:
    per OS and hypervisor the given values replace or extend the stored ones,
    and a hypervisor given as null loses its OS-specific values."""
    out = {os_name: dict(hvs) for os_name, hvs in current.items()}
    for os_name, hvs in update.items():
        merged = out.setdefault(os_name, {})
        for hv_name, values in hvs.items():
            if values is None:
                merged.pop(hv_name, None)
            else:
                merged[hv_name] = {**merged.get(hv_name, {}), **values}
    return out


def _merge_dict(current: dict[str, Any], update: dict[str, Any], nested: bool) -> dict[str, Any]:
    """Merge parameter changes; a value of None removes the key."""
    out = dict(current)
    for key, value in update.items():
        if nested and isinstance(value, dict):
            out[key] = _merge_dict(out.get(key, {}), value, nested=False)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _apply_list_mods(current: list[str], mods: list[list[str]]) -> list[str]:
    out = list(current)
    for action, name in mods:
        if action == "add" and name not in out:
            out.append(name)
        elif action == "remove" and name in out:
            out.remove(name)
    return out
