"""noded acts only on paths inside the file storage directories (issue 8, item 8).

A real noded, called over mutual TLS as masterd calls it: disk calls take disk
descriptions (issue 10, item 3); one naming a path outside the storage
directory is refused with a clear message and changes nothing, symbolic
links out of it included.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from corral.disk_description import DiskDescription
from corral.rpc.calls_instance import hypervisor_info
from corral.rpc.calls_node import node_info
from corral.rpc.calls_os import instance_os_add
from corral.rpc.calls_storage import (
    blockdev_create,
    blockdev_grow,
    blockdev_remove,
    blockdev_rename,
)
from corral.rpc.declare import Request
from corral.rpc.result import RpcResult
from corral.rpc.wire import DiskWire
from tests.helpers.noded import Noded, make_node_root, running_noded
from tests.helpers.osdef import make_os

STORAGE = "/srv/ganeti/file-storage"
OUTSIDE = f"is outside the file storage directory {STORAGE}"

R = TypeVar("R")


@pytest.fixture(scope="module")
def noded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Noded]:
    paths = make_node_root(tmp_path_factory.mktemp("node"))
    with running_noded(paths) as node:
        yield node


def desc(path: str, size: int = 1, template: str = "file") -> DiskWire:
    """A disk description naming ``path`` (what masterd sends)."""
    return DiskDescription(template, ("loop", path), size, "uuid-1", "disk/0").to_wire()


async def call(noded: Noded, request: Request[R]) -> RpcResult[R]:
    async with noded.client() as rpc:
        return await rpc.result(noded.target, request)


def refused(result: RpcResult[Any], text: str = OUTSIDE) -> str:
    assert result.failed and not result.offline, result
    message = str(result.fail_msg)
    assert text in message, message
    assert "Traceback" not in message
    return message


async def test_disks_inside_the_storage_directory_work(noded: Noded) -> None:
    disk = f"{STORAGE}/inst1.example.com/disk0"
    assert not (await call(noded, blockdev_create(desc(disk)))).failed
    assert noded.paths.from_wire(disk).stat().st_size == 1024 * 1024
    assert not (await call(noded, blockdev_grow(desc(disk), 2))).failed
    assert not (await call(noded, blockdev_remove(desc(disk, 2)))).failed
    assert not noded.paths.from_wire(disk).exists()
    info = await call(noded, hypervisor_info("fake", ["file", STORAGE]))
    assert info.payload["storage_total"] > 0


@pytest.mark.parametrize(
    "path",
    [
        "/var/lib/ganeti/config.db.new",
        f"{STORAGE}/../../../var/lib/ganeti/x",  # ".." out of it
        "/srv/ganeti/file-storage-other/x",  # a name that only starts like it
    ],
)
async def test_disk_calls_outside_are_refused_and_change_nothing(noded: Noded, path: str) -> None:
    local = noded.paths.from_wire(path)
    message = refused(await call(noded, blockdev_create(desc(path))))
    assert message.startswith(f"Path {path} ")
    assert not local.exists()
    victim = noded.paths.server_pem
    before = victim.read_bytes()
    refused(await call(noded, blockdev_remove(desc(noded.paths.to_wire(victim)))))
    refused(await call(noded, blockdev_grow(desc(noded.paths.to_wire(victim)), 64)))
    assert victim.read_bytes() == before


async def test_a_symbolic_link_out_of_the_storage_directory_is_refused(noded: Noded) -> None:
    link = noded.paths.file_storage_dir / "evil"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(noded.paths.data_dir)
    try:
        victim = noded.paths.server_pem
        refused(await call(noded, blockdev_remove(desc(f"{STORAGE}/evil/server.pem"))))
        assert victim.exists()
        refused(await call(noded, blockdev_create(desc(f"{STORAGE}/evil/new"))))
        assert not (noded.paths.data_dir / "new").exists()
    finally:
        link.unlink()


async def test_renames_outside_are_refused(noded: Noded) -> None:
    inside = noded.paths.file_storage_dir / "inst2.example.com" / "disk0"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"data")
    disk = desc(f"{STORAGE}/inst2.example.com/disk0")
    new_outside = noded.paths.data_dir / "moved"
    refused(await call(noded, blockdev_rename([(disk, ["loop", "/var/lib/ganeti/moved"])])))
    assert inside.exists() and not new_outside.exists()
    stolen = [(desc("/var/lib/ganeti/config.db"), ["loop", f"{STORAGE}/stolen"])]
    refused(await call(noded, blockdev_rename(stolen)))
    assert not (noded.paths.file_storage_dir / "stolen").exists()
    # The storage directory itself is not a disk.
    refused(
        await call(noded, blockdev_rename([(desc(STORAGE), ["loop", f"{STORAGE}/x"])])),
        f"Path {STORAGE} is a file storage directory, not a path inside one",
    )
    # Free space: only of a storage directory (and none is created elsewhere).
    refused(await call(noded, hypervisor_info("fake", ["file", "/var/lib/ganeti/newdir"])))
    assert not (noded.paths.data_dir / "newdir").exists()
    refused(await call(noded, node_info([["file", "/etc"]])))


async def test_os_scripts_get_no_disk_outside(noded: Noded, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    make_os(
        noded.paths, "marker", variants=None, scripts={"create": f"#!/bin/sh\ntouch {marker}\n"}
    )
    disk = {"uuid": "u", "size": 1, "mode": "rw", "name": None, "backend_type": "file:loop"}
    inst: dict[str, Any] = {
        "name": "inst3.example.com",
        "os": "marker",
        "osspec": {"name": "marker", "params": {}},
        "hypervisor": "fake",
        "memory": 128,
        "vcpus": 1,
        "disks": [{**disk, "path": "/etc/shadow"}],
    }
    # A disk without a description (no declaration makes it) is refused at noded's door.
    refused(
        await call(noded, Request(instance_os_add, [inst, False, 0])),
        "Invalid argument inst.disks[0].description of instance_os_add: Field required",
    )
    inst["disks"] = [{**disk, "path": f"{STORAGE}/ok", "description": desc("/etc/shadow")}]
    refused(await call(noded, Request(instance_os_add, [inst, False, 0])))
    assert not marker.exists()


async def test_the_clusters_own_storage_directory_counts(noded: Noded) -> None:
    """A directory given to ``gnt-cluster init --file-storage-dir`` (in ssconf)."""
    ssconf = noded.paths.ssconf_file("file_storage_dir")
    ssconf.write_text("/srv/custom-storage\n")
    try:
        disk = "/srv/custom-storage/inst4.example.com/disk0"
        assert not (await call(noded, blockdev_create(desc(disk)))).failed
        assert not (await call(noded, blockdev_remove(desc(disk)))).failed
        message = refused(
            await call(noded, blockdev_create(desc("/srv/x"))),
            f"outside the file storage directory {STORAGE} or /srv/custom-storage",
        )
        assert message == (
            f"Path /srv/x is outside the file storage directory {STORAGE} or /srv/custom-storage"
        )
    finally:
        ssconf.unlink()
