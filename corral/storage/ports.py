"""Network ports of instances (Ganeti's AllocatePort): a kvm instance's VNC
display is its port - 5900.

Ganeti hands out one more than the highest port used so far, from 11000 on;
Corral does the same from the ports the configuration's instances hold and
those running jobs reserved (:mod:`corral.storage.reservations`): two
concurrent creations never get one port, and removing an instance frees its.
"""

from __future__ import annotations

from corral.storage.strategy import RES_PORT, Ledger

FIRST_PORT = 11000  # Ganeti's FIRST_DRBD_PORT, where its port counter starts


def allocate_port(ledger: Ledger) -> int:
    """A port no instance holds, reserved for the ledger's job until it ends."""
    return ledger.allocate(RES_PORT, None, FIRST_PORT)
