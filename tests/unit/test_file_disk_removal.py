"""A file disk's removal (corral.node.storage.file): gone from its path and
its instance directory at once, its blocks freed in the background; whatever
needs the space waits for that; leftovers of a dead noded unlinked at start."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from corral.disk_description import DiskDescription
from corral.node.storage import file as file_storage
from corral.node.storage.file import REMOVING, FileTemplate
from corral.paths import Paths
from tests.helpers.waiting import wait_until

MIB = 1024 * 1024


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    paths = Paths(tmp_path / "root")
    paths.file_storage_dir.mkdir(parents=True)
    return paths


def disk(name: str, size: int = 8) -> DiskDescription:
    return DiskDescription("file", ("loop", f"/srv/ganeti/file-storage/inst1/{name}"), size, name)


def hidden(paths: Paths) -> list[Path]:
    return list(paths.file_storage_dir.glob(f"{REMOVING}*"))


def test_removed_disk_is_gone_at_once_and_freed_later(paths: Paths) -> None:
    node = FileTemplate(paths)
    d0, d1 = disk("d0"), disk("d1")
    node.create(d0)
    node.create(d1)
    path = node.attach(d0)
    path.write_bytes(os.urandom(4 * MIB))
    node.remove(d0)
    # The path is free at once; the other disk keeps the instance directory.
    assert not path.exists() and node.attach(d1).exists()
    file_storage.settle()
    assert hidden(paths) == []
    # The same disk again, then the last one out takes the directory along.
    node.create(d0)
    node.remove(d0)
    node.remove(d1)
    assert not path.parent.exists()
    file_storage.settle()
    assert hidden(paths) == []
    # A disk already gone is fine (a retried removal).
    node.remove(d0)


def test_leftovers_of_a_dead_noded_unlinked(paths: Paths) -> None:
    left = paths.file_storage_dir / f"{REMOVING}0123456789abcdef"
    left.write_bytes(b"x" * MIB)
    kept = paths.file_storage_dir / "inst9" / "disk0"
    kept.parent.mkdir()
    kept.write_bytes(b"y")
    file_storage.remove_leftovers(paths)
    assert not left.exists() and kept.read_bytes() == b"y"


def test_settle_waits_for_an_unlink_whose_thread_has_not_started(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter that comes between a removal's registration and its thread's
    start waits for it (it once failed: "cannot join thread before it is started")."""
    real_start = threading.Thread.start
    go = threading.Event()

    def deferred_start(self: threading.Thread) -> None:
        if self.name != "disk-remove":
            real_start(self)
            return
        # The removal's thread starts only once the test says so.
        real_start(threading.Thread(target=lambda: (go.wait(), real_start(self))))

    monkeypatch.setattr(threading.Thread, "start", deferred_start)
    node = FileTemplate(paths)
    d0 = disk("d0")
    node.create(d0)
    node.remove(d0)
    outcome: list[object] = []

    def settle() -> None:
        try:
            file_storage.settle()
            outcome.append(hidden(paths))
        except Exception as err:
            outcome.append(err)

    waiter = threading.Thread(target=settle)
    real_start(waiter)

    def waiting() -> bool:
        frame = sys._current_frames().get(waiter.ident or 0)
        return frame is not None and frame.f_code.co_name == "wait"

    wait_until(lambda: outcome or waiting(), what="settle() waiting (or failing)")
    go.set()
    waiter.join()
    assert outcome == [[]]  # it waited, then the file was unlinked
