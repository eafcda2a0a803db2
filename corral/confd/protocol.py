"""confd's wire, as Ganeti 3.0.2's (``lib/confd``, ``src/Ganeti/Confd``).

A datagram is the magic ``plj0`` and a *signed message*: the JSON object
``{"msg": TEXT, "salt": SALT, "hmac": HEX}`` where HEX is the HMAC-SHA1,
under the cluster's ``hmac.key`` (the whole file), of SALT + TEXT.  A
request's TEXT is ``{"protocol", "type", "query", "rsalt"}`` and its SALT the
sender's clock in seconds; the server drops requests whose clock is more
than :data:`MAX_CLOCK_SKEW` away from its own.  A reply's TEXT is
``{"protocol", "status", "answer", "serial"}``, signed with the request's
``rsalt`` as its salt, so the client can match it to its request.

Standard library only: the gnt-* commands import it.
"""

from __future__ import annotations

import enum
import hmac
import json
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha1
from typing import Any

MAGIC = b"plj0"
PROTOCOL_VERSION = 1
SERVICE = "ganeti-confd"  # its port in /etc/services, if there
DEFAULT_PORT = 1814
# Ganeti's CONFD_MAX_CLOCK_SKEW: twice NODE_MAX_CLOCK_SKEW (150 s).
MAX_CLOCK_SKEW = 300
# The largest datagram read (UDP's limit): Ganeti's client sends up to 60 KiB.
MAX_DATAGRAM = 65535
_TIMESTAMP_RE = re.compile(r"\s*-?[0-9]+\s*")


class Request(enum.IntEnum):
    """Request types (Ganeti's CONFD_REQ_*)."""

    PING = 0
    NODE_ROLE_BYNAME = 1
    NODE_PIP_BY_INSTANCE_IP = 2
    CLUSTER_MASTER = 3
    NODE_PIP_LIST = 4
    MC_PIP_LIST = 5
    INSTANCES_IPS_LIST = 6
    NODE_DRBD = 7
    NODE_INSTANCES = 8
    INSTANCE_DISKS = 9
    CONFIG_QUERY = 10
    DATA_COLLECTORS = 11


class Status(enum.IntEnum):
    """Reply statuses (CONFD_REPL_STATUS_*)."""

    OK = 0
    ERROR = 1
    NOT_IMPLEMENTED = 2


class Role(enum.IntEnum):
    """Node roles (CONFD_NODE_ROLE_*)."""

    MASTER = 0
    CANDIDATE = 1
    OFFLINE = 2
    DRAINED = 3
    REGULAR = 4


class ErrorCode(enum.IntEnum):
    """The answers of the standard error replies (CONFD_ERROR_*)."""

    UNKNOWN_ENTRY = 0
    INTERNAL = 1
    ARGUMENT = 2


class Field(enum.IntEnum):
    """Fields a CLUSTER_MASTER query may ask for (CONFD_REQFIELD_*)."""

    NAME = 0
    IP = 1
    MNODE_PIP = 2


# The keys of a dictionary query (CONFD_REQQ_*): strings, as JSON keys are.
REQQ_LINK = "0"
REQQ_IP = "1"
REQQ_IPLIST = "2"
REQQ_FIELDS = "3"


class BadMessage(ValueError):
    """A datagram that is not a valid signed confd message (it gets no answer)."""


def default_port() -> int:
    """confd's port: ``ganeti-confd`` in the services database, else 1814 (as Ganeti)."""
    try:
        return socket.getservbyname(SERVICE, "udp")
    except OSError:
        return DEFAULT_PORT


def _mac(key: bytes, salt: str, text: str) -> str:
    return hmac.new(key, (salt + text).encode("utf-8"), sha1).hexdigest()


def sign(key: bytes, text: str, salt: str) -> bytes:
    """The datagram carrying ``text`` signed with ``salt``."""
    envelope = {"msg": text, "salt": salt, "hmac": _mac(key, salt, text)}
    return MAGIC + json.dumps(envelope, separators=(",", ":")).encode("utf-8")


def unsign(key: bytes, datagram: bytes) -> tuple[Any, str]:
    """The JSON value a signed datagram carries and its salt; BadMessage if
    the magic, the envelope or the signature is wrong."""
    if not datagram.startswith(MAGIC):
        raise BadMessage("no confd magic")
    try:
        envelope = json.loads(datagram[len(MAGIC) :])
    except (ValueError, UnicodeError):
        raise BadMessage("not JSON") from None
    if not isinstance(envelope, dict):
        raise BadMessage("not a signed message")
    text, salt, digest = (envelope.get(k) for k in ("msg", "salt", "hmac"))
    if not all(isinstance(v, str) for v in (text, salt, digest)):
        raise BadMessage("not a signed message")
    assert isinstance(text, str) and isinstance(salt, str) and isinstance(digest, str)
    if not hmac.compare_digest(digest.lower(), _mac(key, salt, text)):
        raise BadMessage("HMAC verification failed")
    try:
        return json.loads(text), salt
    except ValueError:
        raise BadMessage("the signed text is not JSON") from None


@dataclass(frozen=True)
class ConfdRequest:
    """A request as the server reads it; ``query`` is None, a string or a dict."""

    type: Request
    query: str | dict[str, Any] | None
    rsalt: str
    protocol: int = PROTOCOL_VERSION


def _query(value: Any) -> str | dict[str, Any] | None:
    """A request's query as Ganeti's ``ConfdQuery`` reads it (BadMessage else)."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise BadMessage(f"Cannot deserialise into ConfdQuery the value {value!r}")
    for key, valid in _QUERY_CHECKS.items():
        if value.get(key) is not None and not valid(value[key]):
            raise BadMessage(f"invalid query field {key!r}")
    return value


def _is_field(value: Any) -> bool:
    return type(value) is int and value in Field._value2member_map_


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_field_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_field(item) for item in value)


# A dictionary query's keys and what each must hold (Ganeti's ConfdReqQ).
_QUERY_CHECKS: dict[str, Callable[[Any], bool]] = {
    REQQ_IP: _is_str,
    REQQ_LINK: _is_str,
    REQQ_IPLIST: _is_str_list,
    REQQ_FIELDS: _is_field_list,
}


def parse_request(key: bytes, datagram: bytes, now: float) -> ConfdRequest:
    """The request a datagram carries, checked as Ganeti's server checks it
    (signature, clock, fields); BadMessage else."""
    body, salt = unsign(key, datagram)
    if not _TIMESTAMP_RE.fullmatch(salt):
        raise BadMessage("the salt is not a timestamp")
    sent = int(salt)
    if abs(sent - int(now)) > MAX_CLOCK_SKEW:
        raise BadMessage("Too old/too new timestamp or clock skew")
    if not isinstance(body, dict):
        raise BadMessage("the request is not an object")
    kind, rsalt, protocol = body.get("type"), body.get("rsalt"), body.get("protocol")
    if type(kind) is not int or kind not in Request._value2member_map_:
        raise BadMessage(f"unknown request type {kind!r}")
    if not isinstance(rsalt, str) or type(protocol) is not int:
        raise BadMessage("the request lacks its rsalt or protocol")
    return ConfdRequest(Request(kind), _query(body.get("query")), rsalt, protocol)


def pack_reply(key: bytes, rsalt: str, status: int, answer: Any, serial: int) -> bytes:
    """The datagram of a reply to the request salted ``rsalt``."""
    reply = {"protocol": PROTOCOL_VERSION, "status": status, "answer": answer, "serial": serial}
    return sign(key, json.dumps(reply, separators=(",", ":")), rsalt)


def pack_request(key: bytes, request: ConfdRequest, now: float) -> bytes:
    """The datagram of ``request`` sent at ``now`` (as Ganeti's client packs it)."""
    body = {
        "protocol": request.protocol,
        "type": int(request.type),
        "query": request.query,
        "rsalt": request.rsalt,
    }
    return sign(key, json.dumps(body, separators=(",", ":")), str(int(now)))
