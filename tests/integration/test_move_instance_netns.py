"""Corral's move-instance between two clusters that each live in a network
namespace of their own (addresses that exist only inside the namespaces),
run from a third namespace that reaches both RAPIs: the disk data crosses
from one cluster's noded to the other's over the bridge."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import testbed
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.netns import NetnsBed
from tests.helpers.osdef import make_os
from tests.helpers.two_clusters import DUMPER_SCRIPTS, OS_NAME, RAPI_USER

pytestmark = pytest.mark.slow

NAME = "localhost"  # resolvable everywhere, as the destination's name check wants
MIB = 1024 * 1024


@dataclass(frozen=True)
class Slice:
    """One node of a NetnsBed as a whole (one-node) bed's network."""

    bed: NetnsBed
    node: int

    def address(self, node: int) -> str:
        return self.bed.address(self.node + node - 1)

    def wrap(self, node: int, argv: list[str]) -> list[str]:
        return self.bed.wrap(self.node + node - 1, argv)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def prepare(cluster: testbed.Testbed, secret: Path) -> None:
    paths = cluster.master.paths
    make_os(paths, OS_NAME, scripts=DUMPER_SCRIPTS)
    paths.rapi_users_file.parent.mkdir(parents=True, exist_ok=True)
    paths.rapi_users_file.write_text(f"{RAPI_USER[0]} {{cleartext}}{RAPI_USER[1]} write\n")
    _ok(cluster.gnt("cluster", "renew-crypto", f"--cluster-domain-secret={secret}", "--force"))


def test_move_between_namespaces(tmp_path: Path) -> None:
    secret = tmp_path / "cds"
    secret.write_text(os.urandom(20).hex() + "\n")
    password = tmp_path / "password"
    password.write_text(RAPI_USER[1] + "\n")
    with NetnsBed(3) as net:
        src = testbed.up(tmp_path / "src", 1, network=Slice(net, 1), init_args=PERMISSIVE_IPOLICY)
        try:
            dest = testbed.up(
                tmp_path / "dst", 1, network=Slice(net, 2), init_args=PERMISSIVE_IPOLICY
            )
            try:
                _move(net, src, dest, secret, password)
            finally:
                dest.down()
        finally:
            src.down()


def _move(
    net: NetnsBed, src: testbed.Testbed, dest: testbed.Testbed, secret: Path, password: Path
) -> None:
    for cluster in (src, dest):
        prepare(cluster, secret)
    _ok(src.gnt(
        "instance", "add", "-t", "file", "--disk", "0:size=2m", "-o", f"{OS_NAME}+default",
        "--no-ip-check", "--no-start", NAME,
    ))  # fmt: skip
    data = os.urandom(2 * MIB)
    storage = Path("srv", "ganeti", "file-storage", NAME)
    (disk,) = (src.master.paths.root / storage).glob("*.disk0")
    disk.write_bytes(data)
    argv = [
        sys.executable, "-m", "corral.tools.move_instance", "-v",
        f"--src-ca-file={src.master.paths.rapi_pem}",
        f"--dest-ca-file={dest.master.paths.rapi_pem}",
        f"--src-username={RAPI_USER[0]}", f"--src-password-file={password}",
        f"--dest-primary-node={dest.master.name}",
        src.master.address, dest.master.address, NAME,
    ]  # fmt: skip
    # From the third namespace: the clusters' addresses exist only there.
    result = subprocess.run(
        net.wrap(3, argv), capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert src.master.address.startswith("10.213.0.")
    assert f"Sending disk 0 to {dest.master.address}:" in result.stderr
    assert _ok(src.gnt("instance", "list", "--no-headers", "-o", "name")) == ""
    assert _ok(dest.gnt("instance", "list", "--no-headers", "-o", "name")) == f"{NAME}\n"
    (moved,) = (dest.master.paths.root / storage).glob("*.disk0")
    assert moved.read_bytes()[: len(data)] == data
