"""The dashboard's static files (``corral/rapi/ui/``), served at ``/ui/``."""

from __future__ import annotations

import functools
from pathlib import Path

from corral.rapi.httpd.messages import Response

UI_DIR = Path(__file__).with_name("ui")
PREFIX = "/ui/"
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


def answer(method: str, path: str) -> Response | None:
    """The answer if ``path`` is the dashboard's; None for the RAPI's paths."""
    if path == PREFIX.rstrip("/"):
        return Response(302, headers={"Location": PREFIX})
    if method != "GET" or not path.startswith(PREFIX):
        return None
    found = _files().get(path[len(PREFIX) :] or "index.html")
    if found is None:
        return Response(404, b"404: Not Found", "text/plain")
    body, content_type = found
    return Response(200, body, content_type, dict(_HEADERS))
