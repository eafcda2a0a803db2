"""Manual pages (roff, section 8 as Ganeti's) from the parsers."""

from __future__ import annotations

import argparse
from pathlib import Path

from corral import __version__
from corral.docgen.programs import Program, built, commands, expanded_help, options

SECTION = "8"


def _roff(text: str) -> str:
    """Text safe in roff: backslashes and hyphens escaped, no line starting
    with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line if line[:1] in ".'" else line) for line in text.splitlines())


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_usage().removeprefix("usage:").split())


def _option_lines(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in options(parser):
        names = ", ".join(f"\\fB{_roff(o)}\\fR" for o in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            names += f"=\\fI{_roff(str(metavar))}\\fR"
        lines += [".TP", names, _roff(expanded_help(parser, action))]
    return lines


def page(program: Program) -> str:
    """The manual page of ``program``."""
    parser = program.parser
    title = program.name.upper()
    lines = [
        f'.TH "{_roff(title)}" "{SECTION}" "" "corral {__version__}" "Corral manual"',
        ".ad l",  # long usage lines: left-aligned, not stretched
        ".SH NAME",
        f"{_roff(program.name)} \\- {_roff(parser.description or program.name)}",
        ".SH SYNOPSIS",
        _roff(_usage(parser)),
    ]
    if program.aliases:
        lines += [".PP", _roff("Also installed as " + ", ".join(program.aliases) + ".")]
    own = _option_lines(parser)
    if own:
        lines += [".SH OPTIONS", *own]
    subcommands = commands(parser)
    if subcommands:
        lines.append(".SH COMMANDS")
        for command in subcommands:
            lines.append(f".SS {_roff(command.name)}")
            if built(command.parser):
                lines.append(_roff(_usage(command.parser)))
            if command.help:
                lines += [".PP", _roff(command.help)]
            lines += _option_lines(command.parser)
    lines += [
        ".SH SEE ALSO",
        _roff("The Corral operator guide; Ganeti's manual page of the same name."),
    ]
    return "\n".join(lines) + "\n"


def write_pages(programs: list[Program], directory: Path) -> list[Path]:
    """A page per program in ``directory`` and a ``.so`` link per alias; the files."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for program in programs:
        path = directory / f"{program.name}.{SECTION}"
        path.write_text(page(program))
        written.append(path)
        for alias in program.aliases:
            link = directory / f"{alias}.{SECTION}"
            link.write_text(f".so man{SECTION}/{program.name}.{SECTION}\n")
            written.append(link)
    return written
