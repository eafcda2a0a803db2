"""The stream's connection: TLS 1.3, a certificate checked on both ends.

Between nodes of one cluster both ends present their node certificate
(``server.pem``, valid for client and server authentication) and require the
peer's to be signed by the cluster CA.  Between clusters each end presents
the per-move key made by ``x509_cert_create`` and requires exactly the
certificate the other cluster sent (``ca_pem``); the exporter then also checks
that the certificate names the host it connects to (its IP or DNS
subjectAltName, as current TLS stacks check hosts).

Dead peers are found by TCP keepalive and a user time-out of a few seconds,
not by time-outs on each read (a paused stream is not a dead one).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from corral import errors
from corral.node.impexp import x509keys
from corral.paths import Paths

# Keepalive: the first probe after 5 s idle, then every 2 s, 3 unanswered: dead.
KEEPIDLE, KEEPINTVL, KEEPCNT = 5, 2, 3
# Data sent and not acknowledged for this long: the peer is gone (ms).  Linux
# counts a receive window closed that long too (a destination that stopped
# writing), so not too short: a slow disk is not a dead peer.
USER_TIMEOUT_MS = 30000
# A TLS handshake (and the header after it) must be done within this.
HANDSHAKE_TIMEOUT = 10.0
# Between two connection attempts of an exporter.
RETRY_DELAY = 0.5


def _context(purpose: ssl._SSLMethod, paths: Paths, key_name: str | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(purpose)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if key_name is None:
        certfile: Path = paths.server_pem
        keyfile: Path | None = None
    else:
        keyfile, certfile = x509keys.files(paths, key_name)
    try:
        ctx.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as err:
        raise errors.X509CertError(f"Cannot load the certificate {certfile}: {err}") from None
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _trust(ctx: ssl.SSLContext, paths: Paths, ca_pem: str | None) -> None:
    try:
        if ca_pem is None:
            ctx.load_verify_locations(paths.ca_cert)
        else:
            ctx.load_verify_locations(cadata=ca_pem)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise errors.X509CertError(f"Cannot load the peer's CA certificate: {err}") from None


def server_context(paths: Paths, key_name: str | None, ca_pem: str | None) -> ssl.SSLContext:
    """The importer's context: requires the exporter's certificate."""
    ctx = _context(ssl.PROTOCOL_TLS_SERVER, paths, key_name)
    _trust(ctx, paths, ca_pem)
    return ctx


def client_context(paths: Paths, key_name: str | None, ca_pem: str | None) -> ssl.SSLContext:
    """The exporter's context: checks the importer's certificate, and its host
    name when the peer is another cluster's (``ca_pem`` given)."""
    ctx = _context(ssl.PROTOCOL_TLS_CLIENT, paths, key_name)
    _trust(ctx, paths, ca_pem)
    # Inside a cluster nodes are called by address; the chain to the cluster
    # CA is what authenticates them.
    ctx.check_hostname = ca_pem is not None
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def tune(sock: socket.socket) -> None:
    """Keepalive and user time-out: a vanished peer fails the stream in seconds."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPIDLE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPINTVL)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPCNT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, USER_TIMEOUT_MS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def listen(address: str) -> socket.socket:
    """A socket listening on ``address``, on a port the kernel picks."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
        sock.listen(4)
    except OSError as err:
        sock.close()
        raise errors.OpExecError(f"Cannot listen on {address}: {err.strerror}") from None
    return sock


def handshake(
    raw: socket.socket, ctx: ssl.SSLContext, *, server_side: bool, hostname: str | None = None
) -> ssl.SSLSocket:
    """TLS over the connected ``raw`` (closed on failure), with the handshake time-out."""
    raw.settimeout(HANDSHAKE_TIMEOUT)
    try:
        return ctx.wrap_socket(raw, server_side=server_side, server_hostname=hostname)
    except BaseException:
        raw.close()
        raise


def connect(
    host: str,
    port: int,
    ctx: ssl.SSLContext,
    deadline: float,
    stopped: threading.Event,
    note: Callable[[str], None],
) -> ssl.SSLSocket:
    """A TLS connection to the importer, retried until ``deadline`` (monotonic)."""
    last = "no attempt"
    while not stopped.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.OpExecError(f"Cannot connect to {host}:{port}: {last}")
        try:
            raw = socket.create_connection((host, port), timeout=min(remaining, 5.0))
        except OSError as err:
            if last == "no attempt":
                note(f"cannot connect to {host}:{port} yet ({err.strerror or err}); retrying")
            last = err.strerror or str(err)
            stopped.wait(min(RETRY_DELAY, max(remaining, 0)))
            continue
        tune(raw)
        try:
            return handshake(raw, ctx, server_side=False, hostname=host)
        except ssl.SSLCertVerificationError as err:
            raise errors.OpExecError(
                f"The importer at {host}:{port} has an unacceptable certificate:"
                f" {err.verify_message}"
            ) from None
        except (OSError, ssl.SSLError) as err:
            raise errors.OpExecError(f"TLS with {host}:{port} failed: {err}") from None
    raise errors.OpExecError("aborted")


def shut(sock: socket.socket | None) -> None:
    """Shut ``sock`` down: a thread blocked on it wakes up (its owner closes it)."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
