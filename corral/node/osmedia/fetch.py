"""Streaming http(s) GETs for OS media, with optional basic auth.

Blocking (urllib): called from worker threads.  The environment's proxies are
not used: an image URL names the server the node must reach itself.  Errors
are one-line OpExecErrors saying what failed and what to do; credentials never
appear in them.
"""

from __future__ import annotations

import base64
import http.client
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, BinaryIO

from corral import errors

# Seconds without progress before a download is abandoned.
TIMEOUT = 60.0
CHUNK = 1 << 20
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_CONTENT_RANGE = re.compile(r"bytes \d+-\d+/(\d+)")


@dataclass(frozen=True)
class Credentials:
    """Basic-auth user and password (never shown)."""

    user: str
    password: str

    def __repr__(self) -> str:
        return "Credentials(<redacted>)"

    def header(self) -> str:
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"


@dataclass(frozen=True)
class Response:
    """An open answer: its body stream and what the server said of its size."""

    body: BinaryIO
    length: int | None  # the whole resource's size in bytes, if the server said it


@contextmanager
def get(
    url: str, auth: Credentials | None = None, *, first_bytes: int | None = None
) -> Iterator[Response]:
    """GET ``url`` (only its first bytes if asked: a Range request, which a
    server may ignore); OpExecError if it cannot be fetched."""
    request = urllib.request.Request(url)
    if auth is not None:
        request.add_header("Authorization", auth.header())
    if first_bytes is not None:
        request.add_header("Range", f"bytes=0-{first_bytes - 1}")
    try:
        answer = _OPENER.open(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as err:
        err.close()
        raise _http_error(url, err.code, err.reason) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise errors.OpExecError(
            f"Could not fetch {url}: {reason}; check that the URL is right and that"
            " the node can reach it"
        ) from None
    with answer:
        yield Response(answer, _length(answer))


def _length(answer: http.client.HTTPResponse) -> int | None:
    whole = _CONTENT_RANGE.fullmatch(answer.headers.get("Content-Range", ""))
    if answer.status == 206 and whole:
        return int(whole.group(1))
    length = answer.headers.get("Content-Length")
    if answer.status == 200 and length is not None and length.isdigit():
        return int(length)
    return None


def _http_error(url: str, code: int, reason: str) -> errors.OpExecError:
    if code == 401:
        return errors.OpExecError(
            f"{url} answered 401 Unauthorized: the credentials are wrong or missing"
            " (give them as the secret parameters os-package-user and os-package-password)"
        )
    return errors.OpExecError(f"{url} answered {code} {reason}; check the URL")


def head(url: str, auth: Credentials | None, size: int) -> bytes:
    """The first ``size`` bytes of ``url`` (fewer if it is shorter)."""
    with get(url, auth, first_bytes=size) as answer:
        return read_exactly(answer.body, size)


def read_exactly(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes of ``stream`` (fewer only at its end)."""
    parts, left = [], size
    while left > 0:
        part = stream.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def download(
    url: str,
    auth: Credentials | None,
    target: IO[bytes],
    limit: int,
    on_progress: Callable[[int], None] = lambda _done: None,
) -> int:
    """Stream ``url`` into ``target`` (never whole in memory); the bytes
    written.  OpExecError if it holds more than ``limit`` bytes."""
    done = 0
    with get(url, auth) as answer:
        if answer.length is not None and answer.length > limit:
            raise _too_large(url, answer.length, limit)
        while chunk := answer.body.read(CHUNK):
            done += len(chunk)
            if done > limit:
                raise _too_large(url, done, limit)
            target.write(chunk)
            on_progress(done)
    return done


def _too_large(url: str, size: int, limit: int) -> errors.OpExecError:
    return errors.OpExecError(
        f"{url} holds more than {limit} bytes (at least {size}); it does not fit"
    )
