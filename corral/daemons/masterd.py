"""corral-masterd: the master daemon (master node only)."""

from __future__ import annotations

import argparse
import functools
import sys

from corral.daemons.util import run_daemon
from corral.paths import Paths

NAME = "corral-masterd"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options of corral-masterd."""
    parser = argparse.ArgumentParser(prog=NAME, description="Corral master daemon")
    parser.add_argument("-f", "--foreground", action="store_true", help="do not daemonize")
    parser.add_argument("-d", "--debug", action="store_true", help="log debug messages")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``corral-masterd``; the root comes from CORRAL_ROOT."""
    opts = parse_args(argv)
    # The daemon's parts (pydantic, aiohttp) are imported only to run, not for --help.
    from corral.master.daemon import serve

    paths = Paths.from_env()
    sys.exit(
        run_daemon(
            NAME,
            functools.partial(serve, paths),
            foreground=opts.foreground,
            paths=paths,
            debug=opts.debug,
        )
    )


if __name__ == "__main__":
    main()
