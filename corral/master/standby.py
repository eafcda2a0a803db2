"""masterd on a master candidate that does not hold the mastership: standing by.

It answers luxi on the master socket, so that a command run on this node
says which node is the master, and takes one call of its own:
``TakeMastership`` (``gnt-cluster master-failover``), which asks the master
to hand the mastership over to this node.  The master then ends its work
and releases the lease, and this masterd, waiting for it, acquires it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from corral import constants as C
from corral import errors
from corral.paths import Paths
from corral.state.ports import HandOver, Mastership

# Seconds a hand-over request stands: a candidate that asked and died does
# not keep the mastership from the others for longer.
HANDOVER_TTL = 30.0
TAKE_MASTERSHIP = "TakeMastership"


class StandbyMethods:
    """The luxi handler of a standing-by masterd on node ``holder``."""

    def __init__(
        self, paths: Paths, holder: str, mastership: Mastership, handover: HandOver
    ) -> None:
        self._paths = paths
        self._holder = holder
        self._mastership = mastership
        self._handover = handover

    async def __call__(self, method: str, args: Any) -> Any:
        if method == TAKE_MASTERSHIP:
            await self._check_candidate()
            await self._handover.request(self._holder, HANDOVER_TTL)
            return {"new_master": self._holder}
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
