"""masterd on a master candidate that does not hold the mastership: standing by.

It answers luxi on the master socket, so that a command run on this node
says which node is the master, and takes one call of its own:
``TakeMastership`` (``gnt-cluster master-failover``), which asks the master
to hand the mastership over to this node.  The master then ends its work
and releases the lease, and this masterd, waiting for it, acquires it.
With its argument true (``--no-voting``), it makes this node's copy of the
stores the only one instead (:mod:`corral.master.rescue`).

Once the stores moved back to SQLite on the master (too few candidates for
etcd), no other node can take over: a candidate's masterd then only says
so (:class:`SqliteStandbyMethods`) until the stores move to etcd again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from corral import constants as C
from corral import errors
from corral.master import rescue
from corral.paths import Paths
from corral.services.mastership import MastershipKeeper
from corral.state import home
from corral.state.etcd.client import EtcdClient, EtcdError, client_ssl_context
from corral.state.ports import HandOver, Mastership

# Seconds a hand-over request stands: a candidate that asked and died does
# not keep the mastership from the others for longer.
HANDOVER_TTL = 30.0
TAKE_MASTERSHIP = "TakeMastership"
# Seconds an etcd member gets to say it runs (a refused failover names those that do not).
PROBE_TIMEOUT = 2.0


class StandbyMethods:
    """The luxi handler of a standing-by masterd, whose ``keeper`` waits for the mastership."""

    def __init__(
        self, paths: Paths, keeper: MastershipKeeper, mastership: Mastership, handover: HandOver
    ) -> None:
        self._paths = paths
        self._keeper = keeper
        self._holder = keeper.holder
        self._mastership = mastership
        self._handover = handover

    async def __call__(self, method: str, args: Any) -> Any:
        if method == TAKE_MASTERSHIP:
            no_voting = _no_voting(args)
            await self._check_candidate()
            if no_voting:
                async with self._keeper.held_off():  # its token must come after the leap
                    warning = await rescue.force_store(self._paths, self._holder)
                return {"new_master": self._holder, "warnings": [warning]}
            try:
                await self._handover.request(self._holder, HANDOVER_TTL)
            except EtcdError:
                return {"new_master": None, "unhealthy": await self._unhealthy()}
            return {"new_master": self._holder, "warnings": []}
        current = await self._mastership.current()
        master = current.holder if current is not None else "being chosen"
        raise errors.OpPrereqError(
            f"This node ({self._holder}) {errors.NOT_MASTER} {master}"
            " (run the command there, or 'gnt-cluster master-failover' here)",
            C.ECODE_STATE,
        )

    async def eligible(self) -> bool:
        """Whether this node is a master candidate (by its ssconf files)."""
        return self._holder in await self._candidates()

    async def _candidates(self) -> list[str]:
        path = self._paths.ssconf_file("master_candidates")
        try:
            return (await asyncio.to_thread(path.read_text)).split()
        except FileNotFoundError:
            return []

    async def _unhealthy(self) -> list[str]:
        """The master candidates whose etcd member does not answer (by ssconf's
        addresses), for Ganeti's refusal of a failover without a majority."""
        where = await asyncio.to_thread(home.read, self._paths.store_home)
        endpoints = list(where.endpoints) if isinstance(where, home.EtcdHome) else []
        tls = await asyncio.to_thread(
            client_ssl_context, self._paths.ca_cert, self._paths.client_pem
        )
        client = EtcdClient(endpoints, tls)

        async def answers(url: str) -> bool:
            try:
                await client.status(url, PROBE_TIMEOUT)
            except EtcdError:
                return False
            return True

        try:
            answering = await asyncio.gather(*(answers(url) for url in endpoints))
        finally:
            await client.close()
        names = await self._names_by_ip()
        down = [url for url, ok in zip(endpoints, answering, strict=True) if not ok]
        return sorted(names.get(_host(url), url) for url in down)

    async def _names_by_ip(self) -> dict[str, str]:
        path = self._paths.ssconf_file("node_primary_ips")
        try:
            lines = (await asyncio.to_thread(path.read_text)).splitlines()
        except FileNotFoundError:
            return {}
        return {ip: name for name, ip in (line.split() for line in lines if line.strip())}

    async def _check_candidate(self) -> None:
        """Ganeti's refusal on a node that is not a master candidate (by ssconf)."""
        candidates = await self._candidates()
        if self._holder not in candidates:
            current = await self._mastership.current()
            others = [name for name in candidates if current is None or name != current.holder]
            raise errors.OpPrereqError(
                "This node is not among the nodes marked as master candidates. Only these"
                " nodes can become masters. Current list of master candidates is:\n"
                + "\n".join(others),
                C.ECODE_STATE,
            )


def _no_voting(args: Any) -> bool:
    """TakeMastership's one optional argument: whether to skip the vote."""
    if not isinstance(args, list) or len(args) > 1:
        raise errors.LuxiError(f"{TAKE_MASTERSHIP} takes 0 to 1 argument(s)")
    if args and not isinstance(args[0], bool):
        raise errors.OpPrereqError(
            f"{TAKE_MASTERSHIP}: no_voting must be true or false, not {args[0]!r}",
            C.ECODE_INVAL,
        )
    return bool(args and args[0])


def _host(url: str) -> str:
    """The address of an https://IP:PORT URL."""
    return url.split("//", 1)[-1].rsplit(":", 1)[0].strip("[]")


class HomeChanged(Exception):
    """The stores moved while this masterd stood by: it opens them again."""


class SqliteStandbyMethods:
    """The luxi handler of a master candidate's masterd while the stores live
    in SQLite on another node (``where``)."""

    def __init__(self, holder: str, where: home.SqliteHome) -> None:
        self._holder = holder
        self.where = where

    @property
    def why(self) -> str:
        """Why this node cannot be the master now."""
        return (
            f"the master's stores live in SQLite on {self.where.master}, so no other node"
            " can take the mastership over; it can once they move to etcd again"
            " (three master candidates)"
        )

    async def __call__(self, method: str, args: Any) -> Any:
        if method == TAKE_MASTERSHIP:
            raise errors.OpPrereqError(f"Cannot take the mastership: {self.why}", C.ECODE_STATE)
        raise errors.OpPrereqError(
            f"This node ({self._holder}) {errors.NOT_MASTER}"
            f" {self.where.master} (run the command there): {self.why}",
            C.ECODE_STATE,
        )
