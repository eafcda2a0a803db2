"""corral-noded: the node daemon (every node, as root)."""

from __future__ import annotations

import argparse
import functools
import socket
import sys
from pathlib import Path

from corral import constants as C
from corral.daemons import daemon_parser
from corral.daemons.limit_options import add_limit_options, connection_limits
from corral.paths import Paths
from corral.process.daemons import run_daemon
from corral.process.start_record import own_command

NAME = "corral-noded"


def build_parser() -> argparse.ArgumentParser:
    """The command-line options of corral-noded."""
    parser = daemon_parser(NAME, "Corral node daemon")
    parser.add_argument("-b", "--bind", metavar="ADDRESS", help="address to listen on")
    parser.add_argument(
        "-p",
        "--port",
        type=int,
        default=C.DEFAULT_NODED_PORT,
        help=f"port to listen on (default {C.DEFAULT_NODED_PORT})",
    )
    parser.add_argument(
        "--confd-port",
        type=int,
        metavar="PORT",
        help="UDP port of confd on the --bind address (default: the ganeti-confd"
        " service's, else 1814, as Ganeti's); 0 turns confd off",
    )
    parser.add_argument(
        "--mond-port",
        type=int,
        metavar="PORT",
        help="TCP port of the monitoring daemon (mond, plain HTTP) on the --bind address"
        f" (default: the ganeti-mond service's, else {C.DEFAULT_MOND_PORT}, as Ganeti's);"
        " 0 turns mond off",
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--join-token",
        metavar="TOKEN",
        help="join token from 'gnt-node join-token' on the master (for a node not in a"
        " cluster); '-' reads it from standard input.  A token given here shows in ps:"
        " prefer '-' or --join-token-file",
    )
    given.add_argument(
        "--join-token-file",
        metavar="PATH",
        help="read the join token from the file PATH (keep it 0600)",
    )
    parser.add_argument(
        "--show-join-info",
        action="store_true",
        help="print this node's certificate fingerprint for joining, and exit",
    )
    add_limit_options(parser)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options given, checked."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    if opts.bind is None and not opts.show_join_info:
        parser.error("the following arguments are required: -b/--bind")
    if opts.confd_port is not None and not 0 <= opts.confd_port < 65536:
        parser.error(f"--confd-port: {opts.confd_port} is not a port (0 to 65535)")
    if opts.mond_port is not None and not 0 <= opts.mond_port < 65536:
        parser.error(f"--mond-port: {opts.mond_port} is not a port (0 to 65535)")
    return opts


def _given_token(opts: argparse.Namespace) -> str | None:
    """The join token given: from a file, standard input ('-'), or the command line."""
    from corral import errors

    if opts.join_token_file is not None:
        path = Path(opts.join_token_file)
        try:
            text = path.read_text()
            if path.stat().st_mode & 0o077:
                print(f"{NAME}: warning: {path} is readable by other users", file=sys.stderr)
        except (OSError, UnicodeError) as err:
            why = getattr(err, "strerror", None) or str(err)
            raise errors.ParameterError(f"Cannot read the join token file {path}: {why}") from None
        return text.strip()
    if opts.join_token == "-":
        return sys.stdin.readline().strip()
    return str(opts.join_token) if opts.join_token is not None else None


def _join_setup(paths: Paths, opts: argparse.Namespace) -> bool:
    """Keep the join token, or show the join information; whether to stop here."""
    from corral import errors
    from corral.node import join_server

    try:
        token = _given_token(opts)
        if token is not None:
            join_server.save_token(paths, token)
        if opts.show_join_info:
            state = "in a cluster" if join_server.is_joined(paths) else "waiting to join"
            cert = join_server.ensure_identity(paths)
            from corral.node.join_protocol import pem_fingerprint

            print(f"Node root: {paths.root}")
            print(f"State: {state}")
            print(f"Certificate fingerprint (SHA-256): {pem_fingerprint(cert)}")
            print(f"Join token given: {'yes' if join_server.token_file(paths).exists() else 'no'}")
            return True
    except errors.GenericError as err:
        print(f"{NAME}: {err.message}", file=sys.stderr)
        sys.exit(1)
    return False


def _confd_port(given: int | None) -> int | None:
    """confd's port (None: off)."""
    from corral.confd.protocol import default_port

    if given is None:
        return default_port()
    return given or None


def _mond_port(given: int | None) -> int | None:
    """mond's port (None: off): the ``ganeti-mond`` service's, else Ganeti's 1815."""
    if given is None:
        try:
            return socket.getservbyname("ganeti-mond", "tcp")
        except OSError:
            return C.DEFAULT_MOND_PORT
    return given or None


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``corral-noded`` command; the root comes from CORRAL_ROOT."""
    opts = parse_args(argv)
    paths = Paths.from_env()
    if _join_setup(paths, opts):
        return
    # The server (aiohttp, cryptography) is imported only to run, not for --help.
    from corral.node.context import NodeContext
    from corral.node.server import serve

    ctx = NodeContext(
        paths=paths,
        address=opts.bind,
        port=opts.port,
        debug=opts.debug,
        confd_port=_confd_port(opts.confd_port),
        mond_port=_mond_port(opts.mond_port),
    )
    sys.exit(
        run_daemon(
            NAME,
            functools.partial(serve, ctx, connection_limits(opts)),
            foreground=opts.foreground,
            paths=paths,
            debug=opts.debug,
            # A join token works once: noded starts again without it.
            argv=own_command(drop=("--join-token", "--join-token-file")),
        )
    )


if __name__ == "__main__":
    main()
