"""What a master candidate needs to become the master, once the stores live in etcd.

Every online master candidate gets where the stores live (its masterd then
stands by), the cluster CA's key (a new master signs the certificates of
nodes that join) and masterd's client certificate (the calls only the master
may make); a node that is no longer a candidate has them taken away.  As
Ganeti copies its cluster certificate and keys to the master candidates.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from corral import errors
from corral.rpc.calls_etcd import candidate_files_put
from corral.rpc.result import NodeAddress
from corral.state import home
from corral.state.etcd.members import Candidate

if TYPE_CHECKING:
    from corral.services.context import Master

log = logging.getLogger(__name__)


def _files(master: Master) -> dict[str, Any] | None:
    """The files as the node call carries them (None: the stores are in SQLite)."""
    paths = master.paths
    where = home.read(paths.store_home)
    if where is None:
        return None
    return {
        "store_home": home.to_wire(where),
        "ca_key": paths.ca_key.read_text(),
        "client_pem": paths.client_pem.read_text(),
    }


class CandidateFiles:
    """Which nodes were given which files (by node uuid; a digest: no key kept twice)."""

    def __init__(self) -> None:
        self._given: dict[str, str] = {}
        # Nodes that are no candidate may hold files from before this master
        # started: each is told to forget them once.
        self._swept: set[str] = set()

    async def follow(
        self, master: Master, candidates: Sequence[Candidate], others: Sequence[Candidate]
    ) -> str | None:
        """Give the candidates the files, take them from the others; what was done."""
        files = await asyncio.to_thread(_files, master)
        if files is None:
            return None
        digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        own = master.cfg.cluster.master_node
        given = [c for c in candidates if c.uuid != own and self._given.get(c.uuid) != digest]
        taken = [n for n in others if n.uuid in self._given or n.uuid not in self._swept]
        for node in given:
            what = f"Giving {node.name} what a master candidate needs"
            await master.rpc.run(_address(node), candidate_files_put(files), what)
            self._given[node.uuid] = digest
        took = []
        for node in taken:  # one that does not answer now is asked again later
            what = f"Taking from {node.name} what only master candidates hold"
            try:
                await master.rpc.run(_address(node), candidate_files_put(None), what)
            except errors.GenericError as err:
                log.warning("%s", err.message)
                continue
            self._given.pop(node.uuid, None)
            self._swept.add(node.uuid)
            took.append(node.name)
        done = []
        if given:
            done.append(f"gave {', '.join(c.name for c in given)} the master candidates' files")
        if took:
            done.append(f"took them from {', '.join(took)}")
        return "; ".join(done) or None


def _address(node: Candidate) -> NodeAddress:
    return NodeAddress(node.uuid, node.ip)
