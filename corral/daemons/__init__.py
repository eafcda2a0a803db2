"""Daemon entry points: corral-masterd, corral-noded, corral-rapi, corral-metad (their
plumbing: corral.process).  Ganeti's daemon names start them too:
ganeti-noded, ganeti-rapi, and ganeti-luxid and ganeti-wconfd, whose two jobs
corral-masterd does in one daemon."""

from __future__ import annotations

import argparse


def daemon_parser(name: str, description: str) -> argparse.ArgumentParser:
    """The options every daemon has: -f, -d and --version (Ganeti's)."""
    from corral import __version__

    parser = argparse.ArgumentParser(prog=name, description=description)
    parser.add_argument("-f", "--foreground", action="store_true", help="do not daemonize")
    parser.add_argument("-d", "--debug", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"%(prog)s (corral) {__version__}")
    return parser
