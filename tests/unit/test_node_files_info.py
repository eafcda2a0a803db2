"""noded's upload_file allow-list and node_info/node_verify, called in-process."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.crypto.certs import create_cluster_crypto
from corral.node.context import NodeContext
from corral.node.handlers.files import upload_file
from corral.node.handlers.info import node_info, node_verify
from corral.paths import Paths


@pytest.fixture
def ctx(tmp_path: Path) -> NodeContext:
    return NodeContext(paths=Paths(tmp_path), address="127.0.0.1", port=0)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_upload_ssconf_file(ctx: NodeContext) -> None:
    await upload_file(
        ctx, "/var/lib/ganeti/ssconf_cluster_name", b64(b"c1\n"), 0o444, None, None, 1000, 2000
    )
    target = ctx.paths.ssconf_file("cluster_name")
    st = target.stat()  # before reading, which may update atime
    assert stat.S_IMODE(st.st_mode) == 0o444
    assert (st.st_atime, st.st_mtime) == (1000, 2000)
    assert target.read_bytes() == b"c1\n"
    assert os.listdir(target.parent) == [target.name]  # no temporary files left


@pytest.mark.parametrize(
    "name",
    [
        "/etc/passwd",
        "/var/lib/ganeti/config.db",
        "/var/lib/ganeti/ssconf_../../x",
        "/var/lib/ganeti/sub/ssconf_x",
        "var/lib/ganeti/ssconf_cluster_name",
    ],
)
async def test_upload_refuses_other_files(ctx: NodeContext, name: str) -> None:
    with pytest.raises(errors.OpExecError, match="upload_file"):
        await upload_file(ctx, name, b64(b"x"), 0o644, None, None, None, None)
    assert not (ctx.paths.root / "etc").exists()


async def test_upload_certificate_and_ownership_by_id(ctx: NodeContext) -> None:
    uid, gid = os.getuid(), os.getgid()
    await upload_file(
        ctx, "/var/lib/ganeti/cluster-ca.pem", b64(b"pem"), 0o644, uid, gid, None, None
    )
    assert ctx.paths.ca_cert.read_bytes() == b"pem"


async def test_upload_rejects_bad_data_and_mode(ctx: NodeContext) -> None:
    name = "/var/lib/ganeti/cluster-domain-secret"
    with pytest.raises(errors.OpExecError, match="base64"):
        await upload_file(ctx, name, "not base64!", 0o600, None, None, None, None)
    with pytest.raises(errors.OpExecError, match="mode"):
        await upload_file(ctx, name, b64(b"x"), "0600", None, None, None, None)  # type: ignore[arg-type]
    with pytest.raises(errors.OpExecError, match="Unknown user"):
        await upload_file(ctx, name, b64(b"x"), 0o600, "no-such-user-xyz", None, None, None)


async def test_node_info(ctx: NodeContext) -> None:
    ctx.paths.file_storage_dir.mkdir(parents=True)
    info = await node_info(ctx, [["file", "/srv/ganeti/file-storage"]])
    assert 0 < info["memory_free"] <= info["memory_total"]
    assert info["memory_dom0"] == info["memory_total"] - info["memory_free"]
    assert info["cpu_total"] == os.cpu_count()
    assert info["cpu_nodes"] >= 1 and info["cpu_sockets"] >= 1
    [storage] = info["storage"]
    assert (storage["type"], storage["path"]) == ("file", "/srv/ganeti/file-storage")
    assert 0 <= storage["free"] <= storage["total"]
    with pytest.raises(errors.OpExecError, match="storage info"):
        await node_info(ctx, [["file", "/does/not/exist"]])
    with pytest.raises(errors.OpExecError, match="Invalid storage unit"):
        await node_info(ctx, ["/srv/ganeti/file-storage"])


async def test_node_verify(ctx: NodeContext) -> None:
    create_cluster_crypto(ctx.paths, "c", "node1", "127.0.0.1")
    result = await node_verify(ctx, {"version": None, "future-check": 1}, "node1")
    assert result["node_name"] == "node1"
    assert result["version"] == C.PROTOCOL_VERSION
    assert result["certificate"]["subject"] == "node1"
    assert abs(result["time"] - __import__("time").time()) < 5
