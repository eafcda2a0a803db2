"""Creating an instance: disks, OS installation, start — all or nothing."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, TypeVar

from corral import capabilities, errors, hypervisors
from corral import constants as C
from corral import params as P
from corral.cmdlib import communication, helper_vm, installer, instance_disks, intents, os_media
from corral.cmdlib import instance_import as imp
from corral.cmdlib import instance_placement as placement
from corral.cmdlib import instance_utils as U
from corral.cmdlib.backup_common import check_compression_tool
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.instance_nics import (
    AddressClaims,
    check_conflicting_ip,
    check_new_nic,
    connection,
    lookup_network,
    mac_prefix,
    parse_nic,
)
from corral.cmdlib.ipolicy_checks import check_new_instance
from corral.cmdlib.tags import check_tag
from corral.objects import NIC, Disk, Instance, Network, Node
from corral.opcodes import instance as opi
from corral.osdef import guest_settings, install_settings, media
from corral.osdef.definition import split_name
from corral.osdef.spec import OsSpec
from corral.rpc.calls_instance import instance_start
from corral.rpc.calls_storage import blockdev_create, blockdev_getdimensions
from corral.rpc.declare import Request
from corral.services.params import filled_beparams
from corral.storage import ports, templates
from corral.storage_names import ADOPTABLE_BLOCKDEV_ROOT

R = TypeVar("R")

DISK_MODES = ("rw", "ro")
MIB = 1024 * 1024


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


async def ip_in_use(address: str, port: int = 22) -> bool:
    """Whether something answers at ``address`` (TCP ``port``, refused counts)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), 1.0)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


def parse_disks(specs: list[dict[str, Any]], template_name: str) -> list[dict[str, Any]]:
    """Checked disk specifications: size in MiB (0 for adopted disks: read from
    the device later), mode, name, and ``adopt`` for templates that adopt."""
    template = templates.get(template_name)
    if not template.has_disks:
        if specs:
            raise errors.OpPrereqError("Disks given for the diskless template", C.ECODE_INVAL)
        return []
    if not specs:
        raise errors.OpPrereqError(
            f"The {template_name} template needs at least one disk (--disk or -s)", C.ECODE_INVAL
        )
    _check_adoption(specs, template)
    out = []
    for idx, spec in enumerate(specs):
        if not isinstance(spec, dict) or not ("size" in spec or "adopt" in spec):
            raise errors.OpPrereqError(f"Disk {idx} has no size", C.ECODE_INVAL)
        unknown = set(spec) - {"size", "mode", "name", "vg", "metavg", "spindles", "access"}
        unknown -= {"adopt"} if template.adopts else set()
        if unknown:
            raise errors.OpPrereqError(
                f"Disk {idx}: unknown parameter(s) {', '.join(sorted(unknown))}", C.ECODE_INVAL
            )
        size = 0 if template.adopts else P.parse_size(spec["size"], f"size of disk {idx}")
        if size <= 0 and not template.adopts:
            raise errors.OpPrereqError(f"Disk {idx}: size must be positive", C.ECODE_INVAL)
        mode = spec.get("mode", "rw")
        if mode not in DISK_MODES:
            raise errors.OpPrereqError(
                f"Disk {idx}: invalid mode '{mode}' (rw or ro)", C.ECODE_INVAL
            )
        disk = {"size": size, "mode": mode, "name": spec.get("name") or None}
        if template.adopts:
            disk["adopt"] = os.path.normpath(spec["adopt"])
        out.append(disk)
    return out


def _check_adoption(specs: list[dict[str, Any]], template: templates.DiskTemplate) -> None:
    """Ganeti's rules: all disks adopted or none, only where the template adopts
    (and there always), distinct devices below /dev/disk/."""
    adopted = [spec.get("adopt") for spec in specs if isinstance(spec, dict) and "adopt" in spec]
    if adopted and len(adopted) != len(specs):
        raise errors.OpPrereqError("Either all disks are adopted or none is", C.ECODE_INVAL)
    if adopted and not template.adopts:
        raise errors.OpPrereqError(
            f"Disk adoption is not supported for the '{template.name}' disk template",
            C.ECODE_INVAL,
        )
    if not adopted and template.adopts:
        raise errors.OpPrereqError(
            f"Disk template {template.name} requires disk adoption, but no 'adopt' parameter given",
            C.ECODE_INVAL,
        )
    devices = [os.path.normpath(name) for name in adopted if isinstance(name, str)]
    if len(devices) != len(adopted) or not all(name.startswith("/") for name in devices):
        raise errors.OpPrereqError(
            f"Invalid device(s) to adopt: {adopted!r}; give absolute paths", C.ECODE_INVAL
        )
    if len(set(devices)) != len(devices):
        raise errors.OpPrereqError("Duplicate disk names given for adoption", C.ECODE_INVAL)
    outside = [name for name in devices if not name.startswith(ADOPTABLE_BLOCKDEV_ROOT)]
    if outside:
        raise errors.OpPrereqError(
            f"Device node(s) {', '.join(outside)} lie outside {ADOPTABLE_BLOCKDEV_ROOT} and"
            " cannot be adopted",
            C.ECODE_INVAL,
        )


class LUInstanceCreate(LogicalUnit[opi.OpInstanceCreate]):
    """``gnt-instance add``: the instance exists fully or not at all."""

    OPCODE = opi.OpInstanceCreate
    HPATH = "instance-add"
    HTYPE = C.HTYPE_INSTANCE
    REQ_BGL = False

    def check_arguments(self) -> None:
        op = self.op
        check_hostname_syntax(op.instance_name)
        if op.ip_check and not op.name_check:
            raise errors.OpPrereqError(
                "Cannot do IP address check without a name check", C.ECODE_INVAL
            )
        check_compression_tool(op.compress)
        # What the OS scripts get (set by _check_os when there is an OS).
        self.os_spec: OsSpec | None = None
        self.import_source: imp.LocalSource | None = None
        self.remote_source: imp.RemoteSource | None = None
        self.src_node: Node | None = None
        self.image: str | None = None
        self.package: media.PackageSource | None = None
        self.helper: helper_vm.HelperVM | None = None
        if op.mode == imp.MODE_IMPORT:
            # The rest waits for the export's values (before_locks).
            imp.check_import_arguments(self)
            return
        if op.mode == imp.MODE_REMOTE_IMPORT:
            self.remote_source = imp.check_remote_arguments(self)
        self._check_arguments()

    def _check_media(self) -> None:
        """The OS image and personalization package a new install asks for
        (design-os); Ganeti's rule: an OS or an image, unless --no-install."""
        op = self.op
        self.image = os_media.image_of(op.osparams)
        self.package = media.check_package(
            op.osparams, op.osparams_private or {}, op.osparams_secret or {}
        )
        guest_settings.check(op.osparams, op.osparams_private or {}, op.osparams_secret or {})
        install_settings.check(op.osparams, op.osparams_private or {}, op.osparams_secret or {})
        if not op.os_type and self.image is None and not op.no_install:
            raise errors.OpPrereqError(
                "No guest OS or OS image specified; give one with -o or"
                f" --os-parameters {media.OS_IMAGE}=PATH|URL (or --no-install)",
                C.ECODE_INVAL,
            )
        scripts = bool(op.os_type) and not op.no_install
        if self.package is not None and self.image is None and not scripts:
            raise errors.OpPrereqError(
                "A personalization package is unpacked over an installed OS: give an OS"
                f" (-o) or an OS image ({media.OS_IMAGE}) with it",
                C.ECODE_INVAL,
            )

    def _check_arguments(self) -> None:
        op = self.op
        if op.mode == "create":
            self._check_media()
        # As Ganeti: without a template, the cluster's first enabled one.
        self.disk_template = op.disk_template or self.cfg.cluster.enabled_disk_templates[0]
        # Even when an old configuration enables it, a template Corral lacks creates nothing.
        self.template = templates.check_implemented(self.disk_template)
        U.check_device_names("disk", [d for d in op.disks if isinstance(d, dict)])
        self.disk_specs = parse_disks(op.disks, self.disk_template)
        if self.template.adopts and op.iallocator is not None:
            raise errors.OpPrereqError(
                "Disk adoption not allowed with an iallocator script", C.ECODE_INVAL
            )
        if op.instance_communication:
            communication.with_communication_nic(self.cfg, op.instance_name, op.nics)
        U.check_device_names("NIC", [n for n in op.nics if isinstance(n, dict)])
        self.nic_specs = [parse_nic(i, spec) for i, spec in enumerate(op.nics)]
        default_mode = P.fill(P.NIC_DEFAULTS, self.cfg.cluster.nicparams.get("default", {}))["mode"]
        for idx, spec in enumerate(self.nic_specs):
            check_new_nic(idx, spec, default_mode)
        self.nic_networks = [lookup_network(self.cfg, spec["network"]) for spec in self.nic_specs]
        placement.check_arguments(op, self.template)
        self.beparams = P.check_beparams(op.beparams)
        for tag in op.tags:
            check_tag(tag)

    def expand_names(self) -> None:
        if self.op.mode == imp.MODE_IMPORT:
            self.src_node = imp.source_node(self)
            return  # the rest once the export is read
        self._expand_names()

    async def before_locks(self) -> None:
        if self.op.mode == imp.MODE_IMPORT:
            self.import_source = await imp.read_export(self, self.src_node)
            self._check_arguments()
            self._expand_names()

    def _expand_names(self) -> None:
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
        if self.op.identify_defaults:
            imp.revert_to_defaults(self)
        hv_os = cluster.os_hvp.get(self.op.os_type or "", {}).get(self.hypervisor, {})
        hv_cluster = cluster.hvparams.get(self.hypervisor, {})
        P.check_filled_hvparams(self.hypervisor, P.fill(hv_cluster, hv_os, self.hvparams))
        # self_install's parameters (install-hv-*) over the instance's own.
        self.install_hvparams = U.install_hvparams(self.hypervisor, self.op.osparams)
        P.check_filled_hvparams(
            self.hypervisor, P.fill(hv_cluster, hv_os, self.hvparams, self.install_hvparams)
        )
        # Without a primary node, an allocator chooses one (check_prereq).
        self.allocator = placement.allocator_name(self)
        placement.check_opportunistic(self.op, self.allocator)
        self.snodes: list[Node] = []
        if self.allocator is None:
            self.pnode = self.expand(Node, self.op.pnode_uuid or self.op.pnode or "")
            if self.template.secondaries:
                self.snodes = [self.expand(Node, self.op.snode_uuid or self.op.snode or "")]
        elif self.template.adopts:
            raise errors.OpPrereqError(
                "Disk adoption not allowed with an iallocator script; give the node (-n)",
                C.ECODE_INVAL,
            )

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.op.instance_name]
        # As Ganeti: every node while the allocator chooses (the others are released then).
        nodes: list[str] | str = (
            ALL_SET if self.allocator else [self.pnode.uuid, *(n.uuid for n in self.snodes)]
        )
        self.needed_locks[C.LEVEL_NODE_RES] = nodes
        # An import reads from its source node too (Ganeti locks it).
        source = self.import_source.node.uuid if self.import_source else None
        if isinstance(nodes, list) and source is not None and source not in nodes:
            nodes = [*nodes, source]
        self.needed_locks[C.LEVEL_NODE] = nodes
        self.share_locks[C.LEVEL_NODE] = True
        if self.allocator and self.op.opportunistic_locking:
            self.opportunistic_levels = {C.LEVEL_NODE, C.LEVEL_NODE_RES}

    def declare_level(self, level: str) -> None:
        # As Ganeti: opportunistically, node-res locks of the nodes locked.
        if level == C.LEVEL_NODE_RES and level in self.opportunistic_levels:
            owned = self.master.locks.owned(str(self.ctx.job_id), C.LEVEL_NODE)
            self.needed_locks[level] = sorted(owned)

    def prepare_retry(self) -> bool:
        """Ganeti's PrepareRetry: the allocator found no node among those
        locked opportunistically; the next run locks them all."""
        if not self.op.opportunistic_locking:
            return False
        self.feedback("* falling back to full lock allocation")
        self.op.opportunistic_locking = False
        return True

    async def check_prereq(self) -> None:
        op = self.op
        if self.cfg.find(Instance, op.instance_name) is not None:
            raise errors.OpPrereqError(
                f"Instance '{op.instance_name}' is already in the cluster", C.ECODE_EXISTS
            )
        self.ledger = U.ledger(self, op.instance_name)
        if self.allocator is not None:
            await self._allocate(self.allocator)
        placement.check_primary(self.pnode)
        for snode in self.snodes:
            placement.check_secondary(snode, self.pnode)
        exclusive = U.exclusive_storage(self.cfg, [self.pnode.uuid])
        U.check_spindles([d for d in op.disks if isinstance(d, dict)], exclusive, required=True)
        address = await self._check_name()
        if self.template.adopts:
            await self._read_adopted_sizes()
        self.instance = self._build_instance(address)
        self._check_addresses()
        check_new_instance(self, self.instance, op.ignore_ipolicy)
        if op.os_type:
            await self._check_os()
        await self._check_media_on_node()
        memory = filled_beparams(self.cfg.cluster, self.instance)["maxmem"] if op.start else 0
        # Disks take space on the nodes holding them (none for shared storage);
        # a secondary node needs no memory until the instance fails over.
        for node, needed in ((self.pnode, memory), *((n, 0) for n in self.snodes)):
            await U.check_node_resources(
                self,
                node,
                self.hypervisor,
                needed,
                sum(d.size for d in self.instance.disks if node.uuid in d.nodes),
                f"creating instance {op.instance_name}",
                self.disk_template,
            )
        await U.check_hvparams_on_nodes(self, [self.pnode], self.hypervisor, self.hvparams)

    async def _allocate(self, name: str) -> None:
        request = placement.alloc_request(
            self,
            self.disk_template,
            self.hypervisor,
            self.beparams,
            self.disk_specs,
            self.nic_specs,
        )
        self.pnode, *self.snodes = await placement.choose_nodes(self, name, request)
        placement.release_other_nodes(self, *(n.uuid for n in (self.pnode, *self.snodes)))

    async def _read_adopted_sizes(self) -> None:
        """Each adopted disk's size, read from the device on the primary node
        (which refuses what is not an adoptable block device)."""
        where = self._placement()
        descriptions = [
            self.template.new_disk(where, idx, {**spec, "size": 0}, self.ledger)
            .description()
            .to_wire()
            for idx, spec in enumerate(self.disk_specs)
        ]
        dimensions = await self.master.rpc.run(
            self.pnode,
            blockdev_getdimensions(descriptions),
            f"Cannot adopt the block device(s) on node {self.pnode.name}",
            ecode=C.ECODE_INVAL,
        )
        for spec, (size, _) in zip(self.disk_specs, dimensions, strict=True):
            spec["size"] = size // MIB
            if spec["size"] <= 0:
                raise errors.OpPrereqError(
                    f"Device {spec['adopt']} is smaller than 1 MiB", C.ECODE_INVAL
                )

    def _placement(self) -> templates.Placement:
        return templates.Placement(
            self.op.instance_name,
            self.pnode.uuid,
            self.cfg.cluster,
            tuple(n.uuid for n in self.snodes),
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

    def _build_nics(self, address: str | None) -> list[NIC]:
        """The new NICs: MACs generated, addresses resolved or taken from networks."""
        taken = self.cfg.used_macs()
        claims = AddressClaims(self, self.op.instance_name)
        nics = []
        for idx, (spec, network) in enumerate(zip(self.nic_specs, self.nic_networks, strict=True)):
            mac = spec["mac"]
            if mac in ("auto", "generate"):
                mac = U.generate_mac(mac_prefix(self.cfg, network), taken)
            elif mac in taken:
                # An import keeps the export's MACs unless told otherwise.
                hint = f"; use --net {idx}:mac=generate for a new one" if self.import_source else ""
                raise errors.OpPrereqError(
                    f"MAC address {mac} already in use in cluster{hint}", C.ECODE_NOTUNIQUE
                )
            else:
                taken.add(mac)
            ip = address if spec["ip"] == "auto" else spec["ip"]
            if spec["ip"] == "auto" and address is None:
                raise errors.OpPrereqError(
                    f"NIC {idx}: ip=auto needs the name check", C.ECODE_INVAL
                )
            nic = NIC(mac=mac, ip=ip, name=spec["name"], nicparams=spec["nicparams"])
            if network is not None:
                self._join_network(idx, nic, network, claims)
            nics.append(nic)
        return nics

    def _build_instance(self, address: str | None) -> Instance:
        name = self.op.instance_name
        nics = self._build_nics(address)
        where = self._placement()
        disks = [
            self.template.new_disk(where, idx, {**d, "driver": self.op.file_driver}, self.ledger)
            for idx, d in enumerate(self.disk_specs)
        ]
        return Instance(
            name=name,
            primary_node=self.pnode.uuid,
            secondary_nodes=[n.uuid for n in self.snodes],
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

    def _join_network(self, idx: int, nic: NIC, network: Network, claims: AddressClaims) -> None:
        """The NIC on ``network``: its connection's parameters, its address."""
        params = connection(self.cfg, network, self.pnode.uuid)
        if params is None:
            raise errors.OpPrereqError(
                f"No netparams found for network {network.name}. Probably not connected to"
                f" node's {self.pnode.name} nodegroup",
                C.ECODE_INVAL,
            )
        self.log_info(f"NIC/{idx} inherits netparams {list(params.values())}")
        nic.network, nic.nicparams = network.uuid, params
        if nic.ip == C.NIC_IP_POOL:
            nic.ip = claims.from_pool(network)
            if nic.ip is None:
                raise errors.OpPrereqError(
                    f"Unable to get a free IP for NIC {idx} from the address pool", C.ECODE_STATE
                )
            self.log_info(f"Chose IP {nic.ip} from network {network.name}")
        elif nic.ip is not None and not claims.take(network, nic.ip, self.op.conflicts_check):
            raise errors.OpPrereqError(
                f"IP address {nic.ip} already in use or does not belong to network {network.name}",
                C.ECODE_NOTUNIQUE,
            )

    def _check_addresses(self) -> None:
        """A NIC on no network takes no network's address, nor (Corral's own
        check) another such NIC's."""
        if not self.op.conflicts_check:
            return
        for idx, nic in enumerate(self.instance.nics):
            if nic.network is not None:
                continue
            check_conflicting_ip(self.cfg, nic.ip, self.pnode.uuid)
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
        scripts = media.without_credentials(secret)
        self.os_spec = U.job_os_spec(self, op.os_type, op.osparams, private, scripts)
        if not op.no_install:
            self._check_helper(bool(info["trusted"]))
        # As Ganeti's CheckOSParams: verify runs for every new instance with an OS
        # (not an untrusted one's: none of its scripts runs on a node).
        if info["api_versions"] and max(info["api_versions"]) >= 20 and info["trusted"]:
            await U.verify_osparams(self, [self.pnode], self.os_spec)

    def _check_helper(self, trusted: bool) -> None:
        """Whether the create script runs in the helper VM (design-os's install
        mode), which reaches metad through the instance's communication NIC."""
        op = self.op
        assert op.os_type
        safe = install_settings.safe_install(op.osparams)
        if not helper_vm.wanted(self, op.os_type, trusted, safe, self.hypervisor):
            return
        if not U.has_communication_nic(self.instance):
            raise errors.OpPrereqError(
                f"Installing OS '{op.os_type}' in the helper VM needs the instance"
                " communication NIC: add the instance with --communication=yes",
                C.ECODE_INVAL,
            )
        self.helper = helper_vm.HelperVM.of(
            self, op.helper_startup_timeout, op.helper_shutdown_timeout
        )

    async def _check_media_on_node(self) -> None:
        """The image and the package, as the primary node fetches them (disk 0
        must hold the image): refused here, nothing is created."""
        disks = self.instance.disks
        if self.image is not None and disks and not self.template.adopts:
            await os_media.check_image(self, self.pnode, self.image, disks[0].size)
        if self.package is not None and disks:
            await os_media.check_package(self, self.pnode, self.package)

    def build_hooks_env(self) -> dict[str, Any]:
        env = U.instance_hook_env(self.cfg, self.instance, status=self.op.start, disk_ids=False)
        env["ADD_MODE"] = self.op.mode
        if self.import_source is not None:
            env.update(imp.hook_env(self.import_source))
        return env

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.master_node.uuid, *self.instance.all_nodes]
        return nodes, nodes

    async def exec(self) -> Any:
        inst = self.instance
        if hypervisors.needs_port(self.hypervisor):
            inst.network_port = ports.allocate_port(self.ledger)
        # What an earlier, interrupted add of this name left behind goes first.
        say = intents.Say.of(self)
        await intents.settle_name(self.master, inst.name, say)
        record = None
        if inst.disks or self.op.start:
            record = await intents.write(self.master, intents.Intent.of(inst))
        try:
            await self._create(inst)
        except BaseException:
            if record is not None:
                await intents.conclude(self.master, record, intents.Intent.of(inst), say)
            raise
        self.tx.add(inst)
        if record is not None:
            intents.drop_after_commit(
                self, record, lambda: self.cfg.get(Instance, inst.uuid) is not None
            )
        return [self.pnode.name]

    async def _create(self, inst: Instance) -> None:
        """Disks, OS installation, start: what the intent record covers."""
        if inst.disks:
            self.feedback("* creating instance disks...")
        # Shared templates' disks too are made once, by the primary node; a
        # mirrored disk on each of its nodes.
        for disk in inst.disks:
            for node in self._holders(disk):
                await self.master.rpc.run(
                    node,
                    blockdev_create(disk.description().to_wire()),
                    f"Could not create a disk for instance {inst.name} on node {node.name}",
                )
        if self.snodes:
            await instance_disks.link_copies(self, inst)
        # Said in Ganeti's order; the config is committed when the unit succeeds.
        self.feedback(f"adding instance {inst.name} to cluster config")
        kind = self._install_kind()
        if kind is not None:
            await installer.install(self, installer.Target(inst, self.pnode, self.os_spec), kind)
        inst.self_install = bool(self.install_hvparams)
        if self.op.start:
            self.feedback("* starting instance...")
            desc = U.first_boot(U.start_descriptor(self.cfg, inst, self.ctx.hide), inst)
            await self._node_call(instance_start(desc, False), "Could not start instance")
            inst.self_install = False  # its first start is done: back to run mode
            inst.disks_active = True  # as a startup's (Ganeti's create records it so too)

    def _install_kind(self) -> installer.InstallKind | None:
        """Where the new disks' data comes from, by the opcode's mode."""
        if self.import_source is not None:
            return installer.FromExport(self.import_source)
        if self.remote_source is not None:
            return installer.FromCluster(self.remote_source)
        # As Ganeti: an image is not written onto adopted disks.
        kind = installer.Fresh(
            None if self.template.adopts else self.image,
            bool(self.op.os_type) and not self.op.no_install,
            self.package,
            helper=self.helper,
        )
        return None if kind.empty else kind

    def _holders(self, disk: Disk) -> list[Node]:
        """The nodes holding ``disk``: its own, or the primary (shared storage)."""
        nodes = {n.uuid: n for n in (self.pnode, *self.snodes)}
        return [nodes[uuid] for uuid in disk.holders(self.pnode.uuid)]

    async def _node_call(self, request: Request[R], what: str) -> R:
        what = f"{what} {self.instance.name} on node {self.pnode.name}"
        return await self.master.rpc.run(self.pnode, request, what)
