"""The dashboard's static files (``corral/rapi/ui/``), served at ``/ui/``."""

from __future__ import annotations

import functools
from pathlib import Path

from aiohttp import web

UI_DIR = Path(__file__).with_name("ui")
_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
# The page runs only its own scripts and talks only to this server.
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@functools.cache
def _files() -> dict[str, tuple[bytes, str]]:
    """Every file of the dashboard, read once: only these are ever served."""
    return {
        path.name: (path.read_bytes(), _TYPES[path.suffix])
        for path in UI_DIR.iterdir()
        if path.is_file() and path.suffix in _TYPES
    }


async def redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/ui/")


async def serve(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"] or "index.html"
    found = _files().get(name)
    if found is None:
        raise web.HTTPNotFound()
    body, content_type = found
    return web.Response(body=body, content_type=content_type, headers=_HEADERS)
