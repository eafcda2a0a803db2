"""Manual pages and bash completion come from the parsers: every command and
option of every console script is in them, the pages render without groff
warnings, and the completion completes commands, options and names."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from corral.docgen import completion, man
from corral.docgen.programs import Program, commands, options, programs
from tests.helpers.noded import REPO_ROOT


@pytest.fixture(scope="module")
def found() -> list[Program]:
    return programs()


def _options(program: Program) -> list[str]:
    parsers = [program.parser, *(c.parser for c in commands(program.parser))]
    return [o for parser in parsers for a in options(parser) for o in a.option_strings]


def test_every_console_script_is_covered(found: list[Program]) -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {name for p in found for name in (p.name, *p.aliases)} == set(scripts)
    instance = next(p for p in found if p.name == "gnt-instance")
    assert {"add", "remove", "migrate"} <= {c.name for c in commands(instance.parser)}


def test_pages_hold_every_command_and_option(found: list[Program], tmp_path: Path) -> None:
    written = man.write_pages(found, tmp_path)
    assert len(written) == sum(1 + len(p.aliases) for p in found)
    for program in found:
        text = (tmp_path / f"{program.name}.8").read_text()
        for command in commands(program.parser):
            assert f".SS {command.name.replace('-', chr(92) + '-')}\n" in text, command.name
        for option in _options(program):
            assert option.replace("-", "\\-") in text, (program.name, option)
        for alias in program.aliases:
            assert (tmp_path / f"{alias}.8").read_text() == f".so man8/{program.name}.8\n"


@pytest.mark.skipif(shutil.which("groff") is None, reason="needs groff")
def test_pages_render_without_warnings(found: list[Program], tmp_path: Path) -> None:
    man.write_pages(found, tmp_path)
    for program in found:
        page = tmp_path / f"{program.name}.8"
        result = subprocess.run(
            ["groff", "-man", "-ww", "-Tutf8", str(page)], capture_output=True, text=True
        )
        assert result.returncode == 0 and result.stderr == "", (program.name, result.stderr)
        assert program.name in result.stdout


def _complete(script: Path, root: Path, *words: str) -> list[str]:
    """What bash completes for the command line ``words`` (the last being typed)."""
    line = " ".join(f"'{w}'" for w in words)
    run = (
        f'source "{script}"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1};'
        ' _corral_complete; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {"CORRAL_ROOT": str(root), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(["bash", "-c", run], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_completion_completes_commands_options_and_names(
    found: list[Program], tmp_path: Path
) -> None:
    script = tmp_path / "corral"
    script.write_text(completion.script(found))
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    ssconf = tmp_path / "var/lib/ganeti"
    ssconf.mkdir(parents=True)
    (ssconf / "ssconf_instance_list").write_text("web.example.com\nwiki.example.com\n")
    assert _complete(script, tmp_path, "gnt-instance", "mi") == ["migrate"]
    assert "--no-start" in _complete(script, tmp_path, "gnt-instance", "add", "--no-")
    assert _complete(script, tmp_path, "gnt-instance", "info", "w") == [
        "web.example.com",
        "wiki.example.com",
    ]
    assert "--bind" in _complete(script, tmp_path, "ganeti-noded", "--")
