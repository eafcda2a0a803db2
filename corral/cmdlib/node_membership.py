"""Logical units of node membership: add (and readd), remove, redist-conf.

A node joins without SSH: its noded waits with a join token, and
OP_NODE_ADD runs the join exchange (:mod:`corral.services.join_client`),
signs the node's certificate request, sends the cluster files, then checks
the node over the normal RPC before the node enters the configuration.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
from typing import Any

from corral import capabilities, errors
from corral import constants as C
from corral.bootstrap import check_hostname
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.node_roles import candidate_stats, check_secondary_ip
from corral.objects import Node, NodeGroup
from corral.opcodes import cluster as opc
from corral.opcodes import node_membership as opn
from corral.rpc.calls_membership import node_leave_cluster
from corral.rpc.calls_node import version
from corral.services import distribution, join_tokens
from corral.services.ndparams import check_not_global, updated_ndparams
from corral.services.ssconf import ssconf_values
from corral.storage import templates


def _node_ip(name: str, given: str | None) -> str:
    """The node's address: given (``--node-ip``), else the name resolved."""
    if given is None:
        try:
            return socket.gethostbyname(name)
        except OSError:
            raise errors.OpPrereqError(
                f"Cannot resolve '{name}'; give the node's address with --node-ip",
                C.ECODE_RESOLVER,
            ) from None
    try:
        return str(ipaddress.ip_address(given))
    except ValueError:
        raise errors.OpPrereqError(
            f"Invalid node address '{given}': not an IP address", C.ECODE_INVAL
        ) from None


class LUNodeAdd(LogicalUnit[opn.OpNodeAdd]):
    """Ganeti's checks (name, addresses, flags, group), then the join."""

    OPCODE = opn.OpNodeAdd
    HPATH = "node-add"
    HTYPE = C.HTYPE_NODE

    new_node: Node
    joined = False  # set once the node is in: the post hooks then run on it too

    def check_arguments(self) -> None:
        op = self.op
        check_hostname(op.node_name, "node name")
        if op.readd and op.node_name == self.cfg.master_node.name:
            raise errors.OpPrereqError("Cannot readd the master node", C.ECODE_STATE)
        if op.readd and op.group:
            raise errors.OpPrereqError(
                "Cannot pass a node group when a node is being readded", C.ECODE_INVAL
            )
        if op.ndparams:
            check_not_global(op.ndparams)
            updated_ndparams({}, op.ndparams)
        op.primary_ip = _node_ip(op.node_name, op.primary_ip)
        if op.secondary_ip is None:
            op.secondary_ip = op.primary_ip
        check_secondary_ip(op.secondary_ip)

    def build_hooks_env(self) -> dict[str, Any]:
        op = self.op
        return {
            "OP_TARGET": op.node_name,
            "NODE_NAME": op.node_name,
            "NODE_PIP": op.primary_ip,
            "NODE_SIP": op.secondary_ip,
            "MASTER_CAPABLE": str(op.master_capable),
            "VM_CAPABLE": str(op.vm_capable),
        }

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        existing = self.cfg.find(Node, self.op.node_name)
        nodes = [n.uuid for n in self.cfg.nodes() if existing is None or n.uuid != existing.uuid]
        # The new node runs the post hooks too (it is in the config by then).
        post = [*nodes, self.new_node.uuid] if self.joined else nodes
        return nodes, post

    async def check_prereq(self) -> None:
        op = self.op
        existing = self.cfg.find(Node, op.node_name)
        if not op.readd and existing is not None:
            raise errors.OpPrereqError(
                f"Node {op.node_name} is already in the configuration", C.ECODE_EXISTS
            )
        if op.readd and existing is None:
            raise errors.OpPrereqError(
                f"Node {op.node_name} is not in the configuration", C.ECODE_NOENT
            )
        self._check_addresses(existing)
        self._check_homing()
        for flag in ("master_capable", "vm_capable"):
            if getattr(op, flag) is None:
                setattr(op, flag, getattr(existing, flag) if existing else True)
        if existing is not None:
            self._check_readd(existing)
            self.new_node = existing.model_copy(deep=True)
            self.new_node.primary_ip = op.primary_ip or existing.primary_ip
        else:
            group = self.cfg.lookup(NodeGroup, op.group) if op.group else None
            self.new_node = Node(
                name=op.node_name,
                primary_ip=str(op.primary_ip),
                secondary_ip=str(op.secondary_ip),
                group=group.uuid if group else self.cfg.master_node.group,
            )
        exceptions = [existing.uuid] if existing else []
        now, wanted, _ = candidate_stats(self.cfg, exceptions)
        node = self.new_node
        # As Ganeti's _DecideSelfPromotion: the new node counts among the possible ones.
        wanted = min(wanted + 1, self.cfg.cluster.candidate_pool_size)
        node.master_candidate = bool(op.master_capable) and now < wanted
        node.master_capable, node.vm_capable = bool(op.master_capable), bool(op.vm_capable)
        node.offline = node.drained = False
        node.powered = True  # as Ganeti: a node being added is on
        if op.ndparams:
            node.ndparams = updated_ndparams(node.ndparams, op.ndparams)

    def _check_addresses(self, existing: Node | None) -> None:
        op = self.op
        ips = {op.primary_ip, op.secondary_ip}
        for node in self.cfg.nodes():
            if existing is not None and node.uuid == existing.uuid:
                if node.secondary_ip != op.secondary_ip:
                    raise errors.OpPrereqError(
                        "Readded node doesn't have the same IP address configuration as before",
                        C.ECODE_INVAL,
                    )
                continue
            if ips & {node.primary_ip, node.secondary_ip}:
                raise errors.OpPrereqError(
                    f"New node ip address(es) conflict with existing node {node.name}",
                    C.ECODE_NOTUNIQUE,
                )

    def _check_homing(self) -> None:
        master = self.cfg.master_node
        master_single = master.secondary_ip == master.primary_ip
        if master_single != (self.op.secondary_ip == self.op.primary_ip):
            text = (
                "The master has no secondary ip but the new node has one"
                if master_single
                else "The master has a secondary ip but the new node doesn't have one"
            )
            raise errors.OpPrereqError(text, C.ECODE_INVAL)

    def _check_readd(self, existing: Node) -> None:
        if not self.op.vm_capable and any(
            existing.uuid in inst.all_nodes for inst in self.cfg.instances()
        ):
            raise errors.OpPrereqError(
                f"Node {existing.name} being re-added with vm_capable flag set to false,"
                " but it already holds instances",
                C.ECODE_STATE,
            )

    async def exec(self) -> None:
        node = self.new_node
        rejoin = self.op.readd and await self._answers_rpc(node)
        if rejoin:
            self.log_info(f"Node {node.name} is still in the cluster; sending its files")
        else:
            await self._join(node)  # the files travel with the join
        self.joined = True
        await self._check_member(node)
        for text in await distribution.redistribute(self.master, [node]) if rejoin else []:
            self.warn(text)
        if self.op.readd:
            self.tx.update(node)
        else:
            self.tx.add(node)

    async def _check_member(self, node: Node) -> None:
        """The joined node answers as a member; if not, it is made to leave."""
        what = f"Node {node.name} joined but does not answer as a cluster member"
        try:
            found = await self.master.rpc.run(node, version(), what)
            if found != C.PROTOCOL_VERSION:
                raise errors.OpExecError(f"{what}: protocol version {found}")
        except errors.OpExecError as err:
            left = await self._make_leave(node)
            outcome = "it left again" if left else "it could not be told to leave either"
            raise errors.OpExecError(f"{err.message}; {outcome}") from None

    async def _answers_rpc(self, node: Node) -> bool:
        result = await self.master.rpc.result(node, version())
        return not result.failed

    async def _join(self, node: Node) -> None:
        from corral.services.join_client import JoinSession

        cluster, state = self.cfg.cluster, self.master.durable
        transport = self.master.rpc.transport
        async with JoinSession(transport, node.name, node.primary_ip) as join:
            hello = await join.hello(templates.capacity_units(cluster))
            key = join_tokens.key_of(state, hello.get("token_id"))
            join.check_node_proof(key, hello)
            self._check_capabilities(node, hello)
            # Held while the node is sent its files; used once it accepted them.
            token_id, holder = str(hello["token_id"]), secrets.token_hex(8)
            await join_tokens.reserve(state, token_id, holder)
            try:
                files = await asyncio.to_thread(self._files_for, node, str(hello["csr"]))
                await join.finish(key, hello, files)
            except BaseException:
                await asyncio.shield(join_tokens.release(state, token_id, holder))
                raise
            await join_tokens.use(state, token_id, holder)
        self.log_info(f"Node {node.name} joined (certificate fingerprint {join.fingerprint})")

    def _check_capabilities(self, node: Node, hello: dict[str, Any]) -> None:
        if hello.get("version") != C.PROTOCOL_VERSION:
            raise errors.OpPrereqError(
                f"Version mismatch master version {C.PROTOCOL_VERSION},"
                f" node version {hello.get('version')}",
                C.ECODE_ENVIRON,
            )
        if self.op.vm_capable:
            cluster = self.cfg.cluster
            capabilities.check_reports(
                {node.name: hello.get("capabilities") or "no capabilities reported"},
                cluster.enabled_hypervisors,
                cluster.enabled_disk_templates,
            )

    def _files_for(self, node: Node, csr: str) -> dict[str, Any]:
        """The node's certificates (signed from its request) and the cluster's files."""
        from corral.crypto import certs

        paths = self.master.paths
        ca_cert, ca_key = paths.ca_cert.read_bytes(), paths.ca_key.read_bytes()
        try:
            cert = certs.sign_csr(
                certs.signing_ca(ca_cert, ca_key), ca_key, csr.encode("ascii"), node.name,
                ips=certs.node_cert_ips(node.primary_ip), dns=[node.name],
            )  # fmt: skip
        except errors.X509CertError as err:
            raise errors.OpExecError(f"Node {node.name} sent a bad key request: {err}") from None
        values = ssconf_values(self.cfg)
        return {
            "ca_cert": ca_cert.decode("ascii"),
            "server_cert": cert.decode("ascii"),
            "client_cert": cert.decode("ascii"),
            "domain_secret": paths.cluster_domain_secret.read_text(),
            "hmac_key": paths.confd_hmac_key.read_text(),
            "rapi_pem": paths.rapi_pem.read_text() if node.master_candidate else None,
            "ssconf": values,
        }

    async def _make_leave(self, node: Node) -> bool:
        """Tell the node to leave the cluster; whether it did."""
        what = f"Node {node.name} could not be told to leave"
        result = await self.master.rpc.attempt(node, node_leave_cluster(), self.warn, what)
        return not result.failed


class LUNodeRemove(LogicalUnit[opn.OpNodeRemove]):
    """Not the master, not a node with instances; the node forgets the cluster
    when it can be reached, and leaves the configuration anyway."""

    OPCODE = opn.OpNodeRemove
    HPATH = "node-remove"
    HTYPE = C.HTYPE_NODE

    node: Node

    def expand_names(self) -> None:
        self.node = self.expand(Node, self.op.node_uuid or self.op.node_name)
        self.op.node_uuid, self.op.node_name = self.node.uuid, self.node.name

    def build_hooks_env(self) -> dict[str, Any]:
        return {"OP_TARGET": self.op.node_name, "NODE_NAME": self.op.node_name}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        # Not on the removed node: a failed node could otherwise never be removed.
        nodes = [n.uuid for n in self.cfg.nodes() if n.uuid != self.node.uuid]
        return nodes, nodes

    async def check_prereq(self) -> None:
        node = self.node
        if node.uuid == self.cfg.cluster.master_node:
            raise errors.OpPrereqError(
                "Node is the master node, failover to another node is required", C.ECODE_INVAL
            )
        for inst in self.cfg.instances():
            if node.uuid in inst.all_nodes:
                raise errors.OpPrereqError(
                    f"Instance {inst.name} is still running on the node, please remove first",
                    C.ECODE_INVAL,
                )

    async def exec(self) -> None:
        node = self.node
        self.tx.remove(node)
        if node.offline:
            return
        what = "Errors encountered on the remote node while leaving the cluster"
        await self.master.rpc.attempt(node, node_leave_cluster(), self.warn, what)


class LUClusterRedistConf(LogicalUnit[opc.OpClusterRedistConf]):
    """Every online node gets the ssconf files and the distributed files again."""

    OPCODE = opc.OpClusterRedistConf
    REQ_BGL = False

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = ALL_SET
        self.share_locks[C.LEVEL_NODE] = True

    async def exec(self) -> None:
        nodes = distribution.other_online_nodes(self.cfg)
        for text in await distribution.redistribute(self.master, nodes):
            self.warn(text)
