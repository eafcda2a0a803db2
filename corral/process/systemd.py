"""Starting and stopping the node's daemons through systemd, where it is in charge.

As Ganeti's ``daemon-util`` (``use_systemctl``): when systemd runs as PID 1
and knows Corral's units (``ganeti.target`` is loaded: the Debian package
is installed), the daemons that ``gnt-cluster init``, ``destroy`` and
``renew-crypto`` start and stop go through ``systemctl start``/``stop``, so
systemd supervises them (restarts, the boot, the journal) and ganeti-watcher
leaves them to it (:mod:`corral.process.start_record`).  Only for the
cluster whose root is ``/``: the units run the daemons without
``CORRAL_ROOT``, so a cluster in any other root (tests, demos, several nodes
on one machine) is started directly even where the package is installed.

The options of one start (noded's address and port, RAPI's address) reach
the unit as Ganeti's do: ``ONETIME_ARGS`` in
``<data dir>/<daemon>.onetime.conf``, an ``EnvironmentFile`` of the unit,
removed once ``systemctl start`` returned.  The units are ``Type=notify``
(:mod:`corral.process.sd_notify`): ``systemctl start`` returns once the
daemon serves, as the direct start does.

Stdlib only: the gnt-* commands import it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from corral.process.daemons import DaemonStartError

if TYPE_CHECKING:
    from corral.paths import Paths

# sd_booted(3): this directory exists only when systemd is PID 1.
BOOTED = Path("/run/systemd/system")
# The root of the cluster the units run (they set no CORRAL_ROOT).
UNITS_ROOT = Path("/")
# Shipped by the package only: loaded means the units are installed.
TARGET = "ganeti.target"
# Seconds systemctl gets (masterd may replay jobs before it serves).
TIMEOUT = 120.0


def in_charge(paths: Paths) -> bool:
    """Whether systemd runs the daemons of the cluster in ``paths.root``."""
    if paths.root != UNITS_ROOT or not BOOTED.is_dir() or shutil.which("systemctl") is None:
        return False
    try:
        shown = _systemctl("show", "--property=LoadState", TARGET)
    except DaemonStartError:
        return False
    return shown.strip() == "LoadState=loaded"


def unit(daemon: str) -> str:
    """The service of the daemon ``daemon`` (``corral-noded.service``)."""
    return f"{daemon}.service"


def onetime_file(paths: Paths, daemon: str) -> Path:
    """Where one start's options for ``daemon`` are left for its unit."""
    return paths.data_dir / f"{daemon}.onetime.conf"


def start(paths: Paths, daemon: str, args: list[str]) -> None:
    """``systemctl start`` the daemon's unit with ``args`` for this start only;
    DaemonStartError (systemctl's reason) if it does not get ready."""
    for arg in args:
        # systemd splits $ONETIME_ARGS on white space and takes quotes as quotes.
        if not arg or any(c.isspace() or c in "\"'\\$" for c in arg):
            raise DaemonStartError(f"Cannot pass the option {arg!r} to {unit(daemon)}")
    onetime = onetime_file(paths, daemon)
    onetime.write_text(f'ONETIME_ARGS="{" ".join(args)}"\n')
    try:
        _systemctl("start", unit(daemon))
    finally:
        onetime.unlink(missing_ok=True)


def stop(daemon: str) -> None:
    """``systemctl stop`` the daemon's unit (nothing if it is not running)."""
    _systemctl("stop", unit(daemon))


def _systemctl(*args: str) -> str:
    """Run ``systemctl args``; its output, or DaemonStartError with its reason."""
    try:
        done = subprocess.run(
            ["systemctl", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise DaemonStartError(f"systemctl {' '.join(args)} failed: {err}") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise DaemonStartError(f"systemctl {' '.join(args)} failed: {lines[0]}")
    return done.stdout
