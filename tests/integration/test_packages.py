"""The wheel and the sdist (``python -m build``, the wheel made from the
sdist, so the sdist holds everything), and a new venv with only the wheel
installed running the README's walkthrough ("Using it") away from the
repository: everything the code needs at run time ships in the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.noded import REPO_ROOT
from tests.helpers.readme import in_namespaces, section_blocks, stop_everything

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
]
# What the sdist is made from (setuptools takes the package, the licence and
# the README; the tests, scripts and benches stay in the repository).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "corral")
SHIPPED = ("corral/examples/os/demo/create", "corral/rapi/ui/index.html")


def _run(*command: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from a copy of the sources."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO_ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO_ROOT / name, source / name)
    _run(sys.executable, "-m", "build", "--outdir", work / "dist", source)
    return work / "dist"


@pytest.fixture(scope="module")
def wheel_venv(dist: Path) -> Iterator[Path]:
    """A directory with a new venv, ``.venv``, holding the wheel (and its
    dependencies) and nothing else; outside /tmp, which the walkthrough's
    namespace replaces."""
    home = Path(tempfile.mkdtemp(prefix="corral-wheel-", dir="/var/tmp"))
    try:
        venv = home / ".venv"
        _run(getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv)
        (wheel,) = dist.glob("corral-*.whl")
        _run(venv / "bin/python", "-m", "pip", "install", "-q", wheel)
        yield home
    finally:
        shutil.rmtree(home)


def test_the_sdist_and_the_wheel_hold_what_runs(dist: Path) -> None:
    (sdist,) = dist.glob("corral-*.tar.gz")
    (wheel,) = dist.glob("corral-*.whl")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", *SHIPPED} <= names
    with zipfile.ZipFile(wheel) as whl:
        files = set(whl.namelist())
        metadata = next(n for n in files if n.endswith(".dist-info/METADATA"))
        text = whl.read(metadata).decode()
        create = whl.getinfo(SHIPPED[0])
    assert set(SHIPPED) <= files
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in files)
    assert "License-Expression: BSD-2-Clause" in text
    assert create.external_attr >> 16 & 0o111, "the OS scripts stay executable"


def test_a_venv_with_only_the_wheel_runs_the_walkthrough(wheel_venv: Path, tmp_path: Path) -> None:
    # The reader's directory holds the venv and nothing of the repository.
    python = wheel_venv / ".venv/bin/python"
    where = _run(python, "-c", "import corral; print(corral.__file__)", cwd=wheel_venv)
    assert where.startswith(str(wheel_venv)), where
    script = "\n".join(text for _, text in section_blocks("## Using it"))
    try:
        out = in_namespaces(script + "\n.venv/bin/gnt-instance list\n", tmp_path, cwd=wheel_venv)
    finally:
        stop_everything(tmp_path)
    assert "inst1.example.com" in out and "running" in out, out[-3000:]
