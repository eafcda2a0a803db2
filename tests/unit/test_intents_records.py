"""The records of operations under way (corral.cmdlib.intents): one format
with a kind per operation, and the records older Corral wrote (adds, no
kind, file disks named by their path) still read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from corral.cmdlib import intents
from corral.paths import Paths
from corral.storage.disk import DiskDescription
from corral.storage.names import DT_FILE


def test_each_kind_round_trips(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    move = intents.Intent(
        "u1", "inst1", "n2", "fake", (DiskDescription(DT_FILE, ("loop", "/d"), 1, "d").to_wire(),),
        kind=intents.MOVE, source="n1", restart=True, transfer="t" * 32,
    )  # fmt: skip
    export = intents.Intent("u2", "inst2", "n2", "fake", kind=intents.EXPORT, export="inst2")
    written = [asyncio.run(intents.write(paths, it)) for it in (move, export)]
    assert [p.parent for p in written] == [intents.intent_dir(paths)] * 2
    assert written[0].name.startswith("u1.move.") and written[1].name.startswith("u2.export.")
    assert [it for _, it in intents.pending(paths)] == [move, export]
    for path in written:
        intents.drop(path)
    assert intents.pending(paths) == []


def test_a_record_rewritten_in_place(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    it = intents.Intent("u3", "inst3", "n2", "fake", kind=intents.FAILOVER, phase=intents.STOPPING)
    path = asyncio.run(intents.write(paths, it))
    later = intents.Intent(
        "u3", "inst3", "n2", "fake", kind=intents.FAILOVER, phase=intents.STARTING
    )
    assert asyncio.run(intents.write(paths, later, path)) == path
    assert intents.pending(paths) == [(path, later)]


def test_an_older_corral_add_record_reads_as_an_add(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    directory = intents.intent_dir(paths)
    directory.mkdir(parents=True)
    old = {"uuid": "u4", "name": "inst4", "node": "n1", "hypervisor": "fake",
           "disks": ["/srv/ganeti/file-storage/inst4/d.file.disk0"]}  # fmt: skip
    (directory / "u4.json").write_text(json.dumps(old))
    ((path, it),) = intents.pending(paths)
    assert path.name == "u4.json" and it.kind == intents.ADD
    assert it.disks[0]["template"] == DT_FILE
    assert it.disks[0]["logical_id"][-1] == old["disks"][0]


def test_unreadable_records_are_kept(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    directory = intents.intent_dir(paths)
    directory.mkdir(parents=True)
    (directory / "broken.json").write_text("{")
    assert intents.pending(paths) == []
    assert (directory / "broken.json").exists()
