"""What the HTTPS daemons (corral-noded, corral-rapi) share about accepting
connections.  Stdlib only."""

from __future__ import annotations

import errno
import resource
import ssl

from corral.process.daemons import FD_LIMIT_CAP

# Beyond what the kernel queues, new connections are dropped (and retried a second
# later), the master's too: room for a flood that the accept loop drains quickly.
BACKLOG = 1024
# Seconds accepting pauses after running out of descriptors or memory.
ACCEPT_RETRY_DELAY = 0.5
# What accept fails with for want of descriptors or memory.
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def error_reason(err: BaseException) -> str:
    """A socket or TLS error in a few words, for the log."""
    if isinstance(err, ssl.SSLError):
        return str(err.reason or err)
    return str(err) or err.__class__.__name__


def fd_limit() -> int:
    """The soft limit of open files of this process."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else FD_LIMIT_CAP
