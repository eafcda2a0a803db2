"""corral-rapi: the remote API daemon (Ganeti's RAPI v2), on the master."""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import asdict

from corral import constants as C
from corral.daemons import daemon_parser
from corral.daemons.limit_options import LimitOption, add_limit_options, connection_limits
from corral.http.limits import HANDSHAKE_TIMEOUT, IDLE_TIMEOUT
from corral.paths import Paths
from corral.process.daemons import run_daemon
from corral.process.privileges import DEFAULT_RAPI_USER
from corral.rapi import limits as L

NAME = "corral-rapi"

LIMITS: tuple[LimitOption, ...] = (
    ("--handshake-timeout", float, HANDSHAKE_TIMEOUT, "seconds for a TLS handshake"),
    (
        "--request-timeout",
        float,
        L.REQUEST_TIMEOUT,
        "seconds a client gets to send a request's head (the first one from the end of"
        " the handshake), to send its body, and to read the answer",
    ),
    ("--idle-timeout", float, IDLE_TIMEOUT, "seconds a connection may idle between requests"),
    (
        "--max-unauthenticated",
        int,
        L.MAX_UNAUTHENTICATED,
        "connections without valid credentials so far, open at once (beyond, the one"
        " waiting longest on its client is closed)",
    ),
    ("--max-connections", int, L.MAX_CONNECTIONS, "connections open at once"),
)


def build_parser() -> argparse.ArgumentParser:
    """The command-line options of corral-rapi (Ganeti's ganeti-rapi's, and more)."""
    parser = daemon_parser(NAME, "Corral remote API daemon")
    parser.add_argument(
        "-b",
        "--bind",
        default="0.0.0.0",
        metavar="ADDRESS",
        help="address to listen on (default all IPv4 addresses)",
    )
    parser.add_argument(
        "-p",
        "--port",
        type=int,
        default=C.DEFAULT_RAPI_PORT,
        help=f"port to listen on (default {C.DEFAULT_RAPI_PORT})",
    )
    parser.add_argument(
        "--no-ssl",
        dest="ssl",
        action="store_false",
        help="serve plain HTTP (for debugging only: passwords cross in clear text)",
    )
    parser.add_argument(
        "--require-authentication",
        action="store_true",
        help="refuse anonymous requests (reads too)",
    )
    parser.add_argument(
        "--user",
        default=DEFAULT_RAPI_USER,
        help="unprivileged user to run as once the certificate is read"
        " (default %(default)s; 'root' keeps root's rights, which is not advised)",
    )
    parser.add_argument(
        "--login-delay",
        type=float,
        default=0.05,
        metavar="SECONDS",
        help="wait imposed on an address and on a user name after a failed login; it doubles"
        " with each failure in a row (default %(default)g)",
    )
    parser.add_argument(
        "--max-login-delay",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="longest wait imposed after failed logins (default %(default)g)",
    )
    add_limit_options(parser, LIMITS)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options given, checked."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    if not 0 < opts.login_delay <= opts.max_login_delay:
        parser.error("need 0 < --login-delay <= --max-login-delay")
    return opts


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``corral-rapi``; the root comes from CORRAL_ROOT."""
    opts = parse_args(argv)
    from corral.rapi.daemon import Settings, serve

    paths = Paths.from_env()
    settings = Settings(
        address=opts.bind,
        port=opts.port,
        ssl=opts.ssl,
        require_auth=opts.require_authentication,
        user=opts.user,
        limits=L.RapiLimits(
            request_timeout=opts.request_timeout, **asdict(connection_limits(opts))
        ),
        login_delay=opts.login_delay,
        max_login_delay=opts.max_login_delay,
    )
    sys.exit(
        run_daemon(
            NAME,
            functools.partial(serve, paths, settings),
            foreground=opts.foreground,
            paths=paths,
            debug=opts.debug,
        )
    )


if __name__ == "__main__":
    main()
