"""The little HTTP/1.1 metad's guests speak: a request head parsed, its body
(by length or chunked) gathered within bounds, answers as bytes.

Guests ask one thing per connection and metad answers from bytes rendered at
publish time, so the request's parsing is most of its cost: this is a strict
parser of what HTTP clients send (RFC 9112), at a tenth of a general one's
cost.  Anything it does not take is a :class:`HttpError` (400, or 413 for a
body over the bound); the connection answers it and closes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import unquote

TEXT = "text/plain; charset=utf-8"
NOT_FOUND = "Resource not found"  # Ganeti's metad's words, to anyone
CRLF = b"\r\n"
END_OF_HEAD = b"\r\n\r\n"
# A chunk's size line (with its extensions) and a trailer field: short.
MAX_CHUNK_LINE = 1024
MAX_TRAILERS = 8

_METHOD = re.compile(rb"[A-Z]{1,16}")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_VERSIONS = frozenset({b"HTTP/1.0", b"HTTP/1.1"})
_FIELD = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,8}")


class HttpError(Exception):
    """A request metad does not take: the status to answer and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class HeadLimits:
    """The bounds of a request: each line of its head, its fields, its body."""

    max_line: int
    max_fields: int
    max_body: int


@dataclass(frozen=True, slots=True)
class Head:
    """A request's head: what metad needs of it."""

    method: str
    path: str  # percent-decoded, without the query
    length: int  # the body's Content-Length (0 if none, or chunked)
    chunked: bool


def check_partial(head: bytes | bytearray, lines: int, limits: HeadLimits) -> None:
    """HttpError if ``head``, the beginning of a head with ``lines`` line ends
    and no end yet, is over a bound already."""
    if lines > limits.max_fields + 1:
        raise HttpError(400, f"Bad request: more than {limits.max_fields} header fields")
    if len(head) - (head.rfind(CRLF) + 2) > limits.max_line:
        raise HttpError(400, f"Bad request: a head line over {limits.max_line} bytes")


def parse_head(head: bytes, limits: HeadLimits) -> Head:
    """The head ``head`` (without the empty line ending it); HttpError if
    malformed or over a bound."""
    lines = head.split(CRLF)
    if len(lines) > limits.max_fields + 1:
        raise HttpError(400, f"Bad request: more than {limits.max_fields} header fields")
    if any(len(line) > limits.max_line for line in lines):
        raise HttpError(400, f"Bad request: a head line over {limits.max_line} bytes")
    parts = lines[0].split(b" ")
    if (
        len(parts) != 3
        or not _METHOD.fullmatch(parts[0])
        or not _TARGET.fullmatch(parts[1])
        or parts[2] not in _VERSIONS
    ):
        raise HttpError(400, "Bad request: malformed request line")
    fields: dict[bytes, bytes] = {}
    for line in lines[1:]:
        match = _FIELD.fullmatch(line)
        if match is None:
            raise HttpError(400, "Bad request: malformed header field")
        name, value = match.group(1).lower(), match.group(2)
        if name in fields and name in (b"content-length", b"transfer-encoding"):
            raise HttpError(400, f"Bad request: {name.decode()} given twice")
        fields[name] = value
    chunked = _chunked(fields.get(b"transfer-encoding"))
    length = _length(fields.get(b"content-length"), limits.max_body)
    if chunked and length:
        raise HttpError(400, "Bad request: both Content-Length and Transfer-Encoding")
    return Head(parts[0].decode(), _path(parts[1]), length, chunked)


def _chunked(value: bytes | None) -> bool:
    if value is None:
        return False
    if value.lower() != b"chunked":
        raise HttpError(400, "Bad request: the only transfer coding taken is chunked")
    return True


def _length(value: bytes | None, limit: int) -> int:
    if value is None:
        return 0
    if not value.isdigit() or len(value) > 18:
        raise HttpError(400, "Bad request: invalid Content-Length")
    length = int(value)
    if length > limit:
        raise HttpError(413, f"Request body over {limit} bytes")
    return length


def _path(target: bytes) -> str:
    text = target.decode("ascii")
    if not text.startswith("/"):
        # The absolute form (a proxy's): http://host/path
        scheme, sep, rest = text.partition("://")
        if not sep or scheme.lower() != "http":
            raise HttpError(400, "Bad request: the target must be a path")
        text = "/" + rest.partition("/")[2]
    path = text.partition("?")[0].partition("#")[0]
    return unquote(path, errors="replace") if "%" in path else path


class Body:
    """A request's body gathered from what arrives: ``feed`` answers it whole,
    or None while more is due; HttpError if malformed or over ``limit``."""

    def __init__(self, head: Head, limit: int) -> None:
        self._chunked = head.chunked
        self._due = head.length  # bytes of the current chunk (or body) still due
        self._limit = limit
        self._raw = bytearray()
        self._out = bytearray()
        self._trailers = 0
        # Chunked: "size" (a size line), "data" (a chunk and its CRLF), "trailer".
        self._state = "size"

    def feed(self, data: bytes) -> bytes | None:
        """Take ``data``; the whole body once it is all in."""
        self._raw += data
        if not self._chunked:
            if len(self._raw) < self._due:
                return None
            return bytes(self._raw[: self._due])
        while True:
            end = self._raw.find(CRLF)
            if self._state == "data":
                if len(self._raw) < self._due + 2:
                    return None
                if self._raw[self._due : self._due + 2] != CRLF:
                    raise HttpError(400, "Bad request: a chunk longer than its size")
                self._out += self._raw[: self._due]
                del self._raw[: self._due + 2]
                self._state = "size"
                continue
            if end < 0:
                if len(self._raw) > MAX_CHUNK_LINE:
                    raise HttpError(400, "Bad request: a chunk line too long")
                return None
            line = bytes(self._raw[:end])
            del self._raw[: end + 2]
            if self._state == "trailer":
                if not line:
                    return bytes(self._out)
                self._trailers += 1
                if self._trailers > MAX_TRAILERS:
                    raise HttpError(400, "Bad request: too many trailer fields")
                continue
            self._size_line(line)

    def _size_line(self, line: bytes) -> None:
        size = line.split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size):
            raise HttpError(400, "Bad request: malformed chunk size")
        self._due = int(size, 16)
        if len(self._out) + self._due > self._limit:
            raise HttpError(413, f"Request body over {self._limit} bytes")
        self._state = "data" if self._due else "trailer"


def response(
    status: int,
    body: bytes = b"",
    content_type: str | None = TEXT,
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A whole answer (the connection closes after it)."""
    return head(status, len(body), content_type, headers) + body


def head(
    status: int,
    length: int,
    content_type: str | None = TEXT,
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """The head of an answer whose body is ``length`` bytes."""
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    lines += [f"Content-Length: {length}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def head_only(answer: bytes) -> bytes:
    """The head of the whole answer ``answer`` (for HEAD requests)."""
    return answer[: answer.index(END_OF_HEAD) + len(END_OF_HEAD)]


NOT_FOUND_ANSWER = response(404, NOT_FOUND.encode())
