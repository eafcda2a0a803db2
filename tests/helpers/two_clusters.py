"""Two Corral clusters on one machine for inter-cluster moves.

Each has its own root, loopback address and corral-rapi (started by
``gnt-cluster init``) with a user allowed to write; both get one cluster
domain secret through ``gnt-cluster renew-crypto --cluster-domain-secret``,
as an administrator sets them up.  Typical use::

    with two_clusters(tmp_path) as (src, dest):
        add_instance(src, "localhost", data)     # the destination resolves names
        result = corral_move(src, dest, tmp_path, "localhost")
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.osdef import make_os

RAPI_USER = ("mover", "m0ver-pw")
OS_NAME = "dumper"
MIB = 1024 * 1024
# An OS whose export script streams the disk and whose import script restores
# it (the transfer sees the scripts' streams, not the disks).
DUMPER_SCRIPTS = {
    "export": '#!/bin/sh\nset -e\nexec dd if="$EXPORT_DEVICE" bs=1M status=none\n',
    "import": '#!/bin/sh\nset -e\nexec dd of="$IMPORT_DEVICE" bs=1M conv=notrunc status=none\n',
}


def gated_export(gate: Path) -> str:
    """An export script that sends 64 KiB, waits for ``gate`` to exist, then the rest."""
    return (
        "#!/bin/sh\nset -e\n"
        'dd if="$EXPORT_DEVICE" bs=64K count=1 status=none\n'
        f"while [ ! -e {gate} ]; do sleep 0.05; done\n"
        'dd if="$EXPORT_DEVICE" bs=64K skip=1 status=none\n'
    )


def set_domain_secret(cl: TestCluster, secret: str, work: Path) -> None:
    """``gnt-cluster renew-crypto --cluster-domain-secret``: ``secret`` on every node."""
    path = work / f"cds-{secrets.token_hex(4)}"
    path.write_text(secret + "\n")
    result = cl.gnt("cluster", "renew-crypto", f"--cluster-domain-secret={path}", "--force")
    assert result.rc == 0, result.stderr
    path.unlink()


@contextmanager
def two_clusters(
    tmp_path: Path, same_secret: bool = True
) -> Iterator[tuple[TestCluster, TestCluster]]:
    """A source and a destination cluster, both with the OS ``dumper``, a RAPI
    writer and (``same_secret``) one domain secret; stopped afterwards."""
    with ExitStack() as stack:
        clusters = [
            stack.enter_context(running_cluster(tmp_path / side)) for side in ("src", "dst")
        ]
        for cl in clusters:
            make_os(cl.paths, OS_NAME, scripts=DUMPER_SCRIPTS)
            cl.add_rapi_user(*RAPI_USER, "write")
        if same_secret:
            secret = secrets.token_hex(20)
            for cl in clusters:
                set_domain_secret(cl, secret, tmp_path)
        yield clusters[0], clusters[1]


def add_instance(cl: TestCluster, name: str, data: bytes, *extra: str) -> Path:
    """A stopped fake-hypervisor instance with one file disk holding ``data``;
    the disk's file."""
    size = max(1, -(-len(data) // MIB))
    result = cl.gnt(
        "instance", "add", "-t", "file", "--disk", f"0:size={size}m", "-o",
        f"{OS_NAME}+default", "--no-name-check", "--no-ip-check", "--no-start", *extra, name,
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    disk = disk_file(cl, name)
    with disk.open("r+b") as out:
        out.write(data)
    return disk


def disk_file(cl: TestCluster, name: str, index: int = 0) -> Path:
    """The file of an instance's file disk ``index``."""
    directory = cl.paths.root / "srv" / "ganeti" / "file-storage" / name
    (path,) = directory.glob(f"*.disk{index}")
    return path


def write_password(tmp_path: Path) -> Path:
    """The RAPI user's password in a file, as move-instance reads it."""
    path = tmp_path / "rapi-password"
    path.write_text(RAPI_USER[1] + "\n")
    os.chmod(path, 0o600)
    return path


def move_args(src: TestCluster, dest: TestCluster, tmp_path: Path) -> list[str]:
    """move-instance's connection options for the two clusters (each its own CA)."""
    password = write_password(tmp_path)
    return [
        f"--src-ca-file={src.rapi_ca}",
        f"--dest-ca-file={dest.rapi_ca}",
        f"--src-username={RAPI_USER[0]}",
        f"--src-password-file={password}",
        f"--dest-primary-node={dest.node_name}",
    ]


def corral_move(
    src: TestCluster, dest: TestCluster, tmp_path: Path, *names: str, extra: tuple[str, ...] = ()
) -> Result:
    """Corral's move-instance of ``names`` from ``src`` to ``dest`` (by address)."""
    argv = [sys.executable, "-m", "corral.tools.move_instance", "-v",
            *move_args(src, dest, tmp_path), *extra, src.node_ip, dest.node_ip, *names]  # fmt: skip
    proc = subprocess.run(
        argv, env=src.env, capture_output=True, text=True, timeout=300, check=False
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
