"""systemd's readiness notification (sd_notify(3)) for daemons run by a unit
of ``Type=notify``: the daemon says ``READY=1`` once it serves, so that
``systemctl start`` returns when the daemon serves, as the start path of
``gnt-cluster init`` does (:func:`corral.process.daemons.start_daemon`).

Stdlib only, and nothing happens without ``$NOTIFY_SOCKET`` (no systemd).
"""

from __future__ import annotations

import os
import socket

_VARIABLE = "NOTIFY_SOCKET"


def notify(state: str) -> bool:
    """Send ``state`` (such as ``READY=1``) to systemd; whether it was sent.

    The variable is removed once used (sd_notify's ``unset_environment``):
    the daemon's children (metad started by noded, hooks, OS scripts) are no
    unit's main process, and systemd would log their messages as refused.
    """
    address = os.environ.pop(_VARIABLE, "")
    if not address.startswith(("/", "@")):
        return False
    if address.startswith("@"):  # the abstract namespace
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True
