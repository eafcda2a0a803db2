"""corral-rapi's application: routing, origin and credential checks, bodies,
answers and errors.

Every request goes through :meth:`RapiServer.handle`, which finds the resource
in the table by the raw path (so an encoded slash never matches a name),
refuses writes from another site, checks the credentials the method needs,
parses the JSON body and answers JSON.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import math
import urllib.parse
from typing import Any

from corral import errors
from corral.luxi import protocol
from corral.rapi import dashboard, openapi
from corral.rapi.call import Call
from corral.rapi.errors import HttpError, bad_request, from_luxi
from corral.rapi.httpd.messages import BodyError, Request, Response
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
# Methods a page of another site may cause (they change nothing).
_SAFE_METHODS = frozenset({"GET", "HEAD"})
# Sec-Fetch-Site values of a request a page of another site caused.
_FOREIGN_SITES = frozenset({"cross-site", "same-site"})


class RapiServer:
    """The RAPI and the dashboard, as the HTTP server's application."""

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
        # Addresses and user names with an attempt waiting out its window.
        self._waiting: set[tuple[str, str]] = set()
        resources = [*RESOURCES, openapi.resource(RESOURCES)]
        self.router = Router(resources)

    async def handle(self, request: Request) -> Response:
        """Answer one request (RAPI errors as Ganeti's JSON error bodies)."""
        page = dashboard.answer(request.method, request.path)
        if page is not None:
            return page
        try:
            result = await self._dispatch(request)
        except HttpError as err:
            return _error_response(err)
        except BodyError as err:
            return _error_response(HttpError(err.status, err.message))
        except errors.GenericError as err:
            return _error_response(from_luxi(err))
        except Exception as err:  # a bug: logged, answered as Ganeti's RAPI does
            log.exception("Error while handling %s %s", request.method, request.target)
            return _error_response(HttpError(500, str(err) or err.__class__.__name__))
        return Response(200, protocol.dumps(result), JSON)

    def error(self, status: int, message: str) -> Response:
        """Ganeti's JSON error for a request the HTTP server refused."""
        return _error_response(HttpError(status, message))

    async def _dispatch(self, request: Request) -> Any:
        _check_origin(request)
        raw_path = request.path
        found = self.router.find(raw_path)
        if found is None:
            raise HttpError(404)
        resource, items = found
        method = resource.methods.get(request.method)
        if method is None:
            raise HttpError(501, f"Method {request.method} is unsupported for path {raw_path}")
        await self._authenticate(request, method)
        body = await _read_body(request)
        query = urllib.parse.parse_qs(request.query)
        call = Call(resource.name, items, query, body, self.luxi)
        return await method.handler(call)

    async def _authenticate(self, request: Request, method: Method) -> None:
        """Ganeti's rules: credentials are checked when the method needs them,
        the daemon requires them, or the client sent them anyway."""
        header = request.headers.get("authorization")
        if not (self.require_auth or method.access or header):
            return
        if header is None:
            raise HttpError(401, headers=_UNAUTHORIZED_HEADERS)
        client = request.peer
        credentials = _basic_credentials(header)
        name = credentials[0] if credentials else ""
        await self._wait_turn(client, name, header)
        user = self._check_credentials(credentials)
        if user is None:
            log.warning("Failed login from %s for %s", client, request.path)
            self.throttle.failed(client, name, header)
            raise HttpError(401, headers=_UNAUTHORIZED_HEADERS)
        self.throttle.succeeded(client, header)
        request.authenticated()
        if method.access and not (user.options & method.access):
            raise HttpError(403)

    async def _wait_turn(self, client: str, name: str, header: str) -> None:
        """Wait out the throttle's window, if any.  One attempt per address and
        per user name waits at a time; the others are refused at once (429)."""
        wait = self.throttle.wait(client, name, header)
        if not wait:
            return
        keys = {("address", client), ("user", name)}
        if keys & self._waiting:
            seconds = max(1, math.ceil(wait))
            raise HttpError(
                429,
                f"Too many failed logins from {client} or for this user; retry in {seconds} s",
                headers={"Retry-After": str(seconds)},
            )
        self._waiting |= keys
        try:
            while wait:
                await asyncio.sleep(wait)
                wait = self.throttle.wait(client, name, header)
        finally:
            self._waiting -= keys

    def _check_credentials(self, credentials: tuple[str, str] | None) -> User | None:
        if credentials is None:
            return None
        username, password = credentials
        user = self.users.get(username)
        if user is None or not password_matches(user, password):
            return None
        return user


def _basic_credentials(header: str) -> tuple[str, str] | None:
    """User name and password of a Basic ``Authorization`` header; None if it is
    not one (400 if it has no credentials at all)."""
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
    return (username, password) if sep else None


def _check_origin(request: Request) -> None:
    """Refuse a write a page of another site caused (cross-site request forgery).

    Browsers send ``Origin`` with every POST, PUT and DELETE, and
    ``Sec-Fetch-Site``; other clients (Ganeti's, curl) send neither.  The
    dashboard's own requests name this server itself.
    """
    if request.method in _SAFE_METHODS:
        return
    site = request.headers.get("sec-fetch-site", "").strip().lower()
    origin = request.headers.get("origin")
    own = f"{request.scheme}://{request.headers.get('host', '')}".lower()
    if site in _FOREIGN_SITES or (origin is not None and origin.strip().lower() != own):
        raise HttpError(
            403,
            f"Refused a {request.method} caused by a page of another site"
            f" ({origin or site}): writes come from this server's own dashboard"
            " or from clients that are not browsers",
        )


async def _read_body(request: Request) -> Any:
    """The parsed JSON body, or None without one; 415 for another media type."""
    if not request.has_body:
        return None
    data = await request.read_body()
    if not data:
        return None
    media_type = request.headers.get("content-type", "application/octet-stream")
    if media_type.split(";", 1)[0].strip().lower() != JSON:
        raise HttpError(415)
    try:
        return protocol.load_json(data)
    except ValueError as err:
        raise bad_request(f"Unable to parse JSON data: {err}") from None


def _error_response(err: HttpError) -> Response:
    return Response(err.status, err.body(), JSON, dict(err.headers))
