"""An http server on loopback for OS images and personalization packages:
files by URL path, some behind basic auth, every request counted.

It answers Range requests for the first bytes (206, as web servers do: the
node's probes use them) and serves the rest whole, with a Content-Length.
"""

from __future__ import annotations

import base64
import re
import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=0-(\d+)")
HOLD_TIMEOUT = 30.0  # seconds a held answer waits at most for its gate


@dataclass
class MediaServer:
    """What the server serves, and what it was asked."""

    files: dict[str, Path] = field(default_factory=dict)
    # URL path → "user:password" it needs.
    protected: dict[str, str] = field(default_factory=dict)
    # (path, "whole" | "range" | "refused") → how many requests.
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    # URL path → (bytes, gate): a whole answer stops after that many bytes
    # until the gate opens (a test's look at a transfer under way).
    holds: dict[str, tuple[int, threading.Event]] = field(default_factory=dict)
    base: str = ""

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def whole_fetches(self, path: str) -> int:
        """How many times ``path`` was sent whole."""
        return self.requests[(path, "whole")]


def _handler(server: MediaServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the test reads ``requests``."""

        def do_GET(self) -> None:
            source = server.files.get(self.path)
            if source is None:
                self.send_error(404)
                return
            needed = server.protected.get(self.path)
            given = self.headers.get("Authorization", "")
            if needed is not None and given != "Basic " + base64.b64encode(needed.encode()).decode(
                "ascii"
            ):
                server.requests[(self.path, "refused")] += 1
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="media"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._send(source)

        def _send(self, source: Path) -> None:
            size = source.stat().st_size
            wanted = _RANGE.fullmatch(self.headers.get("Range", ""))
            with source.open("rb") as body:
                if wanted:
                    server.requests[(self.path, "range")] += 1
                    end = min(int(wanted.group(1)), size - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes 0-{end}/{size}")
                    self.send_header("Content-Length", str(end + 1))
                    self.end_headers()
                    self.wfile.write(body.read(end + 1))
                    return
                server.requests[(self.path, "whole")] += 1
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                hold = server.holds.get(self.path)
                if hold is not None:
                    self.wfile.write(body.read(hold[0]))
                    self.wfile.flush()
                    hold[1].wait(HOLD_TIMEOUT)
                shutil.copyfileobj(body, self.wfile, 1 << 20)

    return Handler


@contextmanager
def media_server(address: str = "127.0.0.1") -> Iterator[MediaServer]:
    """A server on ``address`` and a port the kernel picks (unique), stopped after."""
    state = MediaServer()
    httpd = ThreadingHTTPServer((address, 0), _handler(state))
    httpd.daemon_threads = True
    state.base = f"http://{address}:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="media-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
