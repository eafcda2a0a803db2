"""Removing and renaming instances."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib import installer
from corral.cmdlib.instance_base import InstanceLU
from corral.cmdlib.instance_create import check_hostname_syntax, ip_in_use, resolve_name
from corral.objects import ADMIN_UP, Disk, Instance, Node
from corral.opcodes import instance as opi
from corral.rpc.calls_instance import instance_rename, instance_shutdown
from corral.rpc.calls_storage import blockdev_remove, blockdev_rename
from corral.rpc.declare import Request
from corral.rpc.result import NodeCallError
from corral.storage import templates


class LUInstanceRemove(InstanceLU):
    OPCODE = opi.OpInstanceRemove
    HPATH = "instance-remove"

    def build_hooks_env(self) -> dict[str, Any]:
        return {**super().build_hooks_env(), "SHUTDOWN_TIMEOUT": self.op.shutdown_timeout}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = self.master_node.uuid
        return [master], [master, *self.instance.all_nodes]

    async def _try(self, request: Request[None], what: str, node: Node | None = None) -> None:
        node = node or self.pnode
        try:
            await self.master.rpc.run(
                node, request, f"{what} {self.instance.name} on node {node.name}"
            )
        except NodeCallError as err:
            if not self.op.ignore_failures:
                raise
            self.warn(err.message)

    async def exec(self) -> Any:
        inst = self.instance
        await self._try(
            instance_shutdown(inst.hypervisor, inst.name, self.op.shutdown_timeout),
            "Could not shutdown instance",
        )
        for disk in inst.disks:
            for node in disk.holders(inst.primary_node):  # a mirrored disk's copies too
                await self._try(
                    blockdev_remove(disk.description().to_wire()),
                    "Could not remove a disk of",
                    self.cfg.lookup(Node, node),
                )
        self.tx.remove(inst)
        return None


class LUInstanceRename(InstanceLU):
    """Renames the instance, its disk directory, and runs the OS rename script.

    A rename to the instance's own name is accepted, as Ganeti's (its burnin
    does one): the checks run and the OS rename script runs, nothing moves."""

    OPCODE = opi.OpInstanceRename
    HPATH = "instance-rename"

    def check_arguments(self) -> None:
        check_hostname_syntax(self.op.new_name, "new instance name")
        if self.op.ip_check and not self.op.name_check:
            raise errors.OpPrereqError(
                "Cannot do IP address check without a name check", C.ECODE_INVAL
            )

    def declare_locks(self) -> None:
        super().declare_locks()
        names = [self.instance.name, self.op.new_name]
        self.needed_locks[C.LEVEL_INSTANCE] = list(dict.fromkeys(names))

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst, new = self.instance, self.op.new_name
        if new != inst.name and self.cfg.find(Instance, new) is not None:
            raise errors.OpPrereqError(
                f"Instance '{new}' is already in the cluster", C.ECODE_EXISTS
            )
        if inst.admin_state == ADMIN_UP or await self.is_running():
            raise errors.OpPrereqError(
                f"Instance '{inst.name}' is running; shut it down before renaming it", C.ECODE_STATE
            )
        if self.op.name_check:
            address = await resolve_name(new)
            if self.op.ip_check and await ip_in_use(address):
                raise errors.OpPrereqError(
                    f"IP {address} of instance {new} is already in use", C.ECODE_NOTUNIQUE
                )

    def build_hooks_env(self) -> dict[str, Any]:
        return {**super().build_hooks_env(), "INSTANCE_NEW_NAME": self.op.new_name}

    async def exec(self) -> Any:
        old = self.instance
        if self.op.new_name != old.name:
            await self._rename()
        await installer.run_rename(
            self, installer.existing(self, self.instance, self.pnode), old.name
        )
        return self.instance.name

    async def _rename(self) -> None:
        """The new name in the hypervisor, the disks' paths and the config."""
        old = self.instance
        inst = self.updated()
        inst.name = self.op.new_name
        # The hypervisor first: it only checks the stopped instance, so a
        # failure there, or of the node, leaves the disks where the config says.
        await self.node_call(
            instance_rename(inst.hypervisor, old.name, inst.name), "Could not rename"
        )
        renames = _disk_renames(inst, inst.name)
        if renames:
            await self.node_call(
                blockdev_rename(
                    [(disk.description().to_wire(), new_id) for disk, new_id in renames]
                ),
                "Could not rename the disks of",
            )
        for disk, new_id in renames:
            disk.logical_id = new_id
        self.tx.update(inst)
        self.instance = inst


def _disk_renames(inst: Instance, new_name: str) -> list[tuple[Disk, list[str]]]:
    """The disks whose path names the instance (file-based templates, as
    Ganeti's DTS_INSTANCE_DEPENDENT_PATH), each with its logical_id once the
    instance is called ``new_name``: the same file in ``<dir>/<new_name>/``."""
    out = []
    for disk in inst.disks:
        template = templates.DISK_TEMPLATES.get(disk.dev_type)
        new_id = None if template is None else template.renamed(disk, new_name)
        if new_id is not None:
            out.append((disk, new_id))
    return out
