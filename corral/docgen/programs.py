"""The installed commands and their parsers: every console script of the
``corral`` distribution whose module has ``build_parser()``."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import distribution


@dataclass(frozen=True)
class Program:
    """One command: its name, its parser, and other names of the same command."""

    name: str
    parser: argparse.ArgumentParser
    aliases: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Command:
    """A subcommand (``gnt-instance add``) and its parser."""

    name: str
    help: str
    parser: argparse.ArgumentParser


def programs() -> list[Program]:
    """Each command once (the first name in the package's metadata), with the
    other names that run the same module as its aliases."""
    by_module: dict[str, list[str]] = {}
    for entry in distribution("corral").entry_points:
        if entry.group == "console_scripts":
            by_module.setdefault(entry.module, []).append(entry.name)
    found = []
    for module_name, names in by_module.items():
        build = getattr(importlib.import_module(module_name), "build_parser", None)
        if build is None:
            raise RuntimeError(f"{module_name} ({names[0]}) has no build_parser()")
        parser = build()
        parser.prog = names[0]
        found.append(Program(names[0], parser, tuple(names[1:])))
    return sorted(found, key=lambda p: p.name)


def commands(parser: argparse.ArgumentParser) -> list[Command]:
    """The parser's subcommands in the order they were added (aliases once)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            found = []
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    found.append(Command(name, helps.get(name, ""), sub))
            return found
    return []


def built(parser: argparse.ArgumentParser) -> bool:
    """Whether the parser parses options: a command not built yet takes every
    argument as is (``corral.cli.common.add_not_built``)."""
    return "-" in parser.prefix_chars


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The parser's options (not its positional arguments or subcommands), the
    hidden ones left out; none for a command not built yet."""
    if not built(parser):
        return
    for action in parser._actions:
        if action.option_strings and action.help != argparse.SUPPRESS:
            yield action


def expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The option's help with its %(default)s and the like filled in."""
    if not action.help:
        return ""
    return " ".join(parser._get_formatter()._expand_help(action).split())
