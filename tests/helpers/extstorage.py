"""ExtStorage providers for tests: directories of real (never run) scripts."""

from __future__ import annotations

from pathlib import Path

from corral.node.storage.extstorage import FILES, PARAMETERS_FILE
from corral.paths import Paths

SCRIPT = "#!/bin/sh\nexit 0\n"
# Every script a provider may have: the required ones and the optional ones.
ALL_SCRIPTS = tuple(name for name, _ in FILES if name != PARAMETERS_FILE)
REQUIRED_SCRIPTS = tuple(name for name, required in FILES if required and name in ALL_SCRIPTS)


def make_provider(
    base: Path,
    name: str,
    parameters: str | None = "",
    scripts: tuple[str, ...] = REQUIRED_SCRIPTS,
) -> Path:
    """A provider ``name`` in the directory ``base``: executable ``scripts`` and
    ``parameters.list`` holding ``parameters`` (None: no such file)."""
    es_dir = base / name
    es_dir.mkdir(parents=True, exist_ok=True)
    for script in scripts:
        path = es_dir / script
        path.write_text(SCRIPT)
        path.chmod(0o755)
    if parameters is not None:
        (es_dir / PARAMETERS_FILE).write_text(parameters)
    return es_dir


def node_provider(
    paths: Paths,
    name: str,
    parameters: str | None = "",
    scripts: tuple[str, ...] = REQUIRED_SCRIPTS,
) -> Path:
    """A provider in the first directory of the search path below ``paths``' root."""
    return make_provider(paths.es_search_path[0], name, parameters, scripts)
