"""corral-noded: the node daemon (every node, as root)."""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Callable

from corral import constants as C
from corral.daemons.util import run_daemon
from corral.node import limits as L
from corral.node.limits import ConnectionLimits
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
    _add_limit_options(parser)
    return parser.parse_args(argv)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
        return value

    return parse


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    """Time-outs and bounds that keep clients without a certificate from taking it over."""
    for flag, kind, default, text in (
        ("--handshake-timeout", float, L.HANDSHAKE_TIMEOUT, "seconds for a TLS handshake"),
        ("--idle-timeout", float, L.IDLE_TIMEOUT, "seconds an idle connection stays open"),
        (
            "--max-unauthenticated",
            int,
            L.MAX_UNAUTHENTICATED,
            "connections waiting for their TLS handshake at once (the oldest is closed)",
        ),
        ("--max-connections", int, L.MAX_CONNECTIONS, "connections open at once"),
    ):
        parser.add_argument(
            flag,
            type=_positive(kind),
            default=default,
            metavar="SECONDS" if kind is float else "N",
            help=f"{text} (default {default:g})",
        )


def connection_limits(opts: argparse.Namespace) -> ConnectionLimits:
    """The connection limits the options ask for."""
    return ConnectionLimits(
        handshake_timeout=opts.handshake_timeout,
        idle_timeout=opts.idle_timeout,
        max_unauthenticated=int(opts.max_unauthenticated),
        max_connections=int(opts.max_connections),
    )


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
