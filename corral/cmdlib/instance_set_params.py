"""Changing an instance: parameters, OS, disks and NICs (``gnt-instance modify``)."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.cmdlib import communication, instance_disks, os_media
from corral.cmdlib import disk_attach as DA
from corral.cmdlib import disk_conversion as conversion
from corral.cmdlib import instance_utils as U
from corral.cmdlib.instance_base import InstanceLU
from corral.cmdlib.instance_create import parse_disks
from corral.cmdlib.instance_nics import NicEditor
from corral.cmdlib.ipolicy_checks import check_changed_instance, check_grown_disk
from corral.objects import DetachedDisk, Disk, Instance, Node
from corral.opcodes import instance as opi
from corral.osdef import guest_settings, media
from corral.osdef.definition import split_name
from corral.rpc.calls_storage import blockdev_create, blockdev_grow, blockdev_remove
from corral.rpc.wire import DiskWire
from corral.services.params import filled_hvparams
from corral.storage import templates
from corral.storage.strategy import DiskTemplate, Ledger, Mirroring

ADD, REMOVE, MODIFY = "add", "remove", "modify"
ATTACH, DETACH = "attach", "detach"
# The actions that name no existing item by an identifier (legacy form: no index).
_ADDING = (ADD, ATTACH, REMOVE, DETACH)


Identifier = int | str  # an index, or a device's name or uuid
Mod = tuple[str, Identifier, dict[str, Any]]


def normalize_mods(
    mods: list[list[Any]], what: str
) -> list[tuple[str, Identifier, dict[str, Any]]]:
    """``[op, identifier, params]`` (or legacy ``[op_or_identifier, params]``)
    entries, checked; an identifier is an index, else a name or uuid (Ganeti's)."""
    out = []
    for mod in mods:
        if len(mod) == 3:
            action, identifier, params = mod
        elif len(mod) == 2:
            first, params = mod
            if first in _ADDING:
                action, identifier = first, -1
            else:
                action, identifier = MODIFY, first
        else:
            raise errors.OpPrereqError(f"Invalid {what} modification {mod!r}", C.ECODE_INVAL)
        if action not in (*_ADDING, MODIFY):
            raise errors.OpPrereqError(f"Invalid {what} operation '{action}'", C.ECODE_INVAL)
        if action in (ATTACH, DETACH) and what == "NIC":
            raise errors.OpPrereqError(
                f"{action.capitalize()} operation is not supported for NICs", C.ECODE_INVAL
            )
        if not isinstance(params, dict):
            raise errors.OpPrereqError(f"Invalid {what} parameters {params!r}", C.ECODE_INVAL)
        if action in (REMOVE, DETACH) and params:
            raise errors.OpPrereqError(
                f"No settings should be passed when removing or detaching a {what}",
                C.ECODE_INVAL,
            )
        out.append((action, _identifier(identifier, what), params))
    return out


def _identifier(value: Any, what: str) -> Identifier:
    """An index if ``value`` reads as one, else the name or uuid it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value:
        try:
            return int(value)
        except ValueError:
            return value
    raise errors.OpPrereqError(f"Invalid {what} index {value!r}", C.ECODE_INVAL)


def _item(items: list[Any], identifier: Identifier, what: str) -> int:
    """The index of the item an identifier names (Ganeti's GetItemFromContainer)."""
    if isinstance(identifier, str):
        for index, item in enumerate(items):
            if identifier in (item.uuid, item.name):
                return index
        raise errors.OpPrereqError(
            f"Cannot find {what} with identifier {identifier}", C.ECODE_NOENT
        )
    real = identifier if identifier >= 0 else len(items) + identifier
    if not 0 <= real < len(items):
        raise errors.OpPrereqError(
            f"Invalid {what} index {identifier}: the instance has {len(items)} {what}(s)",
            C.ECODE_INVAL,
        )
    return real


def _position(items: list[Any], action: str, identifier: Identifier, what: str) -> int:
    """Where a modification applies: the index an added item gets (it is
    appended), else the index of the item named."""
    if action != ADD:
        return _item(items, identifier, what)
    if isinstance(identifier, str):
        raise errors.OpPrereqError("Only positive integer or -1 is accepted", C.ECODE_INVAL)
    return len(items)


class LUInstanceSetParams(InstanceLU):
    OPCODE = opi.OpInstanceSetParams
    HPATH = "instance-modify"
    NEEDS_NODE_RES = True

    def check_arguments(self) -> None:
        op = self.op
        self.disk_mods = normalize_mods(op.disks, "disk")
        self.nic_mods = normalize_mods(op.nics, "NIC")
        self.beparams = P.check_beparams(op.beparams, allow_none=True)
        if not (
            op.disks
            or op.nics
            or op.beparams
            or op.hvparams
            or op.os_name
            or op.osparams
            or op.osparams_private is not None
            or op.offline is not None
            or op.runtime_mem is not None
            or op.disk_template
            or op.pnode
            or op.instance_communication is not None
        ):
            raise errors.OpPrereqError("No changes submitted", C.ECODE_INVAL)
        if op.disk_template:
            conversion.check_arguments(self)

    def expand_names(self) -> None:
        super().expand_names()
        self.new_pnode = None if self.op.pnode is None else self.expand(Node, self.op.pnode)
        if self.new_pnode is not None:
            self.op.pnode, self.op.pnode_uuid = self.new_pnode.name, self.new_pnode.uuid
        self.new_snode = conversion.expand_secondary(self)

    def node_locks(self) -> list[str]:
        new = [node.uuid for node in (self.new_pnode, self.new_snode) if node is not None]
        return [*super().node_locks(), *new]

    async def check_prereq(self) -> None:
        await super().check_prereq()
        self.new = self.updated()
        self.changes: list[list[Any]] = []
        self.new_disks: list[Disk] = []
        self.removed_disks: list[Disk] = []
        # Detach and attach: the disks out, the rows of those in, the files moved.
        self.detached_disks: list[Disk] = []
        self.attached_rows: list[DetachedDisk] = []
        self.disk_moves: list[DA.Move] = []
        # The disks a template conversion switches the instance to.
        self.converted: list[Disk] = []
        if self.op.disk_template:
            await conversion.check_prereq(self)
            self.changes.append(["disk_template", self.op.disk_template])
        self._apply_params()
        await self._apply_os()
        self.running = await self.is_running()
        self._check_hotplug()
        self._communication_nic()
        self._apply_nics()
        self._apply_primary()
        self._apply_disks()
        added = [d.size for d in self.new_disks]
        check_changed_instance(self, self.instance, self.new, added, self.op.ignore_ipolicy)
        if self.new_disks:
            size = sum(d.size for d in self.new_disks)
            await U.check_node_resources(
                self, self.pnode, self.new.hypervisor, 0, size, disk_template=self.new.disk_template
            )
        if self.op.hvparams:
            await U.check_hvparams_on_nodes(
                self, [self.pnode], self.new.hypervisor, self.new.hvparams
            )

    def _check_hotplug(self) -> None:
        """Ganeti's _CheckHotplug, where no hypervisor hotplugs (Ganeti's fake
        does not, Corral's kvm not yet): refused if asked for, skipped with a
        warning if asked for where possible."""
        op = self.op
        if not (op.hotplug or op.hotplug_if_possible):
            return
        problem = "Hotplug is not supported: Hotplug is not supported by this hypervisor"
        if op.hotplug:
            raise errors.OpPrereqError(f"Hotplug is not possible: {problem}", C.ECODE_STATE)
        self.warn(problem)
        self.log_info("Modification will take place without hotplugging.")

    def _apply_primary(self) -> None:
        """Ganeti's --new-primary: the configuration's change alone (the
        operator moved the disks); refused while the instance runs, unless forced."""
        node = self.new_pnode
        if node is None or node.uuid == self.instance.primary_node:
            return
        if self.running and not self.op.force:
            raise errors.OpPrereqError(
                f"Instance is still running on {self.pnode.name}", C.ECODE_STATE
            )
        template = templates.get(self.new.disk_template)
        if template.mirroring is Mirroring.INTERNAL:
            # Ganeti does not check; a node without the copy would lose the disks.
            raise errors.OpPrereqError(
                f"The disks of a {template.name} instance are kept on its nodes; change its"
                " primary node with 'gnt-instance failover' or 'migrate'",
                C.ECODE_INVAL,
            )
        templates.set_primary(self.new, node.uuid)

    def _apply_params(self) -> None:
        op, new = self.op, self.new
        if op.beparams:
            new.beparams = P.apply_changes(new.beparams, self.beparams)
            self.changes += [[f"be/{k}", v] for k, v in self.beparams.items()]
        if op.hvparams:
            hv = P.check_hvparams(new.hypervisor, op.hvparams, allow_none=True)
            new.hvparams = P.apply_changes(new.hvparams, hv)
            P.check_filled_hvparams(new.hypervisor, filled_hvparams(self.cfg.cluster, new))
            self.changes += [[f"hv/{k}", v] for k, v in hv.items()]
        if op.offline is not None:
            # Ganeti's rule: either way only an instance that is not running.
            if self.instance.admin_state == "up":
                change = (
                    "can't change to offline without being down first"
                    if op.offline
                    else "can't change to online (down) without being offline first"
                )
                raise errors.OpPrereqError(
                    f"Instance '{self.instance.name}' is marked to be up, {change};"
                    " shut it down first",
                    C.ECODE_STATE,
                )
            new.admin_state = "offline" if op.offline else "down"
            self.changes.append(["admin_state", new.admin_state])

    async def _apply_os(self) -> None:
        op, new = self.op, self.new
        if op.os_name:
            base, _ = split_name(op.os_name)
            if base in self.cfg.cluster.blacklisted_os:
                raise errors.OpPrereqError(
                    f"Guest OS '{base}' is not allowed for installation (it is blacklisted)",
                    C.ECODE_STATE,
                )
            new.os = op.os_name
            self.changes.append(["os", op.os_name])
        if op.osparams:
            new.osparams = P.apply_changes(new.osparams, op.osparams)
            self.changes += [[f"os/{k}", v] for k, v in op.osparams.items()]
        if op.osparams_private is not None:
            new.osparams_private = P.apply_changes(new.osparams_private, op.osparams_private)
            self.changes += [[f"os_private/{k}", C.REDACTED] for k in op.osparams_private]
        if not (op.os_name or op.osparams or op.osparams_private):
            return
        # Only checked as written: a reinstall fetches them (the URL may not answer yet).
        os_media.image_of(new.osparams)
        media.check_package(new.osparams, new.osparams_private, {})
        guest_settings.check(new.osparams, new.osparams_private, {})
        if not new.os:
            # An instance of an image only may hold Corral's own parameters.
            if not media.declared_elsewhere([*new.osparams, *new.osparams_private]):
                return
            raise errors.OpPrereqError(
                "The instance has no OS; give one with --os-type", C.ECODE_INVAL
            )
        info = await U.node_os_info(self, self.pnode, new.os)
        if op.os_name:
            U.check_variant(new.os, info, op.force_variant)
        U.check_params_declared(new.os, info, [*new.osparams, *new.osparams_private])
        spec = U.job_os_spec(self, new.os, new.osparams, new.osparams_private)
        if op.osparams or op.osparams_private:
            await U.verify_osparams(self, [self.pnode], spec)

    def _communication_nic(self) -> None:
        """Ganeti's _PrepareNicCommunication: ``-c`` adds or removes the NIC."""
        if self.op.instance_communication is None:
            return
        change = communication.nic_change(self.cfg, self.op.instance_communication, self.instance)
        if change is not None:
            self.nic_mods += normalize_mods([change], "NIC")

    def _apply_nics(self) -> None:
        nics = self.new.nics
        editor = NicEditor(self, self.new.name, self.new.primary_node)
        for action, identifier, params in self.nic_mods:
            index = _position(nics, action, identifier, "NIC")
            if action == REMOVE:
                removed = nics.pop(index)
                editor.changes.append([f"nic.{index}", "remove"])
                # Its address goes back to its network's pool with it.
                editor.taken.discard(removed.mac)
            elif action == ADD:
                nics.append(editor.add(index, params))
            else:
                editor.modify(index, nics[index], params)
            self.changes += editor.changes
            editor.changes.clear()
        U.check_device_names("NIC", nics)

    def _apply_disks(self) -> None:
        new = self.new
        template = templates.get(new.disk_template)
        ledger = U.ledger(self, new.name)
        for action, identifier, params in self.disk_mods:
            if action == ATTACH:
                index = DA.attach_index(identifier, len(new.disks))
                disk = DA.attach(self, index, params)
                self.changes.append([f"disk/{index}", f"attach:size={disk.size},mode={disk.mode}"])
                continue
            index = _position(new.disks, action, identifier, "disk")
            if not template.has_disks and action in (ADD, REMOVE):
                raise errors.OpPrereqError(
                    "Disks cannot be added to or removed from a diskless instance", C.ECODE_STATE
                )
            if action in (REMOVE, DETACH):
                self._take_out_disk(index, action)
            elif action == ADD:
                self._add_disk(template, params, ledger)
            else:
                self._modify_disk(index, params)
        for idx, disk in enumerate(new.disks):
            disk.iv_name = f"disk/{idx}"
        U.check_device_names("disk", new.disks)

    def _take_out_disk(self, index: int, action: str) -> None:
        """Remove disk ``index`` (its data goes) or detach it (its data stays)."""
        if self.running:
            # Ganeti's words for a removal; it lets a detach through, which
            # would pull a disk from under a running guest.
            what = "remove volume from" if action == REMOVE else "detach a disk from"
            raise errors.OpPrereqError(
                f"Instance {self.instance.name} is running, can't {what} a running instance"
                " without using hotplug",
                C.ECODE_STATE,
            )
        if action == DETACH:
            DA.detach(self, index)
        else:
            self.removed_disks.append(self.new.disks.pop(index))
        self.changes.append([f"disk/{index}", action])

    def _add_disk(self, template: DiskTemplate, params: dict[str, Any], ledger: Ledger) -> None:
        new = self.new
        if template.adopts:
            raise errors.OpPrereqError(
                f"Disks cannot be added to a {template.name} instance: its disks are"
                " adopted when the instance is created",
                C.ECODE_INVAL,
            )
        exclusive = U.exclusive_storage(self.cfg, new.all_nodes)
        U.check_spindles([params], exclusive, required=True)
        (spec,) = parse_disks([params], new.disk_template)
        idx = len(new.disks)
        where = templates.Placement(
            new.name, new.primary_node, self.cfg.cluster, tuple(new.secondary_nodes)
        )
        disk = template.new_disk(where, idx, spec, ledger)
        new.disks.append(disk)
        self.new_disks.append(disk)
        self.changes.append([f"disk/{idx}", f"add:size={disk.size},mode={disk.mode}"])

    def _modify_disk(self, index: int, params: dict[str, Any]) -> None:
        disk = self.new.disks[index]
        if "size" in params:
            raise errors.OpPrereqError(
                "Disk size changes go through 'gnt-instance grow-disk'", C.ECODE_INVAL
            )
        if "mode" in params:
            if params["mode"] not in ("rw", "ro"):
                raise errors.OpPrereqError(f"Invalid disk mode '{params['mode']}'", C.ECODE_INVAL)
            disk.mode = params["mode"]
            self.changes.append([f"disk.mode/{index}", disk.mode])
        if "name" in params:
            disk.name = params["name"] or None
            self.changes.append([f"disk.name/{index}", disk.name])

    def build_hooks_env(self) -> dict[str, Any]:
        env = U.instance_hook_env(self.cfg, getattr(self, "new", self.instance))
        if self.op.runtime_mem is not None:
            env["RUNTIME_MEMORY"] = self.op.runtime_mem
        if self.op.disk_template:
            env["NEW_DISK_TEMPLATE"] = self.op.disk_template
        return env

    async def exec(self) -> Any:
        created: list[DiskWire] = []
        try:
            for disk in self.new_disks:
                description = disk.description().to_wire()
                await self.node_call(
                    blockdev_create(description), "Could not create a disk for instance"
                )
                created.append(description)
        except BaseException:
            pnode = self.pnode
            for description in created:
                what = f"Failed to remove newly-created disk {description['iv_name']}"
                await self.master.rpc.attempt(
                    pnode, blockdev_remove(description), self.warn, f"{what} on node {pnode.name}"
                )
            raise
        for disk in self.removed_disks:
            await self.master.rpc.attempt(
                self.pnode,
                blockdev_remove(disk.description().to_wire()),
                self.warn,
                f"Could not remove disk {disk.iv_name}",
            )
        await DA.move_files(self)
        DA.stage(self)
        if self.converted:
            await conversion.convert(self, self.new)
        self.tx.update(self.new)
        self.instance = self.new
        return self.changes


class LUInstanceGrowDisk(InstanceLU):
    OPCODE = opi.OpInstanceGrowDisk
    HPATH = "disk-grow"
    NEEDS_NODE_RES = True

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst = self.instance
        template = templates.get(inst.disk_template)
        if not template.growable:
            raise errors.OpPrereqError(
                f"Disks of the {inst.disk_template} template cannot grow", C.ECODE_STATE
            )
        if not template.grows_running and await self.is_running():
            raise errors.OpPrereqError(
                f"Instance {inst.name} is running: the disks of a running {inst.disk_template}"
                " instance cannot grow yet; stop it first",
                C.ECODE_STATE,
            )
        self.index = _item(inst.disks, self.op.disk, "disk")
        current = inst.disks[self.index].size
        self.new_size = self.op.amount if self.op.absolute else current + self.op.amount
        if self.new_size < current:
            raise errors.OpPrereqError(
                f"Disk {self.index} cannot shrink from {current} to {self.new_size} MiB",
                C.ECODE_INVAL,
            )
        for uuid in inst.disks[self.index].nodes or [inst.primary_node]:
            await U.check_node_resources(
                self,
                self.cfg.lookup(Node, uuid),
                inst.hypervisor,
                0,
                self.new_size - current,
                disk_template=inst.disk_template,
            )
        check_grown_disk(self, inst, self.index, self.new_size, self.op.ignore_ipolicy)

    def build_hooks_env(self) -> dict[str, Any]:
        return {
            **super().build_hooks_env(),
            "DISK": self.op.disk,
            "AMOUNT": self.op.amount,
            "ABSOLUTE": self.op.absolute,
        }

    async def exec(self) -> Any:
        inst: Instance = self.updated()
        disk = inst.disks[self.index]
        wire = U.disk_wire(self.cfg, disk)
        if disk.nodes[1:]:
            # The secondaries' exports hold the old size: they end, and come
            # back at the new one.
            await instance_disks.shutdown_disks(self, inst)
        await self.node_call(blockdev_grow(wire, self.new_size), "Could not grow a disk of")
        for uuid in disk.nodes[1:]:
            # A secondary copy that cannot grow now is behind: it grows, and is
            # filled whole, when its disks are next activated.
            node = self.cfg.lookup(Node, uuid)
            result = await self.master.rpc.result(node, blockdev_grow(wire, self.new_size))
            if result.failed and uuid not in disk.outdated:
                self.warn(
                    f"Could not grow the copy of disk {self.index} on node {node.name}:"
                    f" {result.fail_msg}; it is outdated until gnt-instance activate-disks"
                    " resyncs it"
                )
                disk.outdated = [*disk.outdated, uuid]
                disk.generation += 1
        disk.size = self.new_size
        for child in disk.children:
            child.size = self.new_size
        self.tx.update(inst)
        if disk.nodes[1:] and inst.disks_active:
            await instance_disks.link_copies(self, inst)
        return None
