"""The rules behind gnt-node modify and gnt-group assign-nodes, on a real
configuration store: the master candidate pool, and instances split across
node groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corral import storage_names as N
from corral.cmdlib.group import split_instances
from corral.cmdlib.node_roles import Role, candidate_stats, fill_candidate_pool
from corral.config.manager import ConfigManager, ConfigTransaction, initial_change
from corral.objects import Cluster, Instance, Node, NodeGroup
from corral.state.sqlite.config import SqliteConfigStore


async def _config(
    tmp_path: Path, *nodes: Node, groups: list[NodeGroup], instances: tuple[Instance, ...] = ()
) -> ConfigManager:
    cluster = Cluster(name="c.example.com", master_node=nodes[0].uuid, master_ip="127.0.0.9")
    objects = [cluster, *groups, *nodes, *instances]
    SqliteConfigStore.create(tmp_path / "config.db", initial_change(objects))
    return await ConfigManager.open(SqliteConfigStore(tmp_path / "config.db"))


def _node(name: str, group: NodeGroup, **flags: Any) -> Node:
    return Node(name=name, primary_ip="127.0.0.1", secondary_ip="127.0.0.1", group=group.uuid,
                **flags)  # fmt: skip


class _Unit:
    """What fill_candidate_pool uses of a logical unit."""

    def __init__(self, cfg: ConfigManager) -> None:
        self.cfg = cfg
        self.tx: ConfigTransaction = cfg.transaction()
        self.infos: list[str] = []

    def log_info(self, message: str) -> None:
        self.infos.append(message)


async def test_demoting_a_candidate_needs_another(tmp_path: Path) -> None:
    group = NodeGroup(name="default")
    master = _node("n1", group)
    second = _node("n2", group)
    spare = _node("n3", group, master_candidate=False)
    cfg = await _config(tmp_path, master, second, spare, groups=[group])
    # Without n2: one candidate (the master), two wanted (master and n3 could be).
    assert candidate_stats(cfg, [second.uuid]) == (1, 2, 2)
    demoted = second.model_copy(update={"master_candidate": False, "drained": True})
    unit = _Unit(cfg)
    unit.tx.update(demoted)
    fill_candidate_pool(unit, demoted)  # type: ignore[arg-type]
    await unit.tx.commit()
    assert unit.infos == ["Promoted nodes to master candidate role: n3"]
    assert [Role.of(n) for n in cfg.nodes()] == [Role.CANDIDATE, Role.DRAINED, Role.CANDIDATE]


async def test_assigning_a_mirrored_instances_node_splits_it(tmp_path: Path) -> None:
    default, rack = NodeGroup(name="default"), NodeGroup(name="rack")
    n1, n2 = _node("n1", default), _node("n2", default)
    mirrored = Instance(name="db", primary_node=n1.uuid, secondary_nodes=[n2.uuid],
                        os="x", hypervisor="fake", disk_template=N.DT_MIRRORED)  # fmt: skip
    shared = Instance(name="web", primary_node=n2.uuid, os="x", hypervisor="fake",
                      disk_template=N.DT_FILE)  # fmt: skip
    cfg = await _config(tmp_path, n1, n2, groups=[default, rack], instances=(mirrored, shared))
    assert split_instances(cfg, {n2.uuid: rack.uuid}) == (["db"], [])
    assert split_instances(cfg, {n1.uuid: rack.uuid, n2.uuid: rack.uuid}) == ([], [])
