"""Cluster verification: the config job and one job per node group.

Messages follow Ganeti's: ``* Verifying ...`` section lines and
``  - ERROR: <type> <item>: <text>`` findings (with --error-codes,
``  - ERROR:<ECODE>:<type>:<item>:<text>``).  Post hooks of cluster-verify
are merged into the group job's result.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.cmdlib.base import LogicalUnit
from corral.master.services.running import running_instances
from corral.objects import Node, NodeGroup
from corral.opcodes import cluster as opc

if TYPE_CHECKING:
    from corral.rpc.client import RpcResult

# Allowed clock difference between the master and a node, in seconds.
NODE_MAX_CLOCK_SKEW = 150.0


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
            where = f"{itype} {item}" if item else itype
            line = f"{ltype}: {where}: {text}"
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
            group_op = {**common, "group_name": group.uuid, "skip_checks": self.op.skip_checks}
            if jobs:
                group_op["depends"] = [[-len(jobs), []]]
            jobs.append([opc.OpClusterVerifyGroup.model_validate(group_op)])
        return {"jobs": self.ctx.submit_jobs(jobs)}


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
        if self.op.debug_simulate_errors:
            self.report("ECLUSTERCFG", "cluster", None, "simulated error")
        return not self.bad

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
        from corral.crypto.certs import verify_signed_by

        paths = self.master.paths
        ca = paths.ca_cert
        for path, code in (
            (ca, "ECLUSTERCERT"),
            (paths.server_pem, "ECLUSTERCERT"),
            (paths.client_pem, "ECLUSTERCLIENTCERT"),
        ):
            self._check_cert_file(path, code)
            if (
                path != ca
                and path.exists()
                and ca.exists()
                and not verify_signed_by(path.read_bytes(), ca.read_bytes())
            ):
                self.report(
                    code, "cluster", None, f"certificate {path} is not signed by the cluster CA"
                )
        if not paths.cluster_domain_secret.exists():
            self.report(
                "ECLUSTERFILECHECK",
                "cluster",
                None,
                f"the cluster domain secret {paths.cluster_domain_secret} is missing",
            )

    def _check_cert_file(self, path: Path, code: str) -> None:
        from corral.crypto.certs import cert_info

        try:
            info = cert_info(path)
        except (OSError, ValueError) as err:
            self.report(code, "cluster", None, f"cannot read certificate {path}: {err}")
            return
        check_cert_validity(self, code, "cluster", None, str(path), info)


def check_cert_validity(
    lu: _VerifyLU, code: str, itype: str, item: str | None, what: str, info: dict[str, Any]
) -> None:
    """Report a certificate that is not yet valid, expired, or expires soon."""
    now = time.time()
    days_left = (info["not_after"] - now) / 86400
    if info["not_before"] > now + NODE_MAX_CLOCK_SKEW:
        lu.report(code, itype, item, f"certificate {what} is not yet valid")
    elif days_left < 0:
        lu.report(code, itype, item, f"certificate {what} expired")
    elif days_left < C.CERT_EXPIRY_ERROR_DAYS:
        lu.report(code, itype, item, f"certificate {what} expires in {days_left:.0f} days")
    elif days_left < C.CERT_EXPIRY_WARN_DAYS:
        lu.report(
            code, itype, item, f"certificate {what} expires in {days_left:.0f} days", warning=True
        )


class LUClusterVerifyGroup(_VerifyLU):
    """Checks every node of one group: reachability, version, clock, certificate."""

    OPCODE = opc.OpClusterVerifyGroup
    HPATH = "cluster-verify"
    HTYPE = C.HTYPE_CLUSTER

    def expand_names(self) -> None:
        self.group = self.cfg.lookup(NodeGroup, self.op.group_name)
        self.nodes = [n for n in self.cfg.nodes() if n.group == self.group.uuid]

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODEGROUP] = [self.group.uuid]
        self.needed_locks[C.LEVEL_NODE] = [n.uuid for n in self.nodes]
        # Shared node-res locks wait for adds under way: their disks are no orphans.
        self.needed_locks[C.LEVEL_NODE_RES] = [n.uuid for n in self.nodes]
        self.share_locks[C.LEVEL_NODEGROUP] = True
        self.share_locks[C.LEVEL_NODE] = True
        self.share_locks[C.LEVEL_NODE_RES] = True

    def build_hooks_env(self) -> dict[str, Any]:
        env: dict[str, Any] = {"CLUSTER_TAGS": " ".join(sorted(self.cfg.cluster.tags))}
        for node in self.nodes:
            env[f"NODE_TAGS_{node.name}"] = " ".join(sorted(node.tags))
        return env

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        return [], [n.uuid for n in self.nodes]

    async def exec(self) -> Any:
        self.bad = False
        self.feedback(f"* Verifying group '{self.group.name}'")
        if not self.nodes:
            self.feedback("* Empty node group, skipping verification")
            return True
        self.feedback(f"* Gathering data ({len(self.nodes)} nodes)")
        targets = self.node_addresses([n.uuid for n in self.nodes])
        started = time.time()
        results = await self.master.rpc.call(targets, "node_verify", [{}, ""])
        finished = time.time()
        self.feedback("* Verifying node status")
        for node in self.nodes:
            if node.offline:
                continue
            self._verify_node(node, results.get(node.uuid), started, finished)
        await self._verify_orphan_instances(targets)
        await self._verify_oses(targets)
        await self._verify_orphan_volumes(targets)
        if self.op.debug_simulate_errors:
            self.report("ENODERPC", "node", self.nodes[0].name, "simulated error")
        return not self.bad

    async def _verify_oses(self, targets: list[tuple[str, str]]) -> None:
        """OS definitions must be valid alike on all nodes, with one os_version."""
        self.feedback("* Verifying OS definitions")
        results = await self.master.rpc.call(targets, "os_diagnose", [])
        seen: dict[str, dict[str, dict[str, Any]]] = {}
        for uuid, res in results.items():
            if res.fail_msg:
                continue  # reported as ENODERPC already
            for entry in res.payload:
                seen.setdefault(entry["name"], {})[self._node_name(uuid)] = entry
        answered = {self._node_name(u) for u, r in results.items() if not r.fail_msg}
        for name in sorted(seen):
            per_node = seen[name]
            for node in sorted(answered - set(per_node)):
                self.report("ENODEOS", "node", node, f"OS '{name}' is missing")
            for node, entry in sorted(per_node.items()):
                if not entry["valid"]:
                    self.report(
                        "ENODEOS", "node", node, f"OS '{name}' is invalid: {entry['error']}"
                    )
            versions = {n: e["os_version"] for n, e in per_node.items() if e["valid"]}
            if len(set(versions.values())) > 1:
                listed = ", ".join(f"{n}: {v or '(none)'}" for n, v in sorted(versions.items()))
                self.report(
                    "ENODEOS",
                    "cluster",
                    None,
                    f"OS '{name}' has different os_version files ({listed})",
                )

    async def _verify_orphan_instances(self, targets: list[tuple[str, str]]) -> None:
        """What the hypervisors run must be the nodes' own instances."""
        asked = [
            (uuid, address, hv)
            for uuid, address in targets
            for hv in self.cfg.cluster.enabled_hypervisors
        ]
        results = await running_instances(self.master, asked)
        known = {inst.name: inst for inst in self.cfg.instances()}
        for (uuid, _), res in sorted(results.items()):
            if res.fail_msg:
                continue  # an unreachable node is reported as ENODERPC already
            node = self._node_name(uuid)
            for name in sorted(res.payload):
                inst = known.get(name)
                if inst is None:
                    self.report(
                        "ENODEORPHANINSTANCE",
                        "node",
                        node,
                        f"node is running unknown instance {name}",
                    )
                elif inst.primary_node != uuid:
                    self.report(
                        "EINSTANCEWRONGNODE",
                        "instance",
                        name,
                        f"instance should not run on node {node}",
                    )

    async def _verify_orphan_volumes(self, targets: list[tuple[str, str]]) -> None:
        """Files in the file storage directory must be disks of the nodes' instances
        (a warning, as Ganeti's unknown volumes)."""
        self.feedback("* Verifying orphan volumes")
        storage_dir = self.cfg.cluster.file_storage_dir
        results = await self.master.rpc.call(targets, "file_storage_list", [storage_dir])
        owned = {
            (node, disk.path)
            for inst in self.cfg.instances()
            for node in inst.all_nodes
            for disk in inst.disks
            if disk.path
        }
        for uuid, res in sorted(results.items()):
            if res.fail_msg:
                continue
            for path in res.payload:
                if (uuid, path) not in owned:
                    self.report(
                        "ENODEORPHANLV",
                        "node",
                        self._node_name(uuid),
                        f"volume {path} is unknown",
                        warning=True,
                    )

    def _node_name(self, uuid: str) -> str:
        node = self.cfg.get(Node, uuid)
        return node.name if node is not None else uuid

    def _verify_node(
        self, node: Node, res: RpcResult | None, started: float, finished: float
    ) -> None:
        if res is None or res.fail_msg:
            reason = res.fail_msg if res is not None else "no answer"
            self.report("ENODERPC", "node", node.name, f"while contacting node: {reason}")
            return
        data = res.payload
        if data.get("version") != C.PROTOCOL_VERSION:
            self.report(
                "ENODEVERSION",
                "node",
                node.name,
                f"incompatible protocol versions: master {C.PROTOCOL_VERSION},"
                f" node {data.get('version')}",
            )
        node_time = float(data.get("time", 0))
        if node_time < started - NODE_MAX_CLOCK_SKEW or node_time > finished + NODE_MAX_CLOCK_SKEW:
            self.report(
                "ENODETIME",
                "node",
                node.name,
                f"node clock differs from the master's by more than {NODE_MAX_CLOCK_SKEW:g} s",
            )
        cert = data.get("certificate")
        if cert:
            check_cert_validity(self, "ENODESETUP", "node", node.name, "server.pem", cert)

    def hooks_callback(self, phase: str, results: dict[str, RpcResult], result: Any) -> Any:
        """Failing cluster-verify post hooks make the verification fail."""
        self.feedback("* Hooks Results")
        ok = bool(result)
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
