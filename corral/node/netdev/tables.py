"""Routing tables by name or number, as ``ip route ... table X`` reads them.

A routed NIC's ``link`` names the table its instance's address is routed in
(Ganeti's routed mode); names come from iproute2's rt_tables files.
"""

from __future__ import annotations

from pathlib import Path

from corral import errors

MAIN = 254
_BUILT_IN = {"default": 253, "main": MAIN, "local": 255}
# iproute2 reads /etc first; newer versions ship their defaults under /usr.
_FILES = ("/etc/iproute2/rt_tables", "/usr/share/iproute2/rt_tables")
_DIRS = ("/etc/iproute2/rt_tables.d", "/usr/share/iproute2/rt_tables.d")
_MAX_TABLE = 2**32 - 1


def table_id(link: str) -> int:
    """The number of the routing table ``link`` (empty: main); OpExecError if unknown."""
    if not link:
        return MAIN
    if link.isdigit():
        number = int(link)
        if 0 < number <= _MAX_TABLE:
            return number
    else:
        known = _named_tables()
        if link in known:
            return known[link]
    raise errors.OpExecError(
        f"Routing table '{link}' is not known on this node; use a table number"
        " or a name from /etc/iproute2/rt_tables, or change the NIC's link"
    )


def _named_tables() -> dict[str, int]:
    tables = dict(_BUILT_IN)
    paths = [Path(name) for name in _FILES]
    for folder in _DIRS:
        paths.extend(sorted(Path(folder).glob("*.conf")))
    for path in paths:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) == 2 and fields[0].isdigit():
                tables.setdefault(fields[1], int(fields[0]))
    return tables
