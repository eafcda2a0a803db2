"""corral-rapi runs as its own unprivileged user, which can talk luxi to
masterd but cannot read the cluster's private keys, its domain secret or its
configuration.

Tested as that user: ``setpriv`` with the RAPI process's own uid, gid and
groups.  The cluster lives under a directory whose parents everyone may
traverse (not pytest's 0700 tmp_path), and control reads show that a
world-readable file in the same place is readable: a refusal comes from the
cluster's own modes, not from the test's directories.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.paths import Paths
from corral.process.privileges import DEFAULT_RAPI_USER
from tests.helpers.cluster import TestCluster, running_cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")


@pytest.fixture
def open_base() -> Iterator[Path]:
    """A directory under /tmp that every user may traverse, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="corral-privsep-", dir="/tmp"))
    try:
        base.chmod(0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def private_files(paths: Paths) -> list[Path]:
    """What the RAPI must not read: keys, the domain secret, the configuration."""
    db = paths.config_db
    return [
        paths.ca_key,
        paths.server_pem,
        paths.client_pem,
        paths.rapi_pem,
        paths.cluster_domain_secret,
        db,
        db.with_name(db.name + "-wal"),
        db.with_name(db.name + "-shm"),
    ]


def rapi_credentials(cl: TestCluster) -> dict[str, list[int]]:
    """The Uid, Gid and Groups lines of the running corral-rapi process."""
    pid = int(cl.paths.pid_file("corral-rapi").read_text())
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines)
    return {key: [int(v) for v in fields[key].split()] for key in ("Uid", "Gid", "Groups")}


def as_rapi(creds: dict[str, list[int]], *cmd: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``cmd`` with the RAPI process's real and effective ids and groups."""
    groups = ["--groups=" + ",".join(map(str, creds["Groups"]))] if creds["Groups"] else []
    ids = [f"--reuid={creds['Uid'][0]}", f"--regid={creds['Gid'][0]}"]
    return subprocess.run(
        ["setpriv", *ids, *(groups or ["--clear-groups"]), *cmd],
        capture_output=True,
        timeout=60,
        check=False,
    )


def assert_denied(creds: dict[str, list[int]], path: Path) -> None:
    assert path.exists(), path
    result = as_rapi(creds, "cat", str(path))
    mode = oct(path.stat().st_mode & 0o777)
    assert result.returncode != 0, f"{path} ({mode}) is readable by the RAPI user"
    assert b"Permission denied" in result.stderr, (path, result.stderr)


def assert_readable(creds: dict[str, list[int]], path: Path) -> None:
    result = as_rapi(creds, "cat", str(path))
    assert result.returncode == 0, (path, result.stderr)
    assert result.stdout == path.read_bytes()


def test_rapi_runs_as_its_own_user_and_uses_luxi(open_base: Path) -> None:
    user = pwd.getpwnam(DEFAULT_RAPI_USER)
    with running_cluster(open_base) as cl:
        creds = rapi_credentials(cl)
        assert creds["Uid"] == [user.pw_uid] * 4  # real, effective, saved, fs
        assert creds["Gid"] == [user.pw_gid] * 4
        assert 0 not in creds["Groups"]
        assert user.pw_uid != 0 and user.pw_gid != 0
        # Dropped, it still reaches masterd: /2/info is a luxi query.
        context = ssl.create_default_context(cafile=str(cl.rapi_ca))
        with urllib.request.urlopen(f"{cl.rapi_url}/2/info", context=context, timeout=30) as ans:
            info = json.loads(ans.read())
        assert info["name"] == cl.cluster_name
        assert info["master"] == cl.node_name


def test_rapi_user_cannot_read_keys_secret_or_config(open_base: Path) -> None:
    with running_cluster(open_base) as cl:
        creds = rapi_credentials(cl)
        data_dir = cl.paths.data_dir
        # Control: the way to the data directory is open to the RAPI user.
        beside = data_dir.parent / "corral-privsep-control"
        beside.write_text("world-readable\n")
        beside.chmod(0o644)
        assert_readable(creds, beside)

        listing = as_rapi(creds, "ls", str(data_dir))
        assert listing.returncode != 0 and b"Permission denied" in listing.stderr
        for path in [*private_files(cl.paths), cl.paths.queue_dir / "queue.db"]:
            assert_denied(creds, path)

        # Ganeti's data directory is world-traversable (0755); the private files
        # must stay private by their own modes, while the public ones next to
        # them (ssconf, the cluster CA's certificate) become readable.
        mode = data_dir.stat().st_mode & 0o777
        data_dir.chmod(0o755)
        try:
            assert_readable(creds, cl.paths.ssconf_file("cluster_name"))
            assert_readable(creds, cl.paths.ca_cert)
            queue = cl.paths.queue_db
            for path in [*private_files(cl.paths), queue, queue.with_name("queue.db-wal")]:
                assert_denied(creds, path)
        finally:
            data_dir.chmod(mode)
