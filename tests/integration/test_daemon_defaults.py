"""The daemons' extra options come from etc/default/ganeti, as Ganeti's daemon-util
takes them."""

from __future__ import annotations

from pathlib import Path

from corral.bootstrap import MASTERD, NODED, daemon_args
from corral.paths import Paths
from tests.helpers.cluster import new_root


def _cmdline(paths: Paths, daemon: str) -> list[str]:
    pid = int(paths.pid_file(daemon).read_text())
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def test_daemon_args_read_as_the_shell_does(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    assert daemon_args(paths, "noded") == []
    paths.daemon_defaults.parent.mkdir(parents=True)
    paths.daemon_defaults.write_text(
        "# site settings\n"
        'NODED_ARGS="--idle-timeout 30  --max-connections 500"  # comment\n'
        "export MASTERD_ARGS='--luxi-max-message-size 8m'\n"
        "CONFD_ARGS=--ignored\n"
    )
    assert daemon_args(paths, "noded") == ["--idle-timeout", "30", "--max-connections", "500"]
    assert daemon_args(paths, "masterd") == ["--luxi-max-message-size", "8m"]


def test_init_starts_the_daemons_with_their_defaults(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    cl.paths.daemon_defaults.parent.mkdir(parents=True)
    cl.paths.daemon_defaults.write_text(
        'NODED_ARGS="--idle-timeout 30"\nMASTERD_ARGS="--luxi-max-buffered 32m"\n'
    )
    result = cl.init()
    try:
        assert result.rc == 0, result.stderr
        noded = _cmdline(cl.paths, NODED)
        assert noded[noded.index("--idle-timeout") + 1] == "30"
        assert _cmdline(cl.paths, MASTERD)[-2:] == ["--luxi-max-buffered", "32m"]
    finally:
        cl.stop()
