"""gnt-cluster verify: instances against what the nodes run and store.

From the nodes' node_verify answers: instances running where the config says
and nowhere else (EINSTANCEWRONGNODE, ENODEORPHANINSTANCE, EINSTANCEDOWN),
their disks present and as large as configured (EINSTANCEMISSINGDISK,
EINSTANCEFAULTYDISK), files in the storage directories no instance owns
(ENODEORPHANLV, a warning as Ganeti's unknown volumes), mirrored disks with
an outdated copy (EINSTANCEFAULTYDISK, as Ganeti's degraded DRBD), and
Ganeti's closing notes.  Ganeti's texts (cmdlib/cluster/verify.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.cmdlib import intents
from corral.cmdlib.cluster_verify_nodes import NodeImage, Reporter
from corral.objects import ADMIN_OFFLINE, ADMIN_UP, DetachedDisk, Instance
from corral.rpc import node_verify as NV
from corral.rpc.wire import DiskWire
from corral.services.params import filled_beparams
from corral.storage import reservations, templates

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.objects import Cluster
    from corral.services.durable import DurableState


def _template(inst: Instance) -> templates.DiskTemplate | None:
    return templates.DISK_TEMPLATES.get(inst.disk_template)


def _shared(template: templates.DiskTemplate) -> bool:
    """Whether every node sees the template's disks (its files are listed once)."""
    return template.mirroring is templates.Mirroring.EXTERNAL


def disk_nodes(inst: Instance) -> list[str]:
    """The nodes that must hold the instance's disks: those of each disk's
    tree; a shared disk is checked from the primary node (every node sees it)."""
    if _template(inst) is None:
        return []
    nodes = (node for disk in inst.disks for node in disk.holders(inst.primary_node))
    return list(dict.fromkeys(nodes))


def disks_by_node(instances: list[Instance]) -> dict[str, list[tuple[Instance, int]]]:
    """Node uuid → the (instance, disk index) whose disk it must hold."""
    out: dict[str, list[tuple[Instance, int]]] = {}
    for inst in instances:
        if _template(inst) is None:
            continue
        for idx, disk in enumerate(inst.disks):
            for node in disk.holders(inst.primary_node):
                out.setdefault(node, []).append((inst, idx))
    return out


def disk_args(wanted: list[tuple[Instance, int]]) -> list[DiskWire]:
    """The DISKS check's parameter: the descriptions of these disks."""
    return [inst.disks[idx].description().to_wire() for inst, idx in wanted]


def storage_files_nodes(cluster: Cluster, images: dict[str, NodeImage]) -> dict[str, list[str]]:
    """Node uuid → the file-based templates whose files it lists: a shared
    directory is listed by one node only."""
    listers = sorted(
        (img for img in images.values() if not img.node.offline and img.node.vm_capable),
        key=lambda img: img.node.name,
    )
    out: dict[str, list[str]] = {}
    for name in cluster.enabled_disk_templates:
        template = templates.DISK_TEMPLATES.get(name)
        if template is None or not template.file_based:
            continue
        for img in listers[:1] if _shared(template) else listers:
            out.setdefault(img.node.uuid, []).append(name)
    return out


class InstanceChecks:
    """The instance findings of one group's verification."""

    def __init__(
        self,
        report: Reporter,
        images: dict[str, NodeImage],
        instances: list[Instance],
        node_name: Callable[[str], str],
    ) -> None:
        self.report = report
        self.images = images
        self.instances = instances
        self.node_name = node_name

    def wrong_nodes(self, img: NodeImage, known: dict[str, Instance]) -> None:
        """What a node runs must be its own primary instances."""
        for name in sorted(img.running):
            inst = known.get(name)
            if inst is None:
                text = f"node is running unknown instance {name}"
                self.report("ENODEORPHANINSTANCE", "node", img.node.name, text)
            elif inst.primary_node != img.node.uuid:
                text = f"instance should not run on node {img.node.name}"
                self.report("EINSTANCEWRONGNODE", "instance", name, text)

    def instance(self, inst: Instance, wanted: dict[str, list[tuple[Instance, int]]]) -> None:
        """Ganeti's _VerifyInstance, for what Corral's instances have."""
        pnode = self.images.get(inst.primary_node)
        pname = self.node_name(inst.primary_node)
        if pnode is None:
            text = f"instance lives on ghost node {pname}"
            self.report("EINSTANCEBADNODE", "instance", inst.name, text)
            return
        if inst.admin_state == ADMIN_UP:
            # Unknown where the node could not tell (reported as ENODEHV/ENODERPC).
            listed = {} if pnode.answer is None else pnode.answer.get(NV.INSTANCELIST, {})
            known = inst.hypervisor in listed and inst.hypervisor not in pnode.hv_failed
            if known and inst.name not in pnode.running:
                text = f"instance not running on its primary node {pname}"
                self.report("EINSTANCEDOWN", "instance", inst.name, text)
            if pnode.node.offline:
                text = f"instance is marked as running and lives on offline node {pname}"
                self.report("EINSTANCEBADNODE", "instance", inst.name, text)
        if pnode.rpc_fail and not pnode.node.offline:
            text = f"instance {inst.name}, connection to primary node failed"
            self.report("ENODERPC", "node", pname, text)
        if not pnode.node.vm_capable:
            text = f"instance lives on non-vm_capable node {pname}"
            self.report("EINSTANCEBADNODE", "instance", inst.name, text)
        for node in disk_nodes(inst):
            self._disks(inst, node, wanted.get(node, []))
        if inst.disks_active:
            self._degraded(inst)

    def _degraded(self, inst: Instance) -> None:
        """Mirrored disks with a copy behind, as Ganeti's degraded DRBD: the
        current copies degraded with a sound local disk (a warning), the
        outdated ones faulty (an error)."""
        for idx, disk in enumerate(inst.disks):
            if not disk.outdated:
                continue
            for node in disk.nodes:
                faulty = node in disk.outdated
                text = (
                    f"disk/{idx} on {self.node_name(node)} is degraded; local disk state"
                    f" is '{'faulty' if faulty else 'ok'}'"
                )
                self.report("EINSTANCEFAULTYDISK", "instance", inst.name, text, not faulty)

    def _disks(self, inst: Instance, node: str, wanted: list[tuple[Instance, int]]) -> None:
        img = self.images.get(node)
        states = None if img is None or img.answer is None else img.answer.get(NV.DISKS)
        if not isinstance(states, list) or len(states) != len(wanted):
            return  # the node gave no disk data: its RPC failure is reported already
        name = self.node_name(node)
        for (owner, idx), (state, why) in zip(wanted, states, strict=True):
            if owner is not inst:
                continue
            disk = inst.disks[idx]
            if state == NV.DISK_MISSING:
                volume = templates.disk_path(disk) or disk.iv_name
                text = f"volume {volume} missing on node {name}"
                self.report("EINSTANCEMISSINGDISK", "instance", inst.name, text)
            elif state == NV.DISK_FAULTY:
                text = f"couldn't retrieve status for disk/{idx} on {name}: {why}"
                self.report("EINSTANCEFAULTYDISK", "instance", inst.name, text)

    def orphan_files(self, detached: list[DetachedDisk]) -> None:
        """Files in the file-based templates' directories that are no disk of
        an instance on that node (for a shared directory: of any instance),
        nor a ``detached`` disk."""
        owned = {
            (resource.node, resource.value)
            for resource in reservations.holders(self.instances, templates.RES_PATH)
        }
        for row in detached:
            template = templates.DISK_TEMPLATES.get(row.disk.dev_type)
            # A detached disk has its nodes (a file disk) or is seen by all (shared).
            held = [] if template is None else template.held(row.disk, "")
            owned |= {(resource.node, resource.value) for resource in held}
        for uuid, img in sorted(self.images.items(), key=lambda item: item[1].node.name):
            listed = {} if img.answer is None else img.answer.get(NV.STORAGE_FILES, {})
            for name, files in sorted(listed.items()):
                shared = _shared(templates.DISK_TEMPLATES[name])
                for path in files:
                    if (None if shared else uuid, path) not in owned:
                        self.report(
                            "ENODEORPHANLV",
                            "node",
                            img.node.name,
                            f"volume {path} is unknown",
                            warning=True,
                        )


def interrupted_leftovers(
    report: Reporter, cfg: ConfigManager, state: DurableState, images: dict[str, NodeImage]
) -> None:
    """What interrupted operations left on the group's nodes: the records
    masterd has not settled yet (:mod:`corral.cmdlib.intents`), and unfinished
    exports (``<instance>.new``) that no record covers."""
    for found in intents.findings(cfg, state):
        if found.node in images:
            report(found.ecode, found.itype, found.item, found.text, warning=found.warning)
    covered = intents.unfinished_exports(state)
    for uuid, img in sorted(images.items(), key=lambda item: item[1].node.name):
        names = [] if img.answer is None else img.answer.get(NV.UNFINISHED_EXPORTS) or []
        for name in names:
            if (uuid, name) not in covered:
                text = f"unfinished export {name}.new is unknown"
                report("ENODEORPHANLV", "node", img.node.name, text, warning=True)


def other_notes(
    feedback: Callable[[str], None],
    cluster: Cluster,
    instances: list[Instance],
    images: dict[str, NodeImage],
) -> None:
    """Ganeti's _VerifyOtherNotes: counts worth knowing, no errors (a drained
    node counts when it is neither the master nor a candidate, as in Ganeti)."""
    feedback("* Other Notes")
    non_redundant = sum(
        1
        for inst in instances
        if (t := _template(inst)) is not None and t.mirroring is templates.Mirroring.NONE
    )
    not_balanced = sum(
        1 for inst in instances if not filled_beparams(cluster, inst).get("auto_balance", True)
    )
    offline_insts = sum(1 for inst in instances if inst.admin_state == ADMIN_OFFLINE)
    nodes = [img.node for img in images.values()]
    for count, what in (
        (non_redundant, "non-redundant instance(s)"),
        (not_balanced, "non-auto-balanced instance(s)"),
        (offline_insts, "offline instance(s)"),
        (sum(1 for n in nodes if n.offline), "offline node(s)"),
        (
            sum(1 for n in nodes if n.drained and not (n.offline or n.master_candidate)),
            "drained node(s)",
        ),
    ):
        if count:
            feedback(f"  - NOTICE: {count} {what} found.")
