"""What the application sees of HTTP: a request, its answer, body errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


class BodyError(Exception):
    """A request body that could not be read: its status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Request:
    """One request whose head has arrived; the body is read on demand."""

    method: str
    target: str  # as sent: the path and query, still percent-encoded
    headers: Mapping[str, str]  # names in lower case; repeated fields joined by ", "
    peer: str  # the client's address
    scheme: str  # "https" or "http"
    # The whole body (b"" without one); BodyError if it is too large, too slow
    # or malformed.  Reading it sends "100 Continue" to a client that asked.
    read_body: Callable[[], Awaitable[bytes]]
    # Tells the connection that the client sent valid credentials: it then
    # counts as authenticated, the last to be closed for newcomers.
    authenticated: Callable[[], None]

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def query(self) -> str:
        return self.target.partition("?")[2]

    @property
    def has_body(self) -> bool:
        """Whether the head announces a body (a non-zero length, or chunks)."""
        length = self.headers.get("content-length", "0").strip()
        return "transfer-encoding" in self.headers or length not in ("", "0")


@dataclass
class Response:
    """An answer; HEAD requests get its head only."""

    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


class Application(Protocol):
    """What the server calls: one handler for every request, one for errors."""

    async def handle(self, request: Request) -> Response:
        """The answer to ``request``."""

    def error(self, status: int, message: str) -> Response:
        """The answer to a request the server refused before ``handle``."""
