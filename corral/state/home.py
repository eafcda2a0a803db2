"""Where masterd's stores live: SQLite on the master, or etcd on the candidates.

A cluster starts on SQLite (``config.db``, ``state.db``, ``queue.db``) and
no ``store-home.json``.  Once its stores moved to etcd
(``corral.services.store_move``), the file in the master's data directory
says so: the key prefix and the members' client URLs.  Writing it is the
move's point of no return: masterd started again opens the stores it names,
and the SQLite files stay behind as they were at the move, never written
again.  Moved back (``corral.services.store_move_back``), the file says
SQLite and names the master whose data directory holds them: on that node
masterd opens the SQLite files, as with no file; a master candidate told so
cannot take the mastership over and says why.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from corral import errors
from corral.fileio import atomic_write


@dataclass(frozen=True)
class EtcdHome:
    """The stores in etcd: their keys' prefix and the members to call."""

    prefix: str
    endpoints: tuple[str, ...]
    # The cluster serial the configuration had when it moved.
    moved_at_serial: int


@dataclass(frozen=True)
class SqliteHome:
    """The stores in SQLite on node ``master`` (moved back from etcd)."""

    master: str
    # The cluster serial the configuration had when it moved back.
    moved_at_serial: int


Home = EtcdHome | SqliteHome
_SQLITE = "sqlite"


def prefix_of(cluster_uuid: str) -> str:
    """The keys of a cluster's stores in etcd."""
    return f"/corral/{cluster_uuid}/"


def of_wire(raw: dict[str, Any]) -> Home:
    """The home as JSON carries it (ValueError, KeyError, TypeError if it is not one)."""
    if raw.get("kind") == _SQLITE:
        master = raw["master"]
        if not isinstance(master, str) or not master:
            raise TypeError("master is not a node name")
        return SqliteHome(master, int(raw["moved_at_serial"]))
    endpoints = raw["endpoints"]
    prefix = raw["prefix"]
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise TypeError("endpoints is not a list of URLs")
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise ValueError(f"bad key prefix {prefix!r}")
    return EtcdHome(prefix, tuple(endpoints), int(raw["moved_at_serial"]))


def to_wire(home: Home) -> dict[str, Any]:
    """The home as JSON carries it (an etcd home has no ``kind``: as it always was)."""
    if isinstance(home, SqliteHome):
        return {"kind": _SQLITE, **asdict(home)}
    return {**asdict(home), "endpoints": list(home.endpoints)}


def read(path: Path) -> Home | None:
    """The stores' home (None: SQLite on this node, never moved)."""
    try:
        return of_wire(json.loads(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise errors.ConfigurationError(
            f"Cannot read {path}, which says where the master's stores live: {err};"
            " restore it from another master candidate"
        ) from err


def write(path: Path, home: Home) -> None:
    """Record ``home`` durably (atomically: the old file or the new one)."""
    atomic_write(path, json.dumps(to_wire(home), indent=1).encode() + b"\n", mode=0o600)
