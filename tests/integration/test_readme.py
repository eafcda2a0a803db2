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
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.paths import Paths
from corral.process.daemons import stop_daemon
from tests.helpers.guest import guest_initramfs, guest_kernel
from tests.helpers.kvm_guest import kill_leftovers
from tests.helpers.noded import REPO_ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
]

README = REPO_ROOT / "README.md"
DEMO, TESTS = "scripts/demo.sh", "scripts/test.sh"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)
DAEMONS = ("corral-rapi", "corral-masterd", "corral-noded")


def blocks() -> list[tuple[int, str]]:
    """(line, text) of every shell block of the README."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def in_namespaces(script: str, tmp: Path, env: dict[str, str] | None = None) -> str:
    """Run ``script`` with bash (-e, pipefail) from the repository, in new
    network and mount namespaces with ``tmp`` as /tmp; its output."""
    tmp.chmod(0o755)  # corral-rapi reads its root as gnt-rapi
    setup = f'ip link set lo up && mount --bind "{tmp}" /tmp && cd "{REPO_ROOT}" && exec "$@"'
    proc = subprocess.run(
        [
            "unshare",
            "--net",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            setup,
            "sh",
            "bash",
            "-euo",
            "pipefail",
            "-c",
            script,
        ],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert "Traceback" not in output, output[-6000:]
    return output


def stop_everything(tmp: Path) -> None:
    """Stop the daemons and guests the blocks left under ``tmp`` (a failed run's)."""
    for pid_dir in tmp.glob("**/var/run/ganeti"):
        paths = Paths(pid_dir.parent.parent.parent)
        kill_leftovers(paths.run_dir)
        for daemon in DAEMONS:
            stop_daemon(paths, daemon)


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
