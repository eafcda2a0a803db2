"""corral-examples: the shipped demo OS copied where a node finds it, scripts
executable; an unknown name refused, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.examples import OS_DIR
from corral.paths import Paths
from corral.tools import examples


def test_install_os_copies_the_demo_os(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert examples.main(["install-os", "demo", "--root", str(tmp_path)]) == 0
    target = Paths(tmp_path).os_search_path[0] / "demo"
    assert f"in {target}" in capsys.readouterr().out
    shipped = sorted(p.name for p in (OS_DIR / "demo").iterdir())
    assert sorted(p.name for p in target.iterdir()) == shipped
    assert all(os.access(target / name, os.X_OK) for name in examples.SCRIPTS)
    (target / "stale").write_text("from an older copy")
    assert examples.main(["install-os", "demo", "--root", str(tmp_path)]) == 0
    assert not (target / "stale").exists()


def test_an_unknown_os_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert examples.main(["install-os", "nosuch", "--root", str(tmp_path)]) == 1
    assert "No example OS 'nosuch'; there are: demo" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
    assert examples.main(["list"]) == 0
    assert capsys.readouterr().out.split() == ["demo"]
