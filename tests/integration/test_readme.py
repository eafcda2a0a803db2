"""Every command block of the README runs as written (issue 20).

The blocks use fixed addresses (127.0.0.2, ...) and roots under /tmp, as a
reader would; each test runs them in network and mount namespaces of its
own (its own loopback, its own /tmp: a directory of the test bind-mounted
there), so that test runs side by side do not meet.  The blocks after the
first two follow on from each other and run in one shell, stopping at the
first failing command.  ``scripts/test.sh`` is the command CI itself runs
(``.ci/run``); running it here would run this test again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.guest import guest_initramfs, guest_kernel
from tests.helpers.readme import DEMO, TESTS, blocks, in_namespaces, stop_everything

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    # The kvm example's guest is built (and cached) here, outside the
    # namespaces, which have no network.
    guest_kernel()
    guest_initramfs()
    try:
        yield tmp_path
    finally:
        stop_everything(tmp_path)


def test_the_readme_opens_with_the_demo_and_the_tests() -> None:
    assert [text.strip() for _, text in blocks()[:2]] == [DEMO, TESTS]


def test_the_demo_runs(scratch: Path) -> None:
    out = in_namespaces(DEMO, scratch, {"CORRAL_DEMO_DIR": str(scratch)})
    assert "bonjour from web1.demo.corral" in out
    assert "The demo cluster is still running" in out


def test_every_other_block_runs_in_order(scratch: Path) -> None:
    parts = []
    for line, text in blocks()[2:]:
        parts.append(f"echo '### README.md line {line}'\n{text}")
    out = in_namespaces("\n".join(parts), scratch)
    # What the blocks must have done, beyond not failing: inst2 moved to the
    # second cluster, and nothing left running.
    assert re.search(r"^inst2\.example\.com .*node1\.dest\.example\.com", out, re.M), out
    assert not list(scratch.glob("*/var/run/ganeti/*.pid")), "a daemon was left running"
