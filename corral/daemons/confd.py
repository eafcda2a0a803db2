"""ganeti-confd: Ganeti's name for confd, which Corral serves inside
corral-noded (one daemon per node fewer; noded already knows the node's
address and root).

It takes Ganeti's -f and -d, so scripts that start ganeti-confd keep
working, starts nothing, and says where this node's confd is: exit 0 if it
listens, 1 if not (corral-noded not running, or its UDP port taken: see its
log).  ``--version`` prints the version as the other daemons do.
"""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral.daemons import daemon_parser

NAME = "ganeti-confd"


def build_parser() -> argparse.ArgumentParser:
    """Ganeti's daemon options -f and -d (nothing to start: no effect) and
    --version; where confd listens is noded's (its -b and --confd-port)."""
    parser = daemon_parser(NAME, "confd of Corral's nodes: served by corral-noded")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options given."""
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Say where this node's confd listens (from CORRAL_ROOT's node)."""
    parse_args(argv)
    from corral.confd.client import ConfdError, local_endpoint
    from corral.paths import root_from_env

    try:
        host, port = local_endpoint(root_from_env())
    except ConfdError as err:
        print(f"{NAME}: {err}", file=sys.stderr)
        sys.exit(C.EXIT_FAILURE)
    print(
        f"{NAME}: confd is served by corral-noded on UDP {host}:{port}; nothing to start",
        file=sys.stderr,
    )
    sys.exit(C.EXIT_SUCCESS)


if __name__ == "__main__":
    main()
