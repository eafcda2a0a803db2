"""Every daemon, and the commands Ganeti's QA asks for by Ganeti's daemon
names (ganeti-noded, ganeti-rapi, ganeti-luxid, ganeti-wconfd, ganeti-confd, ganeti-metad,
ganeti-watcher), answers --version and exits 0, as Ganeti's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from corral import __version__


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("corral.daemons.noded", "corral-noded"),
        ("corral.daemons.rapi", "corral-rapi"),
        ("corral.daemons.masterd", "corral-masterd"),
        ("corral.daemons.confd", "ganeti-confd"),
        ("corral.daemons.metad", "corral-metad"),
        ("corral.tools.watcher", "ganeti-watcher"),
    ],
)
def test_version(module: str, name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{name} (corral) {__version__}\n"


def test_ganeti_daemon_names_are_entry_points() -> None:
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts["ganeti-noded"] == "corral.daemons.noded:main"
    assert scripts["ganeti-rapi"] == "corral.daemons.rapi:main"
    assert scripts["ganeti-luxid"] == scripts["ganeti-wconfd"] == "corral.daemons.masterd:main"
    assert scripts["ganeti-confd"] == "corral.daemons.confd:main"
    assert scripts["ganeti-metad"] == scripts["corral-metad"] == "corral.daemons.metad:main"
    assert scripts["ganeti-watcher"] == "corral.tools.watcher:cli"
