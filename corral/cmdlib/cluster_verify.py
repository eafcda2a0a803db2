"""Cluster verification: the config job and one job per node group.

Messages follow Ganeti's: ``* Verifying ...`` section lines and
``  - ERROR: <type> <item>: <text>`` findings (with --error-codes,
``  - ERROR:<ECODE>:<type>:<item>:<text>``).  Post hooks of cluster-verify
are merged into the group job's result.

A group's verification asks each of its online nodes once, all in parallel,
for everything it checks (node_verify, :mod:`corral.rpc.node_verify`), and
waits for them at most the query deadline (masterd's ``--query-deadline``):
a node that has not answered by then is reported (ENODERPC), never waited on
longer.  What the answers say is judged in cluster_verify_nodes (a node),
cluster_verify_files (the distributed files) and cluster_verify_instances.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import hypervisors as H
from corral.cmdlib import cluster_verify_nodes as vn
from corral.cmdlib.base import LogicalUnit
from corral.cmdlib.cluster_verify_etcd import verify_etcd
from corral.cmdlib.cluster_verify_files import checked_files, verify_files
from corral.cmdlib.cluster_verify_instances import (
    InstanceChecks,
    disk_args,
    disks_by_node,
    interrupted_leftovers,
    other_notes,
    storage_files_nodes,
)
from corral.cmdlib.oob import supports_oob
from corral.crypto.cert_check import WARNING
from corral.objects import Instance, Node, NodeGroup
from corral.opcodes import cluster as opc
from corral.rpc import node_verify as NV
from corral.rpc.calls_node import node_verify
from corral.services.etcd_members import member_nodes
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.health import gather
from corral.storage import templates

if TYPE_CHECKING:
    from corral.hooks import HookResults

# The skip_checks value that skips the N+1 memory check (Ganeti's name).
VERIFY_NPLUSONE_MEM = "nplusone_mem"


class _VerifyLU(LogicalUnit[Any]):
    """Shared reporting: findings, ignored codes, the bad flag."""

    REQ_BGL = False
    bad = False

    def report(
        self, ecode: str, itype: str, item: str | None, text: str, warning: bool = False
    ) -> None:
        ltype = "WARNING" if warning or ecode in self.op.ignore_errors else "ERROR"
        if self.op.error_codes:
            line = f"{ltype}:{ecode}:{itype}:{item}:{text}"
        else:
            # Ganeti's layout, the space before the colon included when there is no item.
            line = f"{ltype}: {itype} {item or ''}: {text}"
        self.feedback(f"  - {line}")
        if ltype == "ERROR":
            self.bad = True


class LUClusterVerify(LogicalUnit[opc.OpClusterVerify]):
    """Submits the config verification and one job per node group."""

    OPCODE = opc.OpClusterVerify
    REQ_BGL = False

    async def exec(self) -> Any:
        common: dict[str, Any] = {
            "debug_simulate_errors": self.op.debug_simulate_errors,
            "error_codes": self.op.error_codes,
            "ignore_errors": self.op.ignore_errors,
            "verbose": self.op.verbose,
            "priority": self.op.priority,
        }
        groups = self.cfg.groups()
        jobs: list[list[Any]] = []
        if self.op.group_name:
            groups = [self.cfg.lookup(NodeGroup, self.op.group_name)]
        else:
            jobs.append([opc.OpClusterVerifyConfig.model_validate(common)])
        for group in groups:
            group_op = {
                **common,
                "group_name": group.uuid,
                "skip_checks": self.op.skip_checks,
                "verify_clutter": self.op.verify_clutter,
            }
            if jobs:
                group_op["depends"] = [[-len(jobs), []]]
            jobs.append([opc.OpClusterVerifyGroup.model_validate(group_op)])
        return {"jobs": await self.ctx.submit_jobs(jobs)}


class LUClusterVerifyConfig(_VerifyLU):
    """Checks the configuration's consistency and the certificate files."""

    OPCODE = opc.OpClusterVerifyConfig

    async def exec(self) -> Any:
        self.bad = False
        self.feedback("* Verifying cluster config")
        self._verify_config()
        self.feedback("* Verifying cluster certificate files")
        self._verify_certificates()
        self.feedback("* Verifying hypervisor parameters")
        self.feedback("* Verifying all nodes belong to an existing group")
        for node in self.cfg.nodes():
            if self.cfg.get(NodeGroup, node.group) is None:
                self.report(
                    "ECLUSTERDANGLINGNODES",
                    "cluster",
                    None,
                    f"node '{node.name}' is in unknown group {node.group}",
                )
        if self.cfg.cluster.etcd_members:
            await self._verify_etcd()
        if self.op.debug_simulate_errors:
            self.report("ECLUSTERCFG", "cluster", None, "simulated error")
        return not self.bad

    async def _verify_etcd(self) -> None:
        """The etcd members' health, under the query deadline (Corral's own)."""
        self.feedback("* Verifying the etcd members")
        candidates, _ = member_nodes(self.cfg)
        if not candidates:
            return
        paths, service = self.master.paths, self.master.etcd_members
        tls = await asyncio.to_thread(client_ssl_context, paths.ca_cert, paths.client_pem)
        deadline = self.master.rpc.query_deadline
        etcd = EtcdClient([c.client_url for c in candidates], tls, deadline)
        try:
            health = await gather(etcd, deadline)
        finally:
            await etcd.close()
        failure = service.last_failure if service is not None else None
        verify_etcd(self.report, self.feedback, self.cfg.nodes(), health, failure)

    def _verify_config(self) -> None:
        cluster = self.cfg.cluster
        master = self.cfg.get(Node, cluster.master_node)
        if master is None:
            self.report(
                "ECLUSTERCFG",
                "cluster",
                None,
                f"master node {cluster.master_node} is not in the configuration",
            )
        elif not master.master_candidate:
            self.report(
                "ECLUSTERCFG",
                "cluster",
                None,
                f"master node {master.name} is not a master candidate",
            )
        if not self.cfg.groups():
            self.report("ECLUSTERCFG", "cluster", None, "there is no node group")
        for hv in cluster.enabled_hypervisors:
            if not hv:
                self.report("ECLUSTERCFG", "cluster", None, "empty hypervisor name enabled")

    def _verify_certificates(self) -> None:
        from corral.crypto.cert_check import check_file

        paths = self.master.paths
        for path, code, ca in (
            (paths.ca_cert, "ECLUSTERCERT", None),
            (paths.server_pem, "ECLUSTERCERT", paths.ca_cert),
            (paths.client_pem, "ECLUSTERCLIENTCERT", paths.ca_cert),
        ):
            for level, msg in check_file(path, paths.to_wire(path), ca):
                self.report(code, "cluster", None, msg, warning=level == WARNING)
        if not paths.cluster_domain_secret.exists():
            self.report(
                "ECLUSTERFILECHECK",
                "cluster",
                None,
                f"the cluster domain secret {paths.to_wire(paths.cluster_domain_secret)}"
                " is missing",
            )


class LUClusterVerifyGroup(_VerifyLU):
    """Checks every node of one group: reachability, version, clock, certificate."""

    OPCODE = opc.OpClusterVerifyGroup
    HPATH = "cluster-verify"
    HTYPE = C.HTYPE_CLUSTER

    def expand_names(self) -> None:
        # node uuid → why it did not answer node_verify
        self.unanswered: dict[str, str] = {}
        self.group = self.expand(NodeGroup, self.op.group_name)
        self.nodes: list[Node] = []

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODEGROUP] = [self.group.uuid]
        self.share_locks[C.LEVEL_NODEGROUP] = True
        self.share_locks[C.LEVEL_NODE] = True
        self.share_locks[C.LEVEL_NODE_RES] = True

    def declare_level(self, level: str) -> None:
        # The members are read under the group's lock (assigning nodes takes it).
        if level == C.LEVEL_NODE:
            self.nodes = [n for n in self.cfg.nodes() if n.group == self.group.uuid]
            self.needed_locks[C.LEVEL_NODE] = [n.uuid for n in self.nodes]
        elif level == C.LEVEL_NODE_RES:
            # Shared node-res locks wait for adds under way: their disks are no orphans.
            self.needed_locks[C.LEVEL_NODE_RES] = [n.uuid for n in self.nodes]

    def build_hooks_env(self) -> dict[str, Any]:
        env: dict[str, Any] = {"CLUSTER_TAGS": " ".join(sorted(self.cfg.cluster.tags))}
        for node in self.nodes:
            env[f"NODE_TAGS_{node.name}"] = " ".join(sorted(node.tags))
        return env

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        # A node that did not answer node_verify by the deadline is not asked
        # again (that could take the hooks call's own, long, timeout): its
        # communication failure is reported as the hooks results'.
        return [], [n.uuid for n in self.nodes if n.uuid not in self.unanswered]

    async def exec(self) -> Any:
        self.bad = False
        self.feedback(f"* Verifying group '{self.group.name}'")
        if not self.nodes:
            self.feedback("* Empty node group, skipping verification")
            return True
        uuids = {n.uuid for n in self.nodes}
        instances = sorted(
            (i for i in self.cfg.instances() if i.primary_node in uuids), key=lambda i: i.name
        )
        count = len(self.nodes)
        self.feedback(f"* Gathering data ({count} nodes)")
        self.feedback(f"* Gathering information about nodes ({count} nodes)")
        images, file_images, started, finished = await self._gather(instances)
        self.feedback(f"* Gathering disk information ({count} nodes)")
        self.feedback("* Verifying configuration file consistency")
        verify_files(self.report, self.master.paths, self.cfg, file_images)
        self.feedback("* Verifying node status")
        checks = InstanceChecks(self.report, images, instances, self._node_name)
        self._verify_nodes(images, checks, started, finished)
        self.feedback("* Verifying instance status")
        wanted = disks_by_node(instances)
        for inst in instances:
            if self.op.verbose:
                self.feedback(f"* Verifying instance {inst.name}")
            checks.instance(inst, wanted)
        self.feedback("* Verifying orphan volumes")
        checks.orphan_files(self.cfg.detached_disks())
        interrupted_leftovers(self.report, self.cfg, self.master.durable, images)
        if VERIFY_NPLUSONE_MEM not in self.op.skip_checks:
            # Ganeti checks that secondaries could take over their primaries'
            # instances: Corral's templates have no secondary nodes, so none is due.
            self.feedback("* Verifying N+1 Memory redundancy")
        other_notes(self.feedback, self.cfg.cluster, instances, images)
        if self.op.debug_simulate_errors:
            self.report("ENODERPC", "node", self.nodes[0].name, "simulated error")
        return not self.bad

    def _checks(self) -> dict[str, Any]:
        """The checks every node of the group is asked for."""
        cluster = self.cfg.cluster
        hypervisors = list(cluster.enabled_hypervisors)
        # Each template → the key of its storage unit (its directory), or None.
        storage: dict[str, str | None] = {}
        for name in cluster.enabled_disk_templates:
            template = templates.DISK_TEMPLATES.get(name)
            if template is not None:
                unit = template.capacity_unit(cluster)
                storage[name] = None if unit is None else unit.key
        checks: dict[str, Any] = {
            NV.NODESETUP: None,
            NV.HYPERVISOR: hypervisors,
            NV.INSTANCELIST: hypervisors,
            NV.OSLIST: None,
            NV.STORAGE: storage,
            NV.UNFINISHED_EXPORTS: None,
        }
        kinds = [H.kind(hv) for hv in hypervisors]
        if any(kind is not None and kind.network_rules for kind in kinds):
            checks[NV.NETRULES] = None
        # Every node's program, whichever group it is in (Ganeti's NV_OOB_PATHS).
        programs = dict.fromkeys(supports_oob(self.cfg, node) for node in self.cfg.nodes())
        programs.pop("", None)
        if programs:
            checks[NV.OOB_PATHS] = list(programs)
        return checks

    async def _gather(
        self, instances: list[Instance]
    ) -> tuple[dict[str, vn.NodeImage], dict[str, vn.NodeImage], float, float]:
        """Ask every online node of the group (and the master, for the files)
        once, all at the same time, under one deadline."""
        if self.master.config_export is not None:
            # config.data as every change so far left it, on every candidate.
            await self.master.config_export.settled()
        images = {n.uuid: vn.NodeImage(n) for n in self.nodes}
        master = self.cfg.master_node
        file_images = {**images, master.uuid: images.get(master.uuid) or vn.NodeImage(master)}
        files = checked_files(self.master.paths, self.cfg, [i.node for i in file_images.values()])
        common = self._checks()
        wanted = disks_by_node(instances)
        listers = storage_files_nodes(self.cfg.cluster, images)
        asked: list[tuple[vn.NodeImage, dict[str, Any]]] = []
        for uuid, img in file_images.items():
            if img.node.offline:
                continue
            checks: dict[str, Any] = {NV.FILELIST: files}
            if uuid in images:
                checks |= {**common, NV.DISKS: disk_args(wanted.get(uuid, []))}
                if uuid in listers:
                    checks[NV.STORAGE_FILES] = listers[uuid]
            asked.append((img, checks))
        deadline = self.master.rpc.query_deadline
        started = time.time()
        results = await asyncio.gather(
            *(
                self.master.rpc.result(
                    img.node, node_verify(checks, img.node.name), timeout=deadline
                )
                for img, checks in asked
            )
        )
        finished = time.time()
        for (img, _), res in zip(asked, results, strict=True):
            if res.fail_msg:
                img.rpc_fail, img.fail_msg = True, res.fail_msg
                if img.node.uuid in images:
                    self.unanswered[img.node.uuid] = res.fail_msg
            else:
                img.answer = res.payload
        return images, file_images, started, finished

    def _verify_nodes(
        self,
        images: dict[str, vn.NodeImage],
        checks: InstanceChecks,
        started: float,
        finished: float,
    ) -> None:
        """Ganeti's per-node loop: offline nodes skipped, the others' answers judged."""
        known = {inst.name: inst for inst in self.cfg.instances()}
        reference: vn.NodeImage | None = None
        for node in self.nodes:
            img = images[node.uuid]
            if node.offline:
                if self.op.verbose:
                    self.feedback(f"* Skipping offline node {node.name}")
                continue
            if self.op.verbose:
                self.feedback(f"* Verifying node {node.name} ({self._node_type(node)})")
            if img.rpc_fail:
                text = f"while contacting node: {img.fail_msg}"
                self.report("ENODERPC", "node", node.name, text)
                continue
            if not vn.verify_node(self.report, img):
                img.answer = None
                continue
            vn.verify_time(self.report, img, started, finished)
            vn.verify_oob(self.report, img)
            vn.verify_storage(self.report, img)
            if not node.vm_capable:
                continue
            vn.verify_netrules(self.report, img)
            vn.update_instances(self.report, img)
            vn.update_oses(self.report, img)
            if img.oses is not None:
                reference = reference or img
                vn.verify_oses(self.report, img, reference)
            checks.wrong_nodes(img, known)

    def _node_type(self, node: Node) -> str:
        if node.uuid == self.cfg.cluster.master_node:
            return "master"
        if node.master_candidate:
            return "master candidate"
        return "drained" if node.drained else "regular"

    def _node_name(self, uuid: str) -> str:
        node = self.cfg.get(Node, uuid)
        return node.name if node is not None else uuid

    def hooks_callback(self, phase: str, results: HookResults, result: Any) -> Any:
        """Failing cluster-verify post hooks make the verification fail."""
        self.feedback("* Hooks Results")
        ok = bool(result)
        for node_uuid, why in self.unanswered.items():
            text = f"Communication failure in hooks execution: {why}"
            self.report("ENODEHOOKS", "node", self._node_name(node_uuid), text)
            ok = False
        for node_uuid, res in results.items():
            node = self.cfg.get(Node, node_uuid)
            name = node.name if node is not None else node_uuid
            if res.fail_msg:
                self.report(
                    "ENODEHOOKS",
                    "node",
                    name,
                    f"Communication failure in hooks execution: {res.fail_msg}",
                )
                ok = False
                continue
            for script, hkr, output in res.payload:
                if hkr == C.HKR_FAIL:
                    self.report("ENODEHOOKS", "node", name, f"Script {script} failed, output:")
                    for line in str(output).splitlines():
                        self.feedback(f"      {line}")
                    ok = False
        return ok
