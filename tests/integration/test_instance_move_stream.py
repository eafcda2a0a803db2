"""The target's side of ``gnt-instance move`` on real nodeds: the disks a
transfer creates are kept or removed when it ends, unused transfers expire,
dead transfers and unfinished disk removals are undone when noded starts
again (the bytes move on the import/export engine: test_instance_move.py)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.node.storage.file import REMOVING
from corral.paths import Paths
from corral.process.daemons import start_daemon
from corral.rpc.client import RpcClient
from tests.helpers.cluster import unique_loopback
from tests.helpers.noded import Noded, daemon_env, free_port, make_node_root, noded_cmd, start_noded
from tests.helpers.waiting import wait_until, wait_until_async

MIB = 1024 * 1024


class Pair:
    def __init__(self, source: Noded, target: Noded) -> None:
        self.source, self.target = source, target


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("stream")
    src_ip, dst_ip = unique_loopback(), unique_loopback()
    port = free_port(src_ip)
    src_paths = make_node_root(root / "src", node_ip=src_ip)
    dst_paths = make_node_root(
        root / "dst", node_name="node2.example.com", node_ip=dst_ip, cluster=src_paths
    )
    source = start_noded(src_paths, src_ip, port)
    try:
        target = start_noded(dst_paths, dst_ip, port)
        target.name = "node2.example.com"
        try:
            yield Pair(source, target)
        finally:
            target.stop()
    finally:
        source.stop()


def disk(name: str, index: int, size_mib: int) -> dict[str, Any]:
    return {
        "template": "file",
        "logical_id": ["loop", f"/srv/ganeti/file-storage/{name}/disk{index}"],
        "size": size_mib,
        "uuid": f"{name}-{index}",
        "iv_name": f"disk/{index}",
        "name": None,
        "mode": "rw",
    }


def local(paths: Paths, desc: dict[str, Any]) -> Path:
    return paths.from_wire(desc["logical_id"][1])


def write_source(paths: Paths, desc: dict[str, Any], content: bytes) -> None:
    path = local(paths, desc)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


async def call(node: Noded, name: str, *args: Any) -> Any:
    async with RpcClient(node.paths, node.port) as rpc:
        res = await rpc.call_one(node.name, node.address, name, list(args))
    res.raise_if_failed(name)
    return res.payload


async def test_failed_transfer_removes_target_disks(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 2), disk(name, 1, 1)]
    tid = secrets.token_hex(16)
    await call(pair.target, "transfer_prepare", tid, disks, 60)
    assert all(local(pair.target.paths, d).exists() for d in disks)
    assert list((pair.target.paths.data_dir / "transfers").glob(f"{tid}.json"))
    assert await call(pair.target, "transfer_finish", tid, False) == {"received": True}
    assert not any(local(pair.target.paths, d).exists() for d in disks)
    assert not list((pair.target.paths.data_dir / "transfers").glob(f"{tid}.json"))
    # A retried clean-up is fine; the transfer is gone.
    assert await call(pair.target, "transfer_finish", tid, False) == {"received": False}
    assert await call(pair.target, "transfer_touch", tid) is False


async def test_kept_transfer_keeps_its_disks(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1)]
    tid = secrets.token_hex(16)
    await call(pair.target, "transfer_prepare", tid, disks, 60)
    assert await call(pair.target, "transfer_touch", tid) is True
    local(pair.target.paths, disks[0]).write_bytes(b"data" * (MIB // 4))
    assert await call(pair.target, "transfer_finish", tid, True) == {"received": True}
    assert local(pair.target.paths, disks[0]).read_bytes() == b"data" * (MIB // 4)
    assert not list((pair.target.paths.data_dir / "transfers").glob(f"{tid}.json"))
    local(pair.target.paths, disks[0]).unlink()


async def test_existing_target_disk_is_refused_and_kept(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1), disk(name, 1, 1)]
    write_source(pair.target.paths, disks[1], b"keep me")
    with pytest.raises(Exception, match="already exists"):
        await call(pair.target, "transfer_prepare", secrets.token_hex(16), disks, 60)
    assert not local(pair.target.paths, disks[0]).exists()
    assert local(pair.target.paths, disks[1]).read_bytes() == b"keep me"


async def test_unused_transfer_expires(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1)]
    await call(pair.target, "transfer_prepare", secrets.token_hex(16), disks, 0.5)
    path = local(pair.target.paths, disks[0])
    assert path.exists()
    await wait_until_async(lambda: not path.exists(), timeout=30, what="expired disk removed")


async def test_dead_transfer_and_removal_undone_at_start(pair: Pair, tmp_path: Path) -> None:
    ip = unique_loopback()
    paths = make_node_root(tmp_path / "n3", node_ip=ip, cluster=pair.source.paths)
    node = start_noded(paths, ip, pair.source.port)
    node.name = "node3"
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1)]
    try:
        await call(node, "transfer_prepare", secrets.token_hex(16), disks, 600)
        assert local(paths, disks[0]).exists()
        pid = node.pid
        assert pid is not None
        os.kill(pid, 9)
        wait_until(lambda: node.pid is None, timeout=30, what="noded dead")
        assert local(paths, disks[0]).exists()
        # A disk file whose removal the dead noded had begun.
        removing = paths.file_storage_dir / f"{REMOVING}0123456789abcdef"
        removing.write_bytes(b"x" * MIB)
        start_daemon(noded_cmd(ip, node.port), daemon_env(paths), timeout=30)
        assert not local(paths, disks[0]).exists()
        assert not list((paths.data_dir / "transfers").glob("*.json"))
        assert not removing.exists()
    finally:
        node.stop()
