"""A confd client for the gnt-* commands: one request to one confd, its reply.

Ganeti's commands ask the local node's confd; Corral's confd listens on the
node's own address (several nodes may share a machine), which it writes to
``confd-endpoint`` in the node's run directory while it listens.
Standard library only (the commands start fast).
"""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from corral import paths as P
from corral.confd import protocol

TIMEOUT = 10.0  # seconds: Ganeti's CONFD_CLIENT_EXPIRE_TIMEOUT


class ConfdError(Exception):
    """No reply could be had (the message says why, in one line)."""


@dataclass(frozen=True)
class Reply:
    """A confd reply: status, answer and the configuration serial it came from."""

    status: int
    answer: Any
    serial: int


def local_endpoint(root: str) -> tuple[str, int]:
    """Where the confd of the node under ``root`` listens; ConfdError if it does not."""
    name = P.below(root, f"{P.RUN_DIR}/confd-endpoint")
    try:
        with open(name) as file:
            host, port = file.read().split()
        return host, int(port)
    except FileNotFoundError:
        raise ConfdError(
            "confd is not running on this node (corral-noded serves it; is it running?)"
        ) from None
    except (OSError, ValueError) as err:
        raise ConfdError(f"Cannot read {name}: {err}") from None


def read_key(root: str) -> bytes:
    """The cluster's confd key on the node under ``root``."""
    name = P.below(root, f"{P.DATA_DIR}/hmac.key")
    try:
        with open(name, "rb") as file:
            return file.read()
    except OSError as err:
        raise ConfdError(f"Cannot read the confd key {name}: {err.strerror}") from None


def ask(
    key: bytes,
    endpoint: tuple[str, int],
    kind: protocol.Request,
    query: str | dict[str, Any] | None = None,
    timeout: float = TIMEOUT,
) -> Reply:
    """Send one request and wait for its signed reply (others are ignored)."""
    request = protocol.ConfdRequest(kind, query, str(uuid.uuid4()))
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in endpoint[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(protocol.pack_request(key, request, time.time()), endpoint)
        except OSError as err:
            raise ConfdError(
                f"Cannot send to confd at {endpoint[0]}:{endpoint[1]}: {err}"
            ) from None
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data = sock.recv(protocol.MAX_DATAGRAM)
            except TimeoutError:
                break
            except OSError as err:
                where = f"{endpoint[0]}:{endpoint[1]}"
                raise ConfdError(f"No reply from confd at {where}: {err}") from None
            reply = _matching(key, data, request.rsalt)
            if reply is not None:
                return reply
    raise ConfdError(f"No reply from confd at {endpoint[0]}:{endpoint[1]} within {timeout:g} s")


def _matching(key: bytes, data: bytes, rsalt: str) -> Reply | None:
    """The reply ``data`` carries if it is signed and answers ``rsalt``."""
    try:
        body, salt = protocol.unsign(key, data)
    except protocol.BadMessage:
        return None
    if salt != rsalt or not isinstance(body, dict):
        return None
    try:
        return Reply(int(body["status"]), body.get("answer"), int(body.get("serial", 0)))
    except (KeyError, TypeError, ValueError):
        return None
