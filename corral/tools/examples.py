"""corral-examples: the examples shipped with Corral, installed where a
cluster finds them (``install-os demo`` copies the demo OS definition into
``$CORRAL_ROOT/srv/ganeti/os``, as ``cp -r`` from a checkout would)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from corral import constants as C
from corral.examples import OS_DIR
from corral.paths import Paths

# The OS scripts (Ganeti's OS interface): executable whatever the installer kept.
SCRIPTS = frozenset({"create", "export", "import", "rename", "verify"})


def build_parser() -> argparse.ArgumentParser:
    """The commands: list, install-os."""
    parser = argparse.ArgumentParser(
        prog="corral-examples", description="The examples shipped with Corral"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("list", help="list the example OS definitions", description="List them")
    install = sub.add_parser(
        "install-os",
        help="copy an example OS definition into a node's OS directory",
        description="Copy an example OS definition into a node's OS directory",
    )
    install.add_argument("name", help="the OS definition's name (see list)")
    install.add_argument(
        "--root",
        type=Path,
        help="the node's root (default: $CORRAL_ROOT, else /)",
    )
    return parser


def available() -> list[str]:
    """The names of the shipped OS definitions."""
    return sorted(p.name for p in OS_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))


def install_os(name: str, paths: Paths) -> Path:
    """Copy OS ``name`` into the node's first OS directory (replacing an older
    copy); where it went.  ValueError for an unknown name."""
    if name not in available():
        raise ValueError(f"No example OS {name!r}; there are: {', '.join(available())}")
    target = paths.os_search_path[0] / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(OS_DIR / name, target)
    for script in SCRIPTS & {p.name for p in target.iterdir()}:
        os.chmod(target / script, 0o755)
    return target


def main(argv: list[str] | None = None) -> int:
    """Run the command; the exit code."""
    opts = build_parser().parse_args(argv)
    if opts.command == "list":
        print("\n".join(available()))
        return C.EXIT_SUCCESS
    paths = Paths(opts.root) if opts.root is not None else Paths.from_env()
    try:
        target = install_os(opts.name, paths)
    except (ValueError, OSError) as err:
        print(f"corral-examples: {err}", file=sys.stderr)
        return C.EXIT_FAILURE
    print(f"Installed the {opts.name} OS definition in {target}")
    return C.EXIT_SUCCESS


def cli() -> None:
    """The console script."""
    sys.exit(main())
