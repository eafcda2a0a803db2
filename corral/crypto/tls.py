"""TLS contexts of the node RPC: mutual authentication under the cluster CA.

Standard library only, so that masterd does not load ``cryptography`` (about
10 MB of memory) just to talk to its nodes.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from corral import errors
from corral.paths import Paths


def _context(purpose: int, certfile: Path, cafile: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(purpose)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(certfile)
        ctx.load_verify_locations(cafile)
    except (OSError, ssl.SSLError) as err:
        raise errors.X509CertError(f"Cannot load {certfile} or {cafile}: {err}") from None
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def ssl_server_context(paths: Paths) -> ssl.SSLContext:
    """TLS context of noded: presents server.pem, requires a CA-signed client cert."""
    return _context(ssl.PROTOCOL_TLS_SERVER, paths.server_pem, paths.ca_cert)


def ssl_client_context(paths: Paths, certfile: Path | None = None) -> ssl.SSLContext:
    """TLS context of an RPC client: presents client.pem, verifies the node's chain.

    Host names are not checked because nodes are called by IP address; the
    chain to the cluster CA is what authenticates the node.
    """
    ctx = _context(ssl.PROTOCOL_TLS_CLIENT, certfile or paths.client_pem, paths.ca_cert)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED  # check_hostname=False must not weaken this
    return ctx
