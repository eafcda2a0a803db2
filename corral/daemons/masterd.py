"""corral-masterd: the master daemon (master node only)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import sys

from corral import constants as C
from corral.daemons import daemon_parser
from corral.luxi import protocol
from corral.paths import Paths
from corral.process.daemons import run_daemon
from corral.process.privileges import DEFAULT_RAPI_USER
from corral.rpc.reachability import DEFAULT_MEMORY, DEFAULT_QUERY_DEADLINE
from corral.services.mastership import LEASE_TTL

NAME = "corral-masterd"
# corral-rapi's user's group (set-up makes the user with a group of its name).
DEFAULT_LUXI_GROUP = DEFAULT_RAPI_USER


def build_parser() -> argparse.ArgumentParser:
    """The command-line options of corral-masterd."""
    parser = daemon_parser(NAME, "Corral master daemon")
    parser.add_argument(
        "--luxi-max-message-size",
        type=byte_size,
        default=protocol.MAX_MESSAGE_SIZE,
        metavar="SIZE",
        help="largest luxi request taken, in bytes or with k, m, g (default %(default)s)",
    )
    parser.add_argument(
        "--luxi-max-buffered",
        type=byte_size,
        default=protocol.MAX_BUFFERED,
        metavar="SIZE",
        help="bytes of luxi requests being received on all connections together"
        " (default %(default)s)",
    )
    parser.add_argument(
        "--luxi-group",
        default=DEFAULT_LUXI_GROUP,
        metavar="GROUP",
        help="group allowed to use the luxi socket besides root: corral-rapi's"
        " (default %(default)s; '' for root only)",
    )
    parser.add_argument(
        "--query-deadline",
        type=seconds,
        default=DEFAULT_QUERY_DEADLINE,
        metavar="SECONDS",
        help="time a query gives all the nodes it asks; a node that has not answered"
        " by then shows no data (default %(default)s)",
    )
    parser.add_argument(
        "--unreachable-memory",
        type=seconds,
        default=DEFAULT_MEMORY,
        metavar="SECONDS",
        help="how long queries do not wait on a node that did not answer (default %(default)s)",
    )
    parser.add_argument(
        "--etcd-check-interval",
        type=seconds,
        default=C.DEFAULT_ETCD_CHECK_INTERVAL,
        metavar="SECONDS",
        help="how often the etcd members, once settled, are looked at again (members"
        " whose process is gone are started again); default %(default)s",
    )
    parser.add_argument(
        "--lease-ttl",
        type=seconds,
        default=LEASE_TTL,
        metavar="SECONDS",
        help="how long the mastership lease runs without renewal; it is renewed a third"
        " of that apart (default %(default)s)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options given."""
    return build_parser().parse_args(argv)


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use seconds, e.g. 5 or 0.5")
    return value


def byte_size(text: str) -> int:
    """A positive size in bytes from ``1048576``, ``1024k``, ``1m`` or ``1g``."""
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    number, unit = text[:-1], text[-1:].lower()
    if unit.isdigit():
        number, unit = text, ""
    if not number.isdigit() or unit not in units or int(number) == 0:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: use e.g. 16m, 1024k, 65536")
    return int(number) * units[unit]


# glibc's mallopt parameter: how many malloc arenas the process may have.
_M_ARENA_MAX = -8


def _one_malloc_arena() -> None:
    """glibc gives each thread that allocates an arena of its own: the store
    threads' arena kept about 3 MB that the main one would have reused
    (bench/bench_masterd_rss.py).  masterd's few threads do not contend."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``corral-masterd``; the root comes from CORRAL_ROOT."""
    opts = parse_args(argv)
    _one_malloc_arena()  # before any thread starts
    # The daemon's parts (pydantic, aiohttp) are imported only to run, not for --help.
    from corral.master.daemon import serve

    paths = Paths.from_env()
    sys.exit(
        run_daemon(
            NAME,
            functools.partial(
                serve,
                paths,
                luxi_max_message=opts.luxi_max_message_size,
                luxi_max_buffered=opts.luxi_max_buffered,
                luxi_group=opts.luxi_group or None,
                query_deadline=opts.query_deadline,
                unreachable_memory=opts.unreachable_memory,
                etcd_check_interval=opts.etcd_check_interval,
                lease_ttl=opts.lease_ttl,
            ),
            foreground=opts.foreground,
            paths=paths,
            debug=opts.debug,
        )
    )


if __name__ == "__main__":
    main()
