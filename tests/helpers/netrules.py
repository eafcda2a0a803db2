"""Seeing the network as a guest's QEMU sees it: a helper process run as the
guest's uid (``setpriv``, no supplementary groups) tries to connect to
TCP endpoints and unix sockets; listeners stand for the node's services.

Call these from the thread of the namespace under test (a
:class:`~tests.helpers.netns_thread.NamespaceThread`): the processes and
sockets they make live in it."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import subprocess
from collections.abc import Iterator, Sequence

from corral.node.netrules import nft
from tests.helpers.netns_thread import NamespaceThread

# The system Python: the helper needs nothing of Corral's (nor of its venv).
PYTHON = "/usr/bin/python3"
CONNECTED = "connected"
_PROBE = """
import json, socket, sys
out = []
for kind, target, port in json.loads(sys.argv[1]):
    family = socket.AF_UNIX if kind == "unix" else (
        socket.AF_INET6 if ":" in target else socket.AF_INET)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        try:
            sock.connect(target if kind == "unix" else (target, port))
            out.append("connected")
        except OSError as err:
            out.append(err.errno)
print(json.dumps(out))
"""

Target = tuple[str, str, int]  # ("tcp", address, port) or ("unix", path, 0)


def probe(targets: Sequence[Target], uid: int | None = None) -> list[str | int]:
    """For each target, ``"connected"`` or the errno of the refused connect,
    tried by a process running as ``uid`` (None: as root, as noded)."""
    argv = [PYTHON, "-c", _PROBE, json.dumps(list(targets))]
    if uid is not None:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(proc.stdout))


REFUSED_BY_RULES = errno.EHOSTUNREACH  # the rules' ICMP "administratively prohibited"


@contextlib.contextmanager
def listeners(endpoints: Sequence[tuple[str, int]]) -> Iterator[list[int]]:
    """TCP listeners on ``endpoints`` (port 0: any), as root; their ports."""
    with contextlib.ExitStack() as stack:
        ports = []
        for address, port in endpoints:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sock = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
            sock.listen(16)
            ports.append(int(sock.getsockname()[1]))
        yield ports


@contextlib.contextmanager
def listeners_in(ns: NamespaceThread, endpoints: Sequence[tuple[str, int]]) -> Iterator[list[int]]:
    """:func:`listeners` in ``ns``'s namespace (made from its thread)."""
    with contextlib.ExitStack() as stack:
        yield ns.call(stack.enter_context, listeners(endpoints))


def table_listing(table: str) -> str:
    """``nft list table inet <table>`` ("" when it does not exist)."""
    found = nft.binary()
    assert found is not None, "these tests need nft (Debian's nftables)"
    proc = subprocess.run(
        [found, "list", "table", "inet", table], capture_output=True, text=True, check=False
    )
    return proc.stdout if proc.returncode == 0 else ""


def delete_table(table: str) -> None:
    """Remove ``table`` (by hand, as an operator would; absent is fine)."""
    found = nft.binary()
    assert found is not None
    subprocess.run([found, "delete", "table", "inet", table], capture_output=True, check=False)
