"""The node resource's live fields from real node daemons: what a node
reports, RS_NODATA for a node that does not answer, RS_OFFLINE for one marked
offline."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral.config.manager import ConfigManager, ConfigTransaction
from corral.objects import Node
from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.multinode import MASTERD, add_node
from tests.helpers.noded import daemon_env
from tests.helpers.offline_config import change_offline

LIVE = ["bootid", "ctotal", "cnos", "cnodes", "csockets", "dtotal", "dfree", "spfree", "sptotal"]
LIVE += ["mtotal", "mfree", "mnode"]
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("nodes")) as cluster:
        yield cluster


def live_cells(cl: TestCluster) -> dict[str, dict[str, list[Any]]]:
    """node name → live field → cell."""
    with cl.client() as client:
        data = client.query("node", ["name", *LIVE])["data"]
    return {row[0][1]: dict(zip(LIVE, row[1:], strict=True)) for row in data}


def set_offline(cl: TestCluster, name: str) -> None:
    """Mark a node offline in the configuration (masterd stopped meanwhile)."""
    stop_daemon(cl.paths, MASTERD)

    def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
        changed = cfg.lookup(Node, name).copy_for_update()
        assert isinstance(changed, Node)
        changed.offline = True
        tx.update(changed)

    change_offline(cl.paths, edit)
    start_daemon([sys.executable, "-m", "corral.daemons.masterd"], daemon_env(cl.paths))


def test_live_fields_are_what_the_node_reports(cl: TestCluster) -> None:
    cells = live_cells(cl)[cl.node_name]
    values = {name: cell[1] for name, cell in cells.items() if cell[0] == C.RS_NORMAL}
    # Spindles exist only on LVM physical volumes, which Corral does not use.
    assert cells["spfree"] == cells["sptotal"] == [C.RS_NODATA, None]
    assert set(values) == set(LIVE) - {"spfree", "sptotal"}
    assert values["bootid"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert values["ctotal"] == values["cnos"] == os.cpu_count()
    assert values["cnodes"] >= 1 and values["csockets"] >= 1
    st = os.statvfs(cl.paths.file_storage_dir)
    assert values["dtotal"] == st.f_blocks * st.f_frsize // MIB
    assert 0 <= values["dfree"] <= values["dtotal"]
    meminfo = Path("/proc/meminfo").read_text().split()
    assert values["mtotal"] == int(meminfo[meminfo.index("MemTotal:") + 1]) // 1024
    assert 0 <= values["mfree"] <= values["mtotal"]
    assert 0 <= values["mnode"] <= values["mtotal"]


def test_silent_node_has_no_data_and_offline_node_is_offline(
    cl: TestCluster, tmp_path: Path
) -> None:
    node2 = add_node(cl, tmp_path / "node2")
    try:
        assert live_cells(cl)["node2.example.com"]["ctotal"] == [C.RS_NORMAL, os.cpu_count()]
    finally:
        node2.stop()
    cells = live_cells(cl)
    assert cells["node2.example.com"] == {name: [C.RS_NODATA, None] for name in LIVE}
    assert cells[cl.node_name]["mtotal"][0] == C.RS_NORMAL
    set_offline(cl, "node2.example.com")
    cells = live_cells(cl)
    assert cells["node2.example.com"] == {name: [C.RS_OFFLINE, None] for name in LIVE}
