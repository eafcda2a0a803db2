"""A standing-by candidate's configuration kept warm (corral.services.config_follower):
it follows another master's commits, and is taken over caught up."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import errors
from corral.config.manager import ConfigManager, initial_change
from corral.objects import Cluster, Node
from corral.services.config_follower import ConfigFollower
from corral.state.ports import ConfigChange, SerialChange
from corral.state.sqlite.config import SqliteConfigStore
from tests.helpers.waiting import wait_until_async
from tests.unit.test_config_store import build_objects


def rows(cfg: ConfigManager) -> dict[str, list[dict[str, object]]]:
    return {
        cls.TABLE: sorted((o.model_dump() for o in cfg.table(cls)), key=lambda r: str(r["uuid"]))
        for cls in (Cluster, Node)
    }


async def test_the_follower_takes_over_what_the_master_committed(tmp_path: Path) -> None:
    path = tmp_path / "config.db"
    cluster, group, master_node, other = build_objects()
    SqliteConfigStore.create(path, initial_change([cluster, group, master_node, other]))
    store = SqliteConfigStore(path)
    master = await ConfigManager.open(store)
    follower = ConfigFollower(store)
    follower.start()
    try:
        await wait_until_async(lambda: follower.serial == 1, 10, "the follower loaded")
        for tag in ("a", "b"):
            tx = master.transaction()
            updated = master.cluster.copy_for_update()
            assert isinstance(updated, Cluster)
            updated.tags = [*updated.tags, tag]
            tx.update(updated)
            await tx.commit()
        await wait_until_async(lambda: follower.serial == 3, 10, "the follower followed")
        tx = master.transaction()  # one more while it is being taken over
        tx.remove(master.lookup(Node, other.name))
        await tx.commit()
        taken = await follower.take()
        assert taken.serial == master.serial == 4
        assert taken.cluster.tags == ["initial", "a", "b"]
        assert taken.find(Node, other.name) is None
        assert rows(taken) == rows(master)
        assert follower.followed == 3  # applied, not loaded again
    finally:
        await follower.stop()
        await store.close()


async def test_a_change_out_of_order_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.db"
    SqliteConfigStore.create(path, initial_change(list(build_objects())))
    store = SqliteConfigStore(path)
    cfg = await ConfigManager.open(store)
    try:
        with pytest.raises(errors.ConfigurationError, match="does not follow serial 1"):
            cfg.follow(SerialChange(3, ConfigChange()))
        assert cfg.serial == 1
    finally:
        await store.close()
