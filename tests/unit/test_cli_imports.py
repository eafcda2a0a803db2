"""The gnt-* commands start fast: they import no heavy library and none of the
slow standard modules (see corral/cli/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

COMMANDS = [
    ("gnt_backup", "list"),
    ("gnt_cluster", "info"),
    ("gnt_debug", "locks"),
    ("gnt_filter", "list"),
    ("gnt_instance", "list"),
    ("gnt_job", "list"),
    ("gnt_network", "list"),
    ("gnt_os", "list"),
    ("gnt_storage", "diagnose"),
]
SLOW = ("aiohttp", "cryptography", "pydantic", "typing", "pathlib", "dataclasses", "asyncio")


@pytest.mark.parametrize(("tool", "command"), COMMANDS)
def test_a_command_run_imports_nothing_slow(tool: str, command: str, tmp_path: object) -> None:
    # A whole run up to the master connection: parsing, the handler, the
    # refusal of a root without a cluster.
    code = (
        f"import sys, corral.cli.{tool} as tool; rc = tool.main([{command!r}]); "
        f"print(rc, sorted(m for m in {SLOW!r} if m in sys.modules))"
    )
    env = {**os.environ, "CORRAL_ROOT": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert "Cluster not initialized" in out.stderr, out.stderr
    assert out.stdout.split(" ", 1) == ["5", "[]\n"]
