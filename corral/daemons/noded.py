"""corral-noded: the node daemon (every node, as root)."""

from __future__ import annotations

import argparse
import functools
import sys

from corral import constants as C
from corral.daemons.limit_options import add_limit_options, connection_limits
from corral.daemons.util import run_daemon
from corral.paths import Paths

NAME = "corral-noded"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options of corral-noded."""
    parser = argparse.ArgumentParser(prog=NAME, description="Corral node daemon")
    parser.add_argument("-f", "--foreground", action="store_true", help="do not daemonize")
    parser.add_argument("-d", "--debug", action="store_true", help="log debug messages")
    parser.add_argument(
        "-b", "--bind", required=True, metavar="ADDRESS", help="address to listen on"
    )
    parser.add_argument(
        "-p",
        "--port",
        type=int,
        default=C.DEFAULT_NODED_PORT,
        help=f"port to listen on (default {C.DEFAULT_NODED_PORT})",
    )
    add_limit_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``corral-noded`` command; the root comes from CORRAL_ROOT."""
    opts = parse_args(argv)
    # The server (aiohttp, cryptography) is imported only to run, not for --help.
    from corral.node.context import NodeContext
    from corral.node.server import serve

    paths = Paths.from_env()
    ctx = NodeContext(paths=paths, address=opts.bind, port=opts.port, debug=opts.debug)
    sys.exit(
        run_daemon(
            NAME,
            functools.partial(serve, ctx, connection_limits(opts)),
            foreground=opts.foreground,
            paths=paths,
            debug=opts.debug,
        )
    )


if __name__ == "__main__":
    main()
