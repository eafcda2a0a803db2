"""corral-rapi's HTTP side: routing, authentication, bodies, answers and errors.

Every request goes through one aiohttp handler that finds the resource in the
table by the raw path (so an encoded slash never matches a name), checks the
credentials the method needs, parses the JSON body and answers JSON.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from corral import errors
from corral.luxi import protocol
from corral.rapi import dashboard, openapi
from corral.rapi.call import Call
from corral.rapi.errors import HttpError, bad_request, from_luxi
from corral.rapi.luxi import LuxiPool
from corral.rapi.resources import RESOURCES, Router
from corral.rapi.table import Method
from corral.rapi.throttle import LoginThrottle
from corral.rapi.users import REALM, User, UsersFile, password_matches

log = logging.getLogger(__name__)

JSON = "application/json"
# Largest request body taken (instance creations are a few kB).
MAX_BODY = 1 << 20
_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": f'Basic realm="{REALM}"'}


class _Turn:
    """The login attempts of one client, in progress or waiting."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class RapiServer:
    """The aiohttp application of corral-rapi."""

    def __init__(
        self,
        luxi: LuxiPool,
        users: UsersFile,
        *,
        require_auth: bool = False,
        throttle: LoginThrottle | None = None,
        max_body: int = MAX_BODY,
    ) -> None:
        self.luxi = luxi
        self.users = users
        self.require_auth = require_auth
        self.throttle = throttle if throttle is not None else LoginThrottle()
        self.max_body = max_body
        self._turns: dict[str, _Turn] = {}
        resources = [*RESOURCES, openapi.resource(RESOURCES)]
        self.router = Router(resources)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body, handler_args={"max_field_size": 16384})
        app.router.add_route("*", "/ui", dashboard.redirect)
        app.router.add_route("GET", "/ui/{name:.*}", dashboard.serve)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one RAPI request (errors as Ganeti's JSON error bodies)."""
        try:
            result = await self._dispatch(request)
        except HttpError as err:
            return _error_response(err)
        except web.HTTPRequestEntityTooLarge:
            return _error_response(HttpError(413, f"Request body over {self.max_body} bytes"))
        except errors.GenericError as err:
            return _error_response(from_luxi(err))
        except Exception as err:  # a bug: logged, answered as Ganeti's RAPI does
            log.exception("Error while handling %s %s", request.method, request.rel_url)
            return _error_response(HttpError(500, str(err) or err.__class__.__name__))
        return web.Response(body=protocol.dumps(result), content_type=JSON)

    async def _dispatch(self, request: web.Request) -> Any:
        raw_path = request.rel_url.raw_path
        found = self.router.find(raw_path)
        if found is None:
            raise HttpError(404)
        resource, items = found
        method = resource.methods.get(request.method)
        if method is None:
            raise HttpError(501, f"Method {request.method} is unsupported for path {raw_path}")
        await self._authenticate(request, method)
        body = await _read_body(request)
        query = urllib.parse.parse_qs(request.rel_url.raw_query_string)
        call = Call(resource.name, items, query, body, self.luxi)
        return await method.handler(call)

    async def _authenticate(self, request: web.Request, method: Method) -> None:
        """Ganeti's rules: credentials are checked when the method needs them,
        the daemon requires them, or the client sent them anyway."""
        header = request.headers.get("Authorization")
        if not (self.require_auth or method.access or header):
            return
        if header is None:
            raise HttpError(401, headers=_UNAUTHORIZED_HEADERS)
        client = request.remote or "?"
        async with self._turn(client):
            # After failures, every attempt of the client waits (right ones
            # too: answering those at once would let guessing skip the delay).
            delay = self.throttle.delay(client)
            if delay:
                await asyncio.sleep(delay)
            user = self._check_credentials(header)
            if user is None:
                log.warning("Failed login from %s for %s", client, request.rel_url.raw_path)
                self.throttle.failed(client)
                raise HttpError(401, headers=_UNAUTHORIZED_HEADERS)
            self.throttle.succeeded(client)
        if method.access and not (user.options & method.access):
            raise HttpError(403)

    @contextlib.asynccontextmanager
    async def _turn(self, client: str) -> AsyncIterator[None]:
        """One login attempt of ``client`` at a time, so that parallel
        attempts wait their delays one after the other."""
        entry = self._turns.setdefault(client, _Turn())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._turns[client]

    def _check_credentials(self, header: str) -> User | None:
        parts = header.strip().split(None, 1)
        if not parts or parts[0].lower() != "basic":
            return None
        if len(parts) < 2:
            raise bad_request("Basic authentication requires credentials")
        try:
            decoded = base64.b64decode(parts[1].encode("ascii"), validate=True).decode("utf-8")
        except (ValueError, binascii.Error, UnicodeError):
            return None
        username, sep, password = decoded.partition(":")
        if not sep:
            return None
        user = self.users.get(username)
        if user is None or not password_matches(user, password):
            return None
        return user


async def _read_body(request: web.Request) -> Any:
    """The parsed JSON body, or None without one; 415 for another media type."""
    if not request.body_exists:
        return None
    data = await request.read()
    if not data:
        return None
    media_type = request.headers.get("Content-Type", "application/octet-stream")
    if media_type.split(";", 1)[0].strip().lower() != JSON:
        raise HttpError(415)
    try:
        return protocol.load_json(data)
    except ValueError as err:
        raise bad_request(f"Unable to parse JSON data: {err}") from None


def _error_response(err: HttpError) -> web.Response:
    return web.Response(status=err.status, body=err.body(), content_type=JSON, headers=err.headers)
