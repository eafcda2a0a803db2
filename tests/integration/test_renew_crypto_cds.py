"""gnt-cluster renew-crypto replaces the cluster domain secret (the key that
signs inter-cluster moves) on every node: generated or read from a file; a bad
file, or both options at once, changes nothing anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from corral.paths import Paths
from tests.helpers.cluster import Result, TestCluster
from tests.helpers.multinode import cluster_with_nodes

pytestmark = pytest.mark.slow

STARTING = (
    'Updating certificates now. Running "gnt-cluster verify"  is recommended after this operation.'
)
DONE = (
    "All requested certificates and keys have been replaced."
    ' Running "gnt-cluster verify" now is recommended.'
)


def renew(cl: TestCluster, *args: str) -> Result:
    """renew-crypto without a controlling terminal (a prompt is answered no)."""
    proc = subprocess.run(
        [sys.executable, "-m", "corral.cli.gnt_cluster", "renew-crypto", *args],
        env=cl.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def secrets_of(roots: list[Path]) -> list[bytes]:
    return [Paths(root).cluster_domain_secret.read_bytes() for root in roots]


def test_cds_all_nodes(tmp_path: Path) -> None:
    with cluster_with_nodes(tmp_path, ("node2.example.com",)) as (cl, nodes):
        roots = [cl.paths.root, *(n.paths.root for n in nodes)]
        before = secrets_of(roots)
        assert len(set(before)) == 1

        result = renew(cl, "--new-cluster-domain-secret", "--force")
        assert result.rc == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == STARTING and lines[-1] == DONE
        assert "Updating certificates and keys" in lines
        generated = secrets_of(roots)
        assert len(set(generated)) == 1 and generated[0] != before[0]
        assert len(generated[0].strip()) == 40  # 20 random bytes in hex, as Ganeti's
        for root in roots:
            assert Paths(root).cluster_domain_secret.stat().st_mode & 0o777 == 0o600

        given = tmp_path / "cds"
        given.write_text("0123456789abcdef0123456789abcdef01234567\n")
        result = renew(cl, f"--cluster-domain-secret={given}", "--force")
        assert result.rc == 0, result.stderr
        assert secrets_of(roots) == [given.read_bytes()] * len(roots)


BAD_FILES = {
    "empty": (b"", "No data in one-liner file"),
    "two-lines": (b"0123456789abcdef0123\nsecond line\n", "Too many lines"),
    "short": (b"abc\n", "shorter than 16 characters"),
    "binary": (b"\x00\x01\x02" * 10 + b"\n", "printable ASCII"),
    "blank-inside": (b"0123456789 abcdef0123456789\n", "printable ASCII"),
}


def test_bad_cds(tmp_path: Path) -> None:
    with cluster_with_nodes(tmp_path, ("node2.example.com",)) as (cl, nodes):
        roots = [cl.paths.root, *(n.paths.root for n in nodes)]
        before = secrets_of(roots)
        for name, (data, reason) in BAD_FILES.items():
            path = tmp_path / name
            path.write_bytes(data)
            result = renew(cl, f"--cluster-domain-secret={path}", "--force")
            assert result.rc == 1, name
            assert f"Can't load new cluster domain secret from {path}: " in result.stderr
            assert reason in result.stderr, (name, result.stderr)
            assert secrets_of(roots) == before
        missing = tmp_path / "missing"
        result = renew(cl, f"--cluster-domain-secret={missing}", "--force")
        assert result.rc == 1 and "No such file" in result.stderr
        good = tmp_path / "good"
        good.write_text("0123456789abcdef0123456789abcdef01234567\n")
        result = renew(cl, "--new-cluster-domain-secret", f"--cluster-domain-secret={good}", "-f")
        assert result.rc == 1
        assert "Only one of the --new-cluster-domain-secret and" in result.stderr
        # Without --force the question is asked; without a terminal the answer is no.
        assert renew(cl, "--new-cluster-domain-secret").rc == 1
        assert secrets_of(roots) == before
