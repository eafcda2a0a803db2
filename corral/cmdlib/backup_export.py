"""OP_BACKUP_EXPORT: an instance's disks and configuration exported, to a node
of this cluster (mode local) or to another cluster (mode remote), as
Ganeti's LUBackupExport.

Local: every disk is streamed (through the OS export script, or read raw)
into ``<export dir>/<instance>.new/<disk uuid>`` on the target node, then
``config.ini`` is written there and the directory replaces the instance's
previous export; older exports of the instance on other nodes are removed.
A failed export leaves no ``.new`` directory and the previous export intact,
and the instance running again if the export shut it down; so does an export
that masterd's death interrupted (its record, :mod:`corral.cmdlib.intents`).

Remote: the destination's signed disk infos, certificate and the X509 key
name (made by OP_BACKUP_PREPARE) are checked with the cluster domain secret
before anything is sent; each disk is sent over TLS with that key to the
host and port signed for it; the key is removed afterwards.

Corral's disk templates make no snapshots, so a running instance is shut
down for the export (Ganeti's ``long_sleep``) and started again afterwards.
"""

from __future__ import annotations

import asyncio
from typing import Any

from corral import constants as C
from corral import errors
from corral import impexp_kinds as K
from corral.cmdlib import installer, intents
from corral.cmdlib.backup_common import (
    check_compression_tool,
    check_node_not_drained,
    check_node_online,
)
from corral.cmdlib.base import ALL_SET
from corral.cmdlib.instance_base import InstanceLU
from corral.crypto import rie
from corral.exports import config_ini
from corral.objects import ADMIN_UP, Node
from corral.opcodes import backup as opb
from corral.rpc.calls_impexp import (
    ImpExpOptions,
    export_list,
    export_remove,
    finalize_export,
    x509_cert_remove,
)
from corral.rpc.calls_instance import instance_shutdown, instance_start
from corral.rpc.calls_storage import blockdev_remove
from corral.rpc.result import NodeCallError
from corral.services import impexp


class LUBackupExport(InstanceLU):
    OPCODE = opb.OpBackupExport
    HPATH = "instance-export"

    dst_node: Node | None = None
    # Remote: the checked destination of each disk, its CA and the key's name.
    dest_disk_info: list[tuple[str, int, str]]
    dest_ca_pem: str
    key_name: str

    def check_arguments(self) -> None:
        op = self.op
        if op.mode == C.EXPORT_MODE_REMOTE:
            if not op.x509_key_name:
                raise errors.OpPrereqError("Missing X509 key name for encryption", C.ECODE_INVAL)
            if not op.destination_x509_ca:
                raise errors.OpPrereqError("Missing destination X509 CA", C.ECODE_INVAL)
            if not isinstance(op.target_node, list):
                raise errors.OpPrereqError(
                    "A remote export needs a list of signed destinations, one per disk",
                    C.ECODE_INVAL,
                )
        elif not isinstance(op.target_node, str):
            raise errors.OpPrereqError(
                "A local export needs the name of the target node", C.ECODE_INVAL
            )
        if op.long_sleep and not op.shutdown:
            raise errors.OpPrereqError(
                "The long sleep option only makes sense when the instance can be shut down.",
                C.ECODE_INVAL,
            )

    def expand_names(self) -> None:
        super().expand_names()
        if self.op.mode == C.EXPORT_MODE_LOCAL:
            wanted = self.op.target_node_uuid or self.op.target_node
            node = self.expand(Node, wanted)
            self.op.target_node, self.op.target_node_uuid = node.name, node.uuid
            self.dst_node = node

    def declare_locks(self) -> None:
        super().declare_locks()
        if self.op.mode == C.EXPORT_MODE_LOCAL:
            # Every node, as Ganeti: older exports of the instance may be on any
            # of them.  Shared: the instance's own lock keeps other exports of
            # it out, and OP_BACKUP_REMOVE takes them all exclusively.
            self.needed_locks[C.LEVEL_NODE] = ALL_SET

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst, op = self.instance, self.op
        check_node_online(self.pnode)
        if op.remove_instance and inst.admin_state == ADMIN_UP and not op.shutdown:
            raise errors.OpPrereqError(
                "Can not remove instance without shutting it down before", C.ECODE_STATE
            )
        if op.mode == C.EXPORT_MODE_LOCAL:
            assert self.dst_node is not None
            self.dst_node = self.cfg.lookup(Node, self.dst_node.uuid)
            check_node_online(self.dst_node)
            check_node_not_drained(self.dst_node)
        else:
            self._check_remote_destination()
        self._check_snapshot_alternative()
        check_compression_tool(op.compress)

    def _check_remote_destination(self) -> None:
        """The destination's signed data, checked before anything happens."""
        op, disks = self.op, self.instance.disks
        if len(op.target_node) != len(disks):
            raise errors.OpPrereqError(
                f"Received destination information for {len(op.target_node)} disks, but"
                f" instance {self.instance.name} has {len(disks)} disks",
                C.ECODE_INVAL,
            )
        cds = rie.read_domain_secret(self.master.paths)
        self.key_name = rie.check_key_name(cds, op.x509_key_name)
        self.dest_ca_pem = rie.load_signed_x509_cert(op.destination_x509_ca, cds)
        self.dest_disk_info = [
            rie.check_disk_info(cds, index, info) for index, info in enumerate(op.target_node)
        ]

    def _check_snapshot_alternative(self) -> None:
        """Ganeti exports a running instance from snapshots; Corral's templates
        have none, so (as Ganeti without snapshots) it must be shut down for
        the whole export, which ``long_sleep`` allows.  Checked before the
        instance is touched (Ganeti finds out after shutting it down).  An
        instance without disks has nothing to snapshot: Ganeti exports it
        running, as Corral does."""
        op = self.op
        if op.remove_instance or self.instance.admin_state != ADMIN_UP:
            return
        if not self.instance.disks:
            return
        if not op.shutdown:
            raise errors.OpPrereqError(
                "Not all disks could be snapshotted, and you requested a live export; aborting",
                C.ECODE_STATE,
            )
        if not op.long_sleep:
            raise errors.OpPrereqError(
                "Not all disks could be snapshotted, and you did not allow the instance to"
                " remain offline for a longer time through the --long-sleep option; aborting",
                C.ECODE_STATE,
            )

    def build_hooks_env(self) -> dict[str, Any]:
        op = self.op
        return {
            "EXPORT_MODE": op.mode,
            "EXPORT_NODE": op.target_node,
            "EXPORT_DO_SHUTDOWN": op.shutdown,
            "SHUTDOWN_TIMEOUT": op.shutdown_timeout,
            "REMOVE_INSTANCE": str(bool(op.remove_instance)),
            **super().build_hooks_env(),
        }

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.master_node.uuid, self.instance.primary_node]
        if self.dst_node is not None:
            nodes.append(self.dst_node.uuid)
        return nodes, nodes

    # Execution
    async def exec(self) -> Any:
        await intents.settle_before(self)
        inst, op = self.instance, self.op
        restart = op.shutdown and inst.admin_state == ADMIN_UP and not op.remove_instance
        intent = self._intent(restart)
        record = await intents.write(self.master, intent)
        try:
            if op.shutdown:
                self.feedback(f"Shutting down instance {inst.name}")
                await self.node_call(
                    instance_shutdown(inst.hypervisor, inst.name, op.shutdown_timeout),
                    "Could not shutdown instance",
                )
            if op.mode == C.EXPORT_MODE_LOCAL:
                fin_resu, dresults = await self._local_export()
            else:
                fin_resu, dresults = await self._remote_export()
            _raise_on_failures(fin_resu, dresults)
        except BaseException:
            # Also when the job is cancelled: the partial export goes and the
            # instance runs again, to the end (as after a crash).
            await asyncio.shield(
                intents.conclude(self.master, record, intent, intents.Say.of(self))
            )
            raise
        try:
            if restart:
                await self._start_instance()
        finally:
            intents.drop(self.master, record)
        if op.remove_instance:
            self.feedback(f"Removing instance {inst.name}")
            await self._remove_instance()
        if op.mode == C.EXPORT_MODE_LOCAL:
            await self._remove_older_exports()
        return [fin_resu, dresults]

    def _intent(self, restart: bool) -> intents.Intent:
        """The export's record: what a failure or masterd's death must undo."""
        inst, op = self.instance, self.op
        if op.mode == C.EXPORT_MODE_LOCAL:
            assert self.dst_node is not None
            return intents.Intent.for_instance(
                intents.EXPORT, inst, self.dst_node.uuid, restart=restart, export=inst.name
            )
        return intents.Intent.for_instance(
            intents.EXPORT, inst, inst.primary_node, restart=restart, key=self.key_name
        )

    def _script_descriptor(self) -> dict[str, Any]:
        """The instance as the OS export script needs it (its OS spec too)."""
        return installer.existing(self, self.instance, self.pnode).transfer_descriptor(self)

    def _source(self, index: int) -> tuple[str, dict[str, Any]]:
        """The OS export script when the instance has an OS (the node reads
        the disk raw when the OS has no export script), else the raw disk."""
        return (K.SCRIPT if self.instance.os else K.DISK), {"index": index}

    async def _local_export(self) -> tuple[bool, list[bool]]:
        inst, dst = self.instance, self.dst_node
        assert dst is not None
        desc = self._script_descriptor()
        pairs = []
        for index, disk in enumerate(inst.disks):
            kind, args = self._source(index)
            src_end = impexp.Endpoint(self.pnode, kind, args)
            dst_end = impexp.Endpoint(dst, K.FILE, {"export": inst.name, "dump": disk.uuid})
            pairs.append((src_end, dst_end))
        dresults = await impexp.transfer_within_cluster(self, pairs, desc, desc, self.op.compress)
        fin_resu = all(dresults) and await self._finalize(dst)
        return fin_resu, dresults

    async def _finalize(self, dst: Node) -> bool:
        """config.ini written, the new export put in place of the old one."""
        inst = self.instance
        self.feedback(f"Finalizing export on {dst.name}")
        text = config_ini.dump(
            self.cfg, inst, inst.primary_node, [d.uuid for d in inst.disks], C.IEC_NONE
        )
        what = f"Could not finalize export for instance {inst.name} on node {dst.name}"
        res = await self.master.rpc.attempt(dst, finalize_export(inst.name, text), self.warn, what)
        return not res.failed

    async def _remote_export(self) -> tuple[bool, list[bool]]:
        inst, node = self.instance, self.pnode
        desc = self._script_descriptor()
        ends: list[impexp.Endpoint] = []
        try:
            for index, (host, port, magic) in enumerate(self.dest_disk_info):
                opts: ImpExpOptions = {
                    "key_name": self.key_name,
                    "ca_pem": self.dest_ca_pem,
                    "compress": self.op.compress,
                    "magic": magic,
                    "connect_timeout": C.RIE_CONNECT_TIMEOUT,
                    "bind_address": None,
                    "size": inst.disks[index].size * impexp.MIB,
                }
                self.feedback(f"Sending disk {index} to {host}:{port}")
                kind, args = self._source(index)
                ends.append(
                    await impexp.start_export(
                        self, node, opts, host, port, desc, f"disk/{index}", kind, args
                    )
                )
            dresults = await impexp.follow(
                self,
                ends,
                [end.label for end in ends],
                connect_timeout=C.RIE_CONNECT_TIMEOUT,
                on_update=impexp.RemoteExportReporter(),
            )
        finally:
            await impexp.cleanup(self, ends)
            await asyncio.shield(self._remove_key(node))
        return True, dresults

    async def _remove_key(self, node: Node) -> None:
        what = f"Could not remove X509 key {self.key_name} on node {node.name}"
        await self.master.rpc.attempt(node, x509_cert_remove(self.key_name), self.warn, what)

    async def _start_instance(self) -> None:
        """Start the instance again after the export (Ganeti's StartInstance)."""
        inst, node = self.instance, self.pnode
        self.feedback(f"Starting instance {inst.name}")
        try:
            await self.master.rpc.run(
                node, instance_start(self.start_descriptor(), False), "Could not start instance"
            )
        except NodeCallError as err:
            self.feedback(f"Failed to start instance: {err.fail_msg}")
            raise

    async def _remove_instance(self) -> None:
        """Ganeti's RemoveInstance: the disks, then the configuration entry."""
        inst, node = self.instance, self.pnode
        all_removed = True
        for disk in inst.disks:
            res = await self.master.rpc.attempt(
                node,
                blockdev_remove(disk.description().to_wire()),
                self.warn,
                f"Could not remove disk {disk.iv_name} on node {node.name}, continuing anyway",
            )
            all_removed = all_removed and not res.failed
        if not all_removed:
            if not self.op.ignore_remove_failures:
                raise errors.OpExecError("Can't remove instance's disks")
            self.feedback("Warning: can't remove instance's disks")
        self.tx.remove(inst)

    async def _remove_older_exports(self) -> None:
        """Exports of the instance on other nodes than the target go."""
        assert self.dst_node is not None
        name = self.instance.name
        others = [n for n in self.cfg.nodes() if n.uuid != self.dst_node.uuid and not n.offline]
        if not others:
            return
        self.feedback(f"Removing old exports for instance {name}")
        lists = await self.master.rpc.results(others, export_list())
        for node in others:
            if name not in (lists[node.uuid].value or ()):
                continue
            await self.master.rpc.attempt(
                node,
                export_remove(name),
                self.warn,
                f"Could not remove older export for instance {name} on node {node.name}",
            )


def _raise_on_failures(fin_resu: bool, dresults: list[bool]) -> None:
    """Ganeti's "Export failed, errors in ..." when a disk or the finalization failed."""
    failures = []
    if not fin_resu:
        failures.append("export finalization")
    if not all(dresults):
        failed = ", ".join(str(i) for i, ok in enumerate(dresults) if not ok)
        failures.append(f"disk export: disk(s) {failed}")
    if failures:
        raise errors.OpExecError(f"Export failed, errors in {', '.join(failures)}")
