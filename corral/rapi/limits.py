"""How long corral-rapi waits for its clients, and how many it holds.

Stdlib only: corral-rapi's option parser takes its defaults from here.

A connection is *waiting on its client* while its TLS handshake, a request's
head or body, or the reading of an answer is up to the client; every such wait
has a deadline.  A connection is *authenticated* once it sent valid
credentials.  New connections beyond the bounds close the connection that has
waited on its client the longest (an unauthenticated one first), provided it
has waited at least ``EVICTABLE_AFTER``: younger ones are a burst, which the
kernel's backlog holds until room is made.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.http.limits import ConnectionLimits

# Seconds a client gets for each of: the head of a request (the first one from
# the end of the handshake), its body, reading the answer.  The handshake and
# idle time-outs are noded's (corral.http.limits).
REQUEST_TIMEOUT = 10.0
# Connections that have not sent valid credentials, open at once.
MAX_UNAUTHENTICATED = 1024
# Connections open at once, authenticated or not.
MAX_CONNECTIONS = 2048
# Seconds a connection must have waited on its client before a newcomer may
# close it: a legitimate client is done with any step well before, even on a
# machine whose cores are all taken.  There, with 1 s, the flood's
# reconnections cut up to half of a burst of 500 in their handshakes; with 2 s,
# none.  The price: beyond the bounds, newcomers wait longer for room.
EVICTABLE_AFTER = 3.0
# Each deadline is up to this share later, at random: connections opened
# together (a flood) would otherwise all end, and come back, together.
DEADLINE_SPREAD = 0.2
# Seconds requests in progress get to finish when the daemon stops.
STOP_GRACE = 0.5


@dataclass(frozen=True)
class RapiLimits(ConnectionLimits):
    """corral-rapi's time-outs (seconds) and bounds on connections."""

    request_timeout: float = REQUEST_TIMEOUT
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    max_connections: int = MAX_CONNECTIONS
