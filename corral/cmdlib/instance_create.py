"""Creating an instance: disks, OS installation, start — all or nothing."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

from corral import capabilities, errors
from corral import constants as C
from corral import params as P
from corral.cmdlib import instance_intents as intents
from corral.cmdlib import instance_utils as U
from corral.cmdlib.base import LogicalUnit
from corral.cmdlib.ipolicy_checks import check_new_instance
from corral.cmdlib.tags import check_tag
from corral.master.services.params import filled_beparams
from corral.objects import NIC, Disk, Instance, Node
from corral.opcodes import instance as opi
from corral.osdef.definition import split_name
from corral.storage import templates

DISK_MODES = ("rw", "ro")


def check_hostname_syntax(name: str, what: str = "instance name") -> None:
    from corral.bootstrap import check_hostname

    check_hostname(name, what)


async def resolve_name(name: str) -> str:
    """The address of ``name``, or an OpPrereqError naming --no-name-check."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(name, None, family=socket.AF_INET)
    except OSError:
        raise errors.OpPrereqError(
            f"Cannot resolve instance name '{name}'; use --no-name-check for names not in DNS",
            C.ECODE_RESOLVER,
        ) from None
    return str(infos[0][4][0])


async def ip_in_use(address: str) -> bool:
    """Whether something answers at ``address`` (TCP port 22, refused counts)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(address, 22), 1.0)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


def parse_disks(specs: list[dict[str, Any]], template: str) -> list[dict[str, Any]]:
    """Checked disk specifications: size in MiB, mode, name."""
    if template == "diskless":
        if specs:
            raise errors.OpPrereqError("Disks given for the diskless template", C.ECODE_INVAL)
        return []
    if not specs:
        raise errors.OpPrereqError(
            f"The {template} template needs at least one disk (--disk or -s)", C.ECODE_INVAL
        )
    out = []
    for idx, spec in enumerate(specs):
        if not isinstance(spec, dict) or "size" not in spec:
            raise errors.OpPrereqError(f"Disk {idx} has no size", C.ECODE_INVAL)
        unknown = set(spec) - {"size", "mode", "name", "vg", "metavg", "spindles", "access"}
        if unknown:
            raise errors.OpPrereqError(
                f"Disk {idx}: unknown parameter(s) {', '.join(sorted(unknown))}", C.ECODE_INVAL
            )
        size = P.parse_size(spec["size"], f"size of disk {idx}")
        if size <= 0:
            raise errors.OpPrereqError(f"Disk {idx}: size must be positive", C.ECODE_INVAL)
        mode = spec.get("mode", "rw")
        if mode not in DISK_MODES:
            raise errors.OpPrereqError(
                f"Disk {idx}: invalid mode '{mode}' (rw or ro)", C.ECODE_INVAL
            )
        out.append({"size": size, "mode": mode, "name": spec.get("name") or None})
    return out


def parse_nic(idx: int, spec: dict[str, Any]) -> dict[str, Any]:
    """A checked NIC specification (MAC and IP still symbolic)."""
    unknown = set(spec) - {"mac", "ip", "mode", "link", "vlan", "name", "network"}
    if unknown:
        raise errors.OpPrereqError(
            f"NIC {idx}: unknown parameter(s) {', '.join(sorted(unknown))}", C.ECODE_INVAL
        )
    mac = str(spec.get("mac") or "auto").lower()
    if mac not in ("auto", "generate"):
        mac = U.check_mac(mac)
    ip = spec.get("ip")
    if ip in ("", "none", None):
        ip = None
    elif ip != "auto":
        try:
            ip = str(ipaddress.ip_address(ip))
        except ValueError:
            raise errors.OpPrereqError(
                f"NIC {idx}: invalid IP address '{ip}'", C.ECODE_INVAL
            ) from None
    nicparams = {k: spec[k] for k in ("mode", "link", "vlan") if spec.get(k) is not None}
    mode = nicparams.get("mode")
    if mode is not None and mode not in P.NIC_MODES:
        raise errors.OpPrereqError(
            f"NIC {idx}: invalid mode '{mode}' (one of {', '.join(P.NIC_MODES)})", C.ECODE_INVAL
        )
    if mode == "routed" and ip is None:
        raise errors.OpPrereqError(f"NIC {idx}: routed mode requires an IP address", C.ECODE_INVAL)
    return {
        "mac": mac,
        "ip": ip,
        "name": spec.get("name") or None,
        "nicparams": {k: str(v) for k, v in nicparams.items()},
    }


class LUInstanceCreate(LogicalUnit[opi.OpInstanceCreate]):
    """``gnt-instance add``: the instance exists fully or not at all."""

    OPCODE = opi.OpInstanceCreate
    HPATH = "instance-add"
    HTYPE = C.HTYPE_INSTANCE
    REQ_BGL = False

    def check_arguments(self) -> None:
        op = self.op
        if op.mode != "create":
            raise errors.OpPrereqError(
                f"Instance creation mode '{op.mode}' is not supported by Corral yet; only 'create'",
                C.ECODE_INVAL,
            )
        check_hostname_syntax(op.instance_name)
        if op.ip_check and not op.name_check:
            raise errors.OpPrereqError(
                "Cannot do IP address check without a name check", C.ECODE_INVAL
            )
        if not op.os_type and not op.no_install:
            raise errors.OpPrereqError(
                "No OS given (-o); an OS is needed unless --no-install", C.ECODE_INVAL
            )
        # As Ganeti: without a template, the cluster's first enabled one.
        self.disk_template = op.disk_template or self.cfg.cluster.enabled_disk_templates[0]
        # Even when an old configuration enables it, a template Corral lacks creates nothing.
        templates.check_implemented(self.disk_template)
        self.disk_specs = parse_disks(op.disks, self.disk_template)
        self.nic_specs = [parse_nic(i, spec) for i, spec in enumerate(op.nics)]
        self.beparams = P.check_beparams(op.beparams)
        for tag in op.tags:
            check_tag(tag)

    def expand_names(self) -> None:
        cluster = self.cfg.cluster
        if self.disk_template not in cluster.enabled_disk_templates:
            raise errors.OpPrereqError(
                f"Disk template '{self.disk_template}' is not enabled in the cluster"
                f" (enabled: {', '.join(cluster.enabled_disk_templates)})",
                C.ECODE_STATE,
            )
        self.hypervisor = self.op.hypervisor or cluster.enabled_hypervisors[0]
        capabilities.check_hypervisor_implemented(self.hypervisor)
        if self.hypervisor not in cluster.enabled_hypervisors:
            raise errors.OpPrereqError(
                f"Hypervisor '{self.hypervisor}' is not enabled", C.ECODE_STATE
            )
        self.hvparams = P.check_hvparams(self.hypervisor, self.op.hvparams)
        self.pnode = self._primary_node()

    def _primary_node(self) -> Node:
        name = self.op.pnode_uuid or self.op.pnode
        if name:
            return self.cfg.lookup(Node, name)
        capable = [n for n in self.cfg.nodes() if n.vm_capable and not n.offline]
        if len(capable) == 1:
            return capable[0]
        raise errors.OpPrereqError("No primary node given; use -n NODE", C.ECODE_INVAL)

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.op.instance_name]
        self.needed_locks[C.LEVEL_NODE] = [self.pnode.uuid]
        self.needed_locks[C.LEVEL_NODE_RES] = [self.pnode.uuid]
        self.share_locks[C.LEVEL_NODE] = True

    async def check_prereq(self) -> None:
        op = self.op
        if self.cfg.find(Instance, op.instance_name) is not None:
            raise errors.OpPrereqError(
                f"Instance '{op.instance_name}' is already in the cluster", C.ECODE_EXISTS
            )
        if not self.pnode.vm_capable or self.pnode.offline:
            raise errors.OpPrereqError(
                f"Node {self.pnode.name} cannot host instances", C.ECODE_STATE
            )
        address = await self._check_name()
        self.instance = self._build_instance(address)
        self._check_addresses()
        check_new_instance(self, self.instance, op.ignore_ipolicy)
        if op.os_type:
            await self._check_os()
        memory = filled_beparams(self.cfg.cluster, self.instance)["maxmem"] if op.start else 0
        disk_total = sum(d.size for d in self.instance.disks)
        await U.check_node_resources(
            self,
            self.pnode,
            self.hypervisor,
            memory,
            disk_total,
            f"creating instance {op.instance_name}",
        )

    async def _check_name(self) -> str | None:
        if not self.op.name_check:
            return None
        address = await resolve_name(self.op.instance_name)
        if self.op.ip_check and await ip_in_use(address):
            raise errors.OpPrereqError(
                f"IP {address} of instance {self.op.instance_name} is already in use",
                C.ECODE_NOTUNIQUE,
            )
        return address

    def _build_instance(self, address: str | None) -> Instance:
        cluster = self.cfg.cluster
        name = self.op.instance_name
        taken = self.cfg.used_macs()
        nics = []
        for idx, spec in enumerate(self.nic_specs):
            mac = spec["mac"]
            if mac in ("auto", "generate"):
                mac = U.generate_mac(cluster.mac_prefix, taken)
            elif mac in taken:
                raise errors.OpPrereqError(
                    f"MAC address {mac} already in use in cluster", C.ECODE_NOTUNIQUE
                )
            else:
                taken.add(mac)
            ip = address if spec["ip"] == "auto" else spec["ip"]
            if spec["ip"] == "auto" and address is None:
                raise errors.OpPrereqError(
                    f"NIC {idx}: ip=auto needs the name check", C.ECODE_INVAL
                )
            nics.append(NIC(mac=mac, ip=ip, name=spec["name"], nicparams=spec["nicparams"]))
        disks = [
            Disk(
                size=d["size"],
                mode=d["mode"],
                name=d["name"],
                dev_type=self.disk_template,
                iv_name=f"disk/{idx}",
                logical_id=[self.op.file_driver or "loop", U.file_disk_path(cluster, name, idx)]
                if self.disk_template == "file"
                else [],
            )
            for idx, d in enumerate(self.disk_specs)
        ]
        return Instance(
            name=name,
            primary_node=self.pnode.uuid,
            os=self.op.os_type or "",
            hypervisor=self.hypervisor,
            hvparams=self.hvparams,
            beparams=self.beparams,
            osparams=dict(self.op.osparams),
            osparams_private=dict(self.op.osparams_private or {}),
            disk_template=self.disk_template,
            disks=disks,
            nics=nics,
            admin_state="up" if self.op.start else "down",
            tags=list(self.op.tags),
        )

    def _check_addresses(self) -> None:
        if not self.op.conflicts_check:
            return
        for idx, nic in enumerate(self.instance.nics):
            owner = self.cfg.ip_owner(nic.ip) if nic.ip else None
            if owner is not None:
                raise errors.OpPrereqError(
                    f"NIC {idx}: IP address {nic.ip} is already used by instance {owner}",
                    C.ECODE_NOTUNIQUE,
                )

    async def _check_os(self) -> None:
        op = self.op
        assert op.os_type
        base, _ = split_name(op.os_type)
        if base in self.cfg.cluster.blacklisted_os:
            raise errors.OpPrereqError(
                f"Guest OS '{base}' is not allowed for installation (it is blacklisted)",
                C.ECODE_STATE,
            )
        info = await U.node_os_info(self, self.pnode, op.os_type)
        U.check_variant(op.os_type, info, op.force_variant)
        private, secret = op.osparams_private or {}, op.osparams_secret or {}
        U.check_params_declared(op.os_type, info, [*op.osparams, *private, *secret])
        self.osparams, self.hidden_osparams = U.script_osparams(
            self, op.os_type, op.osparams, private, secret
        )
        # As Ganeti's CheckOSParams: verify runs for every new instance with an OS.
        if info["api_versions"] and max(info["api_versions"]) >= 20:
            await U.verify_osparams(
                self, [self.pnode], op.os_type, self.osparams, self.hidden_osparams
            )

    def build_hooks_env(self) -> dict[str, Any]:
        env = U.instance_hook_env(self.cfg, self.instance, status=self.op.start, disk_ids=False)
        env["ADD_MODE"] = self.op.mode
        return env

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.master_node.uuid, *self.instance.all_nodes]
        return nodes, nodes

    async def exec(self) -> Any:
        inst = self.instance
        # What an earlier, interrupted add of this name left behind goes first.
        await intents.settle_name(self.master, inst.name, self.warn)
        record = None
        if inst.disks or self.op.start:
            record = intents.write(self.master.paths, intents.Intent.of(inst))
        try:
            await self._create(inst)
        except BaseException:
            if record is not None and not await intents.settle(
                self.master, record, intents.Intent.of(inst), self.warn
            ):
                intents.resolve_in_background(self.master)
            raise
        self.tx.add(inst)
        if record is not None:
            intents.drop_after_commit(self.master, record, inst.uuid)
        return [self.pnode.name]

    async def _create(self, inst: Instance) -> None:
        """Disks, OS installation, start: what the intent record covers."""
        if inst.disks:
            self.feedback("* creating instance disks...")
        for disk in inst.disks:
            if disk.path is not None:
                await self._node_call(
                    "blockdev_create",
                    [disk.path, disk.size],
                    "Could not create a disk for instance",
                )
        # Said in Ganeti's order; the config is committed when the unit succeeds.
        self.feedback(f"adding instance {inst.name} to cluster config")
        # As Ganeti, diskless instances get no OS installation.
        if not self.op.no_install and self.op.os_type and inst.disks:
            self.feedback("* running the instance OS create scripts...")
            await self._node_call(
                "instance_os_add",
                [
                    U.instance_descriptor(self.cfg, inst),
                    self.osparams,
                    False,
                    self.op.debug_level or 0,
                    self.hidden_osparams,
                ],
                "Could not add os for instance",
            )
        if self.op.start:
            self.feedback("* starting instance...")
            await self._node_call(
                "instance_start",
                [U.instance_descriptor(self.cfg, inst), False],
                "Could not start instance",
            )

    async def _node_call(self, name: str, args: list[Any], what: str) -> Any:
        res = await self.master.rpc.call_one(self.pnode.uuid, self.pnode.primary_ip, name, args)
        res.raise_if_failed(f"{what} {self.instance.name} on node {self.pnode.name}")
        return res.payload
