"""``python -m corral.docgen man DIR | completion SCRIPT``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from corral.docgen import completion, man
from corral.docgen.programs import programs


def main(argv: list[str] | None = None) -> int:
    """Write the manual pages or the completion script; the exit code."""
    parser = argparse.ArgumentParser(prog="python -m corral.docgen", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("man", help="a manual page per command").add_argument("directory", type=Path)
    sub.add_parser("completion", help="the bash completion script").add_argument(
        "script", type=Path
    )
    opts = parser.parse_args(argv)
    found = programs()
    if opts.what == "man":
        written = man.write_pages(found, opts.directory)
        print(f"{len(written)} manual pages in {opts.directory}")
    else:
        opts.script.parent.mkdir(parents=True, exist_ok=True)
        opts.script.write_text(completion.script(found))
        print(f"bash completion of {len(found)} commands in {opts.script}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
