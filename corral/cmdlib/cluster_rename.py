"""gnt-cluster rename (OP_CLUSTER_RENAME), as Ganeti's LUClusterRename.

The new name is normalised and resolved as Ganeti's GetHostname does, and
its address becomes the master IP; one that answers on the network (another
machine's) is refused.  A name that does not resolve gets the master node's
address, as at ``gnt-cluster init`` (Corral's clusters need no DNS), where
Ganeti refuses such a name.  As Ganeti's, the master IP goes down
on the master node first (refused if it cannot) and comes up again at the
new address after (a warning if it cannot).  The configuration's and the
ssconf files' ``cluster_name`` and ``master_ip`` are pushed to every online
node before the job ends: a verify right after finds them alike.
Certificates keep the old name, as Ganeti's do (``gnt-cluster renew-crypto
--new-rapi-certificate`` puts the new one in the RAPI's).
"""

from __future__ import annotations

import asyncio
import re
import socket
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.cmdlib.instance_create import ip_in_use
from corral.master_network import master_params
from corral.objects import Cluster
from corral.opcodes import cluster as opc
from corral.rpc.calls_master_ip import node_activate_master_ip, node_deactivate_master_ip
from corral.rpc.declare import NodeCall
from corral.services.distribution import other_online_nodes, push_ssconf

# Ganeti's Hostname._VALID_NAME_RE (underscores allowed).
_VALID_NAME = re.compile(r"^[a-z0-9._-]{1,255}$")


def normalized_hostname(name: str) -> str:
    """Ganeti's GetNormalizedName: lower case, checked, without a final dot."""
    name = name.lower()
    if not _VALID_NAME.match(name) or ".." in name or name.startswith("."):
        raise errors.OpPrereqError(f"Invalid hostname '{name}'", C.ECODE_INVAL)
    return name.rstrip(".")


async def resolve(name: str, family: int) -> tuple[str, str | None]:
    """The name's fully qualified form and its address (None if it does not
    resolve), as Ganeti's Hostname finds them."""
    fqdn = normalized_hostname(await asyncio.to_thread(socket.getfqdn, name))
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(fqdn, None, family=family)
    except OSError:
        return fqdn, None
    return fqdn, str(infos[0][4][0])


class LUClusterRename(LogicalUnit[opc.OpClusterRename]):
    """A new cluster name, and the master IP it resolves to."""

    OPCODE = opc.OpClusterRename
    HPATH = "cluster-rename"
    HTYPE = C.HTYPE_CLUSTER

    def check_arguments(self) -> None:
        normalized_hostname(self.op.name)

    def build_hooks_env(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.cluster.name, "NEW_NAME": self.op.name}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        return [self.master_node.uuid], [node.uuid for node in self.cfg.nodes()]

    async def check_prereq(self) -> None:
        cluster = self.cfg.cluster
        family = socket.AF_INET6 if ":" in cluster.master_ip else socket.AF_INET
        name, address = await resolve(self.op.name, family)
        self.new_ip = address or self.master_node.primary_ip
        if name == cluster.name and self.new_ip == cluster.master_ip:
            raise errors.OpPrereqError(
                "Neither the name nor the IP address of the cluster has changed", C.ECODE_INVAL
            )
        # The master node's own address is no other machine's (Corral's
        # clusters often have it as their master IP).
        others = (cluster.master_ip, self.master_node.primary_ip)
        if self.new_ip not in others and await ip_in_use(self.new_ip, cluster.noded_port):
            raise errors.OpPrereqError(
                f"The given cluster IP address ({self.new_ip}) is reachable on the network",
                C.ECODE_NOTUNIQUE,
            )
        self.op.name = name

    async def exec(self) -> Any:
        # As Ganeti's: the master IP down while it changes, up again after.
        await self._master_ip(node_deactivate_master_ip, "Could not disable the master role")
        try:
            cluster = self.cfg.cluster.copy_for_update()
            assert isinstance(cluster, Cluster)
            cluster.name = self.op.name
            cluster.master_ip = self.new_ip
            self.tx.update(cluster)
            await self.checkpoint()
            nodes = other_online_nodes(self.cfg)
            results = await push_ssconf(self.master, nodes)
            for node in nodes:
                results[node.uuid].report(
                    self.warn, f"Cannot write the ssconf files on node {node.name}"
                )
        finally:
            what = "Could not re-enable the master role on the master, please restart manually"
            await self._master_ip(node_activate_master_ip, what, warn=True)
        return self.op.name

    async def _master_ip(self, call: NodeCall[..., None], what: str, *, warn: bool = False) -> None:
        cluster, master = self.cfg.cluster, self.master_node
        request = call(master_params(cluster, master), cluster.use_external_mip_script)
        result = await self.master.rpc.result(master, request)
        if warn:
            result.report(self.warn, what)
        else:
            result.get(what)
