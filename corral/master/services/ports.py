"""Network ports of instances (Ganeti's AllocatePort): a kvm instance's VNC
display is its port - 5900.

Ganeti hands out one more than the highest port used so far, from 11000 on;
Corral does the same from the ports the configuration holds, plus those of
creations still running (not yet committed), which masterd keeps in memory:
two concurrent creations never get one port.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from corral.config.manager import ConfigManager

FIRST_PORT = 11000  # Ganeti's FIRST_DRBD_PORT, where its port counter starts

_IN_FLIGHT: set[int] = set()


@contextmanager
def reserved_port(cfg: ConfigManager) -> Iterator[int]:
    """A port no instance has and no running creation holds, held until the
    block ends (by then the instance carrying it is committed, or not)."""
    used = {inst.network_port for inst in cfg.instances() if inst.network_port is not None}
    port = max(used | _IN_FLIGHT | {FIRST_PORT - 1}) + 1
    _IN_FLIGHT.add(port)
    try:
        yield port
    finally:
        _IN_FLIGHT.discard(port)
