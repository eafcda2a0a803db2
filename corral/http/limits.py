"""How many connections noded holds, and for how long: options of corral-noded.

Stdlib only: corral-noded takes the defaults for its options from here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

# Seconds a client gets to finish its TLS handshake (masterd's connect and
# handshake time-out is 10 s too).
HANDSHAKE_TIMEOUT = 10.0
# Seconds an authenticated connection may stay idle; longer than masterd keeps
# an idle connection (aiohttp's 15 s), so that noded never closes one masterd
# is about to reuse.
IDLE_TIMEOUT = 60.0
# Connections waiting for their handshake at once; the oldest goes for a new one.
MAX_UNAUTHENTICATED = 128
# Connections open at once, authenticated or not.
MAX_CONNECTIONS = 1000
# Descriptors kept free of connections: files, scripts' pipes, the log.
FD_RESERVE = 64
# The least max_connections may become for a small limit of open files.
_MIN_CONNECTIONS = 16


@dataclass(frozen=True)
class ConnectionLimits:
    """A daemon's time-outs (seconds) and bounds on connections (noded's by default)."""

    handshake_timeout: float = HANDSHAKE_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    max_connections: int = MAX_CONNECTIONS

    def within_fd_limit(self, fd_limit: int) -> Self:
        """These limits, with the bounds lowered to fit ``fd_limit`` descriptors."""
        total = max(min(self.max_connections, fd_limit - FD_RESERVE), _MIN_CONNECTIONS)
        return replace(
            self,
            max_connections=total,
            max_unauthenticated=min(self.max_unauthenticated, total),
        )
