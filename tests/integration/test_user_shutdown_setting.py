"""The cluster's ``enabled_user_shutdown`` (Ganeti's ``--user-shutdown``): set at
init and by modify, shown by info, written to ssconf as Ganeti writes it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.cluster import TestCluster, running_cluster


def _shown(cl: TestCluster) -> str:
    info = cl.gnt("cluster", "info")
    assert info.rc == 0, info.stderr
    (line,) = [row for row in info.stdout.splitlines() if "enabled user shutdown" in row]
    return line.split(":", 1)[1].strip()


def _ssconf(cl: TestCluster) -> str:
    return cl.paths.ssconf_file("enabled_user_shutdown").read_text()


def test_init_modify_info_and_ssconf(tmp_path: Path) -> None:
    with running_cluster(tmp_path, "--user-shutdown", "yes") as cl:
        assert _shown(cl) == "True"
        assert _ssconf(cl) == "True\n"
        result = cl.gnt("cluster", "modify", "--user-shutdown", "no")
        assert result.rc == 0, result.stderr
        assert _shown(cl) == "False"
        assert _ssconf(cl) == "False\n"


def test_a_bad_value_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        result = cl.gnt("cluster", "modify", "--user-shutdown", "maybe")
        assert result.rc != 0
        assert "maybe" in result.stderr
        assert _shown(cl) == "False"
