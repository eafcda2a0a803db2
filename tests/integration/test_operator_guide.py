"""Every ``sh`` block of the operator guide runs as written, in order, in one
shell (as the README's: tests/integration/test_readme.py), in network and
mount namespaces of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.noded import REPO_ROOT
from tests.helpers.readme import blocks, in_namespaces, stop_everything

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
]
GUIDE = REPO_ROOT / "docs" / "operator-guide.md"


def test_every_block_runs_in_order(tmp_path: Path) -> None:
    parts = [f"echo '### operator-guide.md line {line}'\n{text}" for line, text in blocks(GUIDE)]
    assert len(parts) >= 6
    try:
        out = in_namespaces("\n".join(parts), tmp_path)
    finally:
        stop_everything(tmp_path)
    # Beyond not failing: the instance came back from its export, on node1.
    rows = [line.split() for line in out.splitlines()]
    assert ["web.example.com", "node1.example.com", "running"] in rows, out[-3000:]
