"""A masterd stand-in for query tests: a real configuration, scripted nodes.

Typical use::

    world = await QueryWorld.create(tmp_path)
    inst = await world.instance("web1", nics=[NIC(mac="aa:00:00:00:00:01")])
    world.answer("node_info", world.node1.uuid, {"bootid": "b"})
    rows = await world.query("instance", ["name", "mac"])
    # rows == [[[0, "web1"], [0, "aa:00:00:00:00:01"]]]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

from corral.config.manager import ConfigManager, initial_change
from corral.master import resources
from corral.objects import Cluster, ConfigObject, Instance, Node, NodeGroup
from corral.rpc.client import RpcClient
from corral.rpc.declare import Request
from corral.rpc.join_channel import JoinChannel
from corral.rpc.result import NodeTarget, RpcResult
from corral.rpc.transport import WireReply, WireRequest
from corral.state.sqlite.config import SqliteConfigStore

R = TypeVar("R")


class ScriptedTransport:
    """Answers from a script: call name → node uuid → payload (unset: the
    node answers that it failed)."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}

    async def send(self, request: WireRequest) -> WireReply:
        payload = self.answers.get(request.call, {}).get(request.node)
        answer = [False, "Cannot connect"] if payload is None else [True, payload]
        return WireReply(200, json.dumps(answer).encode())

    def join_channel(self, address: str) -> JoinChannel:
        raise AssertionError("queries join no node")

    async def close(self) -> None:
        pass


class FakeRpc(RpcClient):
    """The RPC client over a :class:`ScriptedTransport`, recording each call as
    ``(name, node uuids, args)``."""

    def __init__(self) -> None:
        self.script = ScriptedTransport()
        super().__init__(self.script)
        self.calls: list[tuple[str, list[str], list[Any]]] = []

    async def result(
        self, node: NodeTarget, request: Request[R], *, timeout: float | None = None
    ) -> RpcResult[R]:
        self.calls.append((request.call.name, [node.uuid], request.args))
        return await super().result(node, request, timeout=timeout)

    async def results(
        self, nodes: Iterable[NodeTarget], request: Request[R], *, timeout: float | None = None
    ) -> dict[str, RpcResult[R]]:
        nodes = list(nodes)
        self.calls.append((request.call.name, [node.uuid for node in nodes], request.args))
        return await super().results(nodes, request, timeout=timeout)


class QueryWorld:
    """A cluster of one group and two nodes (node1 is the master)."""

    cfg: ConfigManager

    def __init__(self, tmp_path: Path) -> None:
        self.group = NodeGroup(name="default")
        self.node1 = self._node("node1.example.com", "192.0.2.1", self.group)
        self.node2 = self._node("node2.example.com", "192.0.2.2", self.group)
        self.cluster = Cluster(
            name="cluster.example.com",
            master_node=self.node1.uuid,
            master_ip="192.0.2.100",
            file_storage_dir="/srv/ganeti/file-storage",
            hvparams={"fake": {"migration_mode": "live"}},
            beparams={"default": {"maxmem": 128, "minmem": 128, "vcpus": 1}},
            nicparams={"default": {"mode": "bridged", "link": "br0", "vlan": ""}},
        )
        path = tmp_path / "config.db"
        initial = initial_change([self.cluster, self.group, self.node1, self.node2])
        SqliteConfigStore.create(path, initial)
        self.store = SqliteConfigStore(path)
        self.rpc = FakeRpc()

    @classmethod
    async def create(cls, tmp_path: Path) -> QueryWorld:
        world = cls(tmp_path)
        world.cfg = await ConfigManager.open(world.store)
        return world

    @staticmethod
    def _node(name: str, ip: str, group: NodeGroup, **extra: Any) -> Node:
        return Node(name=name, primary_ip=ip, secondary_ip=ip, group=group.uuid, **extra)

    async def close(self) -> None:
        await self.cfg.close()

    async def add(self, *objects: ConfigObject) -> None:
        tx = self.cfg.transaction()
        for obj in objects:
            tx.add(obj)
        await tx.commit()

    async def update(self, obj: ConfigObject) -> None:
        tx = self.cfg.transaction()
        tx.update(obj)
        await tx.commit()

    async def instance(self, name: str, node: Node | None = None, **extra: Any) -> Instance:
        """Add a diskless instance on ``node`` (node1 by default)."""
        values: dict[str, Any] = {
            "name": name,
            "primary_node": (node or self.node1).uuid,
            "os": "debootstrap+default",
            "hypervisor": "fake",
            "disk_template": "diskless",
            **extra,
        }
        inst = Instance(**values)
        await self.add(inst)
        return inst

    def answer(self, call: str, node: Node, payload: Any) -> None:
        """What ``node`` answers to ``call`` (unset: the call fails)."""
        self.rpc.script.answers.setdefault(call, {})[node.uuid] = payload

    async def result(self, what: str, fields: list[str], qfilter: Any = None) -> dict[str, Any]:
        """The Query answer, as masterd gives it."""
        master = cast(Any, _Master(self.cfg, self.rpc))
        answer: dict[str, Any] = await resources.query(master, what, fields, qfilter)
        return answer

    async def query(self, what: str, fields: list[str], qfilter: Any = None) -> list[Any]:
        """The rows of ``[status, value]`` cells."""
        return list((await self.result(what, fields, qfilter))["data"])

    async def values(self, what: str, fields: list[str], name: str) -> dict[str, Any]:
        """field → cell of the row named ``name``."""
        rows = await self.query(what, ["name", *fields])
        row = next(r for r in rows if r[0][1] == name)
        return dict(zip(fields, row[1:], strict=True))


class _Master:
    def __init__(self, cfg: ConfigManager, rpc: FakeRpc) -> None:
        self.cfg = cfg
        self.rpc = rpc
