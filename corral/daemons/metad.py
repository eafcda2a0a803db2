"""corral-metad: instance metadata on 169.254.169.254 of each communication tap,
fed by noded over a Unix socket (design-os).  ganeti-metad is the same daemon."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from corral.daemons import daemon_parser
from corral.metad.listener import GuestLimits
from corral.metad.model import METADATA_ADDRESS
from corral.paths import Paths
from corral.process.daemons import run_daemon

NAME = "corral-metad"
DEFAULT_PORT = 80  # Ganeti's defaultMetadPort


def build_parser() -> argparse.ArgumentParser:
    """The command-line options of corral-metad (Ganeti's -b and -p, and limits)."""
    parser = daemon_parser(NAME, "Corral instance metadata daemon")
    parser.add_argument(
        "-b",
        "--bind",
        default=METADATA_ADDRESS,
        metavar="ADDRESS",
        help="address to answer on, on every tap (default %(default)s)",
    )
    parser.add_argument(
        "-p", "--port", type=int, default=DEFAULT_PORT, help="port (default %(default)s)"
    )
    defaults = GuestLimits()
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=defaults.request_timeout,
        metavar="SECONDS",
        help="seconds a guest gets to send a request (default %(default)g)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        metavar="N",
        help="connections one tap holds at once (default %(default)s)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options given, checked."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    if opts.request_timeout <= 0 or opts.max_connections < 1 or not 0 < opts.port < 65536:
        parser.error("need --request-timeout > 0, --max-connections >= 1, 0 < --port < 65536")
    return opts


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``corral-metad``; the root comes from CORRAL_ROOT."""
    opts = parse_args(argv)
    from corral.metad.server import Metad, serve_metad

    paths = Paths.from_env()
    limits = GuestLimits(request_timeout=opts.request_timeout, max_connections=opts.max_connections)

    async def serve(ready: Callable[[], None]) -> None:
        metad = Metad(opts.bind, opts.port, limits)
        await serve_metad(metad, paths.metad_socket, ready)

    sys.exit(run_daemon(NAME, serve, foreground=opts.foreground, paths=paths, debug=opts.debug))


if __name__ == "__main__":
    main()
