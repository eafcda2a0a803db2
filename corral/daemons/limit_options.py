"""Command-line options for the time-outs and connection bounds of the HTTPS
daemons (corral-noded, corral-rapi).  Stdlib only."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from corral.http import limits as L
from corral.http.limits import ConnectionLimits


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


# One option: flag, type, default, what it sets.
LimitOption = tuple[str, type[int] | type[float], float, str]

NODED_LIMITS: tuple[LimitOption, ...] = (
    ("--handshake-timeout", float, L.HANDSHAKE_TIMEOUT, "seconds for a TLS handshake"),
    ("--idle-timeout", float, L.IDLE_TIMEOUT, "seconds an idle connection stays open"),
    (
        "--max-unauthenticated",
        int,
        L.MAX_UNAUTHENTICATED,
        "connections waiting for their TLS handshake at once (the oldest is closed)",
    ),
    ("--max-connections", int, L.MAX_CONNECTIONS, "connections open at once"),
)


def add_limit_options(
    parser: argparse.ArgumentParser, table: tuple[LimitOption, ...] = NODED_LIMITS
) -> None:
    """Time-outs and bounds that keep hostile clients from taking the daemon over
    (``table``: noded's unless another daemon gives its own)."""
    for flag, kind, default, text in table:
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
