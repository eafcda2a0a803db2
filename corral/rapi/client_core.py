"""What the RAPI client's two transports share: requests, answers, errors.

A call of the client is built once, as a :class:`Request` (method, path, query
arguments, JSON body, and how to shape the answer), or as a generator of
requests for calls that take several round trips (:func:`steps`). The
blocking and the asyncio transports only send requests and feed the answers
back; :class:`Endpoint` makes each call a plain method on the first and a
coroutine on the second, with one signature and one docstring for both.

Standard library only, and none of its slow modules (see corral/cli/__init__.py):
command-line tools import the blocking client.
"""

from __future__ import annotations

import base64
import html
import json
from urllib.parse import quote, urlencode

from corral import constants as C

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Generator, Iterable
    from typing import Any, Concatenate, Generic, ParamSpec, TypeAlias, TypeVar, overload

    P = ParamSpec("P")
    T = TypeVar("T")
    #: a call of several round trips: yields requests, receives their answers
    Steps: TypeAlias = Generator["Request[Any]", Any, T]
    QueryArgs: TypeAlias = "list[tuple[str, object]]"
else:
    # typing costs ~20 ms to import; at run time the generic classes are plain.
    class Generic:
        def __class_getitem__(cls, _params):
            return cls

    P = T = None

DEFAULT_PORT = C.DEFAULT_RAPI_PORT
API = "/2"
JSON_TYPE = "application/json"
USER_AGENT = "Corral RAPI client"

JOB_STATUS_SUCCESS = C.JOB_STATUS_SUCCESS
JOB_STATUS_FINALIZED = C.JOB_STATUS_FINALIZED


class RapiError(Exception):
    """An error answer of the server: the HTTP status and Ganeti's
    ``{"code", "message", "explain"}`` body (``message`` is the raw text of an
    answer that is not such a body)."""

    def __init__(self, code: int | None, message: str, explain: str | None = None) -> None:
        super().__init__(code, message, explain)
        self.code = code
        self.message = message
        self.explain = explain

    def __str__(self) -> str:
        text = f"{self.code} {self.message}" if self.code is not None else self.message
        return f"{text}: {self.explain}" if self.explain else text


class RapiConnectionError(RapiError):
    """The server could not be reached or broke the connection (``code`` is None)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class CertificateError(RapiConnectionError):
    """The server's TLS certificate did not verify against the CA file."""


class Request(Generic[T]):
    """One HTTP request of the API and how to shape its decoded JSON answer."""

    __slots__ = ("body", "decode", "method", "path", "query")

    def __init__(
        self,
        method: str,
        path: str,
        query: QueryArgs | None = None,
        body: object = None,
        decode: Callable[[Any], T] | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query or []
        self.body = body
        self.decode = decode

    def target(self) -> str:
        """The request target: the path and the encoded query arguments."""
        if not self.query:
            return self.path
        return f"{self.path}?{urlencode([(k, _query_value(v)) for k, v in self.query])}"

    def content(self) -> bytes | None:
        """The JSON-encoded body, or None for a request without one."""
        return None if self.body is None else json.dumps(self.body).encode()

    def answer(self, status: int, data: bytes) -> T:
        """The decoded answer; raises :class:`RapiError` for an error status."""
        if not 200 <= status < 300:
            raise error_from_answer(status, data)
        try:
            value: Any = json.loads(data) if data else None
        except ValueError:
            raise RapiError(status, f"Invalid JSON in the answer: {_text(data)}") from None
        return value if self.decode is None else self.decode(value)

    def __repr__(self) -> str:
        return f"Request({self.method} {self.target()})"


def _query_value(value: object) -> str:
    # The RAPI takes booleans as 0/1, not true/false.
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list | tuple | dict):
        raise ValueError(f"Invalid query argument type {type(value).__name__}")
    return str(value)


def _text(data: bytes, limit: int = 500) -> str:
    return data.decode("utf-8", "replace").strip()[:limit]


def error_from_answer(status: int, data: bytes) -> RapiError:
    """The error for an answer with an error ``status``."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        # Ganeti's server HTML-escapes the message (for browsers); people read it here.
        explain = body.get("explain")
        message = html.unescape(str(body["message"]))
        return RapiError(status, message, html.unescape(str(explain)) if explain else None)
    return RapiError(status, _text(data) or f"HTTP status {status}")


def headers(username: str | None, password: str | None) -> dict[str, str]:
    """The headers of every request (Ganeti's client too sends the content
    type on every request, with or without a body)."""
    result = {"Accept": JSON_TYPE, "Content-Type": JSON_TYPE, "User-Agent": USER_AGENT}
    if username is not None:
        token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        result["Authorization"] = f"Basic {token}"
    return result


def check_credentials(username: str | None, password: str | None) -> None:
    """Both or neither, as Ganeti's client."""
    if (username is None) != (password is None):
        raise ValueError("Give both a user name and a password, or neither")


def base_url(scheme: str, host: str, port: int) -> str:
    if scheme not in ("https", "http"):
        raise ValueError(f"Unknown scheme {scheme!r}: use https or http")
    netloc = f"[{host}]" if ":" in host else host  # an IPv6 address
    return f"{scheme}://{netloc}:{port}"


def path(template: str, *names: object) -> str:
    """``template`` with each ``{}`` replaced by a URL-quoted name ('/' too)."""
    return template.format(*(quote(str(name), safe="") for name in names))


def args(*pairs: tuple[str, object], reason: str | None = None) -> QueryArgs:
    """Query arguments: the pairs whose value is not None, then ``reason``."""
    query: QueryArgs = [(key, value) for key, value in pairs if value is not None]
    if reason is not None:
        query.append(("reason", reason))
    return query


def tag_args(tags: Iterable[str], dry_run: bool, reason: str | None) -> QueryArgs:
    return [("tag", tag) for tag in tags] + args(("dry-run", dry_run or None), reason=reason)


def given(**fields: Any) -> dict[str, Any]:
    """The fields that are not None (optional body fields are left out)."""
    return {key: value for key, value in fields.items() if value is not None}


def job_id(value: Any) -> int:
    """Job ids travel as JSON strings; the client gives them as ints."""
    return int(value)


def ids(key: str) -> Callable[[list[dict[str, Any]]], list[Any]]:
    """The decoder of a non-bulk list: each item's ``key``."""

    def decode(items: list[dict[str, Any]]) -> list[Any]:
        return [item[key] for item in items]

    return decode


def job(
    method: str, target: str, query: QueryArgs | None = None, body: object = None
) -> Request[int]:
    """A request that submits a job and answers its id."""
    return Request(method, target, query, body, job_id)


class AsyncTransport:
    """Base of the asyncio transport: its calls are coroutines (see Endpoint)."""


class Endpoint(Generic[P, T]):
    """A call of the API, written once: a method of the blocking client, a
    coroutine method of the asyncio one. ``build`` gives the call's
    :class:`Request` or its generator of requests; the instance's ``_run``
    sends them."""

    def __init__(self, build: Callable[..., Any]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.__name__ = build.__name__

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type) -> Endpoint[P, T]: ...

        @overload
        def __get__(
            self, obj: AsyncTransport, owner: type
        ) -> Callable[P, Coroutine[Any, Any, T]]: ...

        @overload
        def __get__(self, obj: object, owner: type) -> Callable[P, T]: ...

    def __get__(self, obj: object, owner: type) -> Any:
        if obj is None:
            return self
        build, run = self.build, obj._run  # type: ignore[attr-defined]

        def call(*args: Any, **kwargs: Any) -> Any:
            return run(build(obj, *args, **kwargs))

        call.__name__ = self.__name__
        call.__doc__ = self.__doc__
        return call


def call(build: Callable[Concatenate[Any, P], Request[T]]) -> Endpoint[P, T]:
    """Decorator: a call of one request."""
    return Endpoint(build)


def steps(build: Callable[Concatenate[Any, P], Steps[T]]) -> Endpoint[P, T]:
    """Decorator: a call of several requests (a generator, see ``Steps``)."""
    return Endpoint(build)
