"""The README's shell blocks, run as a reader would: in network and mount
namespaces of their own (their own loopback, their own /tmp: a directory of
the test bind-mounted there), so that test runs side by side do not meet."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from corral.paths import Paths
from corral.process.daemons import stop_daemon
from tests.helpers.kvm_guest import kill_leftovers
from tests.helpers.noded import REPO_ROOT

README = REPO_ROOT / "README.md"
DEMO, TESTS = "scripts/demo.sh", "scripts/test.sh"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)
DAEMONS = ("corral-rapi", "corral-masterd", "corral-noded")


def blocks(document: Path = README) -> list[tuple[int, str]]:
    """(line, text) of every shell block of ``document`` (the README)."""
    text = document.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def in_namespaces(
    script: str, tmp: Path, env: dict[str, str] | None = None, cwd: Path = REPO_ROOT
) -> str:
    """Run ``script`` with bash (-e, pipefail) from ``cwd`` (the repository), in
    new network and mount namespaces with ``tmp`` as /tmp; its output."""
    tmp.chmod(0o755)  # corral-rapi reads its root as gnt-rapi
    setup = f'ip link set lo up && mount --bind "{tmp}" /tmp && cd "{cwd}" && exec "$@"'
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


def section_blocks(heading: str) -> list[tuple[int, str]]:
    """The shell blocks under the README heading ``heading`` (e.g. "## Using
    it"), before the next heading of any level."""
    lines = README.read_text().splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return [(line, text) for line, text in blocks() if start < line <= end]
