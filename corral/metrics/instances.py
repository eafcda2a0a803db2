"""Instances by admin state and mirrored disks by sync state, from the config.

Counted once from the whole configuration, then kept up to date from the
commits since (the config manager keeps the last commits' changes): a
scrape costs what changed since the last one, not the number of instances.
Should the manager no longer keep every change since then, the counts are
made again from the whole configuration.

A disk with copies on other nodes (the mirrored template's) is ``in_sync``
when none of its copies is outdated, else ``outdated`` (its copies' states
as ``gnt-instance info`` shows them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from corral.metrics.registry import Gauge, Metric
from corral.objects import Instance, Node
from corral.objects.base import ConfigObject
from corral.objects.instance import ADMIN_DOWN, ADMIN_OFFLINE, ADMIN_UP
from corral.storage import templates
from corral.storage.strategy import Mirroring

IN_SYNC, OUTDATED = "in_sync", "outdated"


class ConfigView(Protocol):
    """What the metrics read of the config manager (``corral.config.manager``,
    which is not imported here: the job queue imports this package)."""

    @property
    def serial(self) -> int: ...

    def changes_since(
        self, serial: int
    ) -> Sequence[tuple[Sequence[ConfigObject], Sequence[ConfigObject]]] | None: ...

    def instances(self) -> list[Instance]: ...

    def nodes(self) -> list[Node]: ...


# (admin state, sync state of each mirrored disk): what an instance counts for.
_Counted = tuple[str, tuple[str, ...]]


def _counted(inst: Instance) -> _Counted:
    disks = tuple(
        OUTDATED if disk.outdated else IN_SYNC
        for disk in inst.disks
        if templates.get(disk.dev_type).mirroring is Mirroring.INTERNAL
    )
    return inst.admin_state, disks


class InstanceStates:
    """The counts, following one config manager."""

    def __init__(self) -> None:
        self._serial = -1  # the config serial counted (-1: none yet)
        self._of: dict[str, _Counted] = {}  # instance uuid → what it counts for
        self._admin: Counter[str] = Counter()
        self._disks: Counter[str] = Counter()

    def _add(self, uuid: str, counted: _Counted) -> None:
        self._of[uuid] = counted
        self._admin[counted[0]] += 1
        self._disks.update(counted[1])

    def _remove(self, uuid: str) -> None:
        counted = self._of.pop(uuid, None)
        if counted is not None:
            self._admin[counted[0]] -= 1
            self._disks.subtract(counted[1])

    def follow(self, cfg: ConfigView) -> None:
        """Bring the counts to ``cfg``'s serial."""
        changes = cfg.changes_since(self._serial) if self._serial >= 0 else None
        if changes is None:
            self._of.clear()
            self._admin.clear()
            self._disks.clear()
            for inst in cfg.instances():
                self._add(inst.uuid, _counted(inst))
        else:
            for upserts, deletes in changes:
                for obj in deletes:
                    if isinstance(obj, Instance):
                        self._remove(obj.uuid)
                for obj in upserts:
                    if isinstance(obj, Instance):
                        self._remove(obj.uuid)
                        self._add(obj.uuid, _counted(obj))
        self._serial = cfg.serial

    def metrics(self, cfg: ConfigView) -> list[Metric]:
        """The instance and mirrored disk gauges, as of ``cfg`` now."""
        self.follow(cfg)
        admin = Gauge("corral_instances", "Instances by admin state", ("admin_state",))
        for state in (ADMIN_UP, ADMIN_DOWN, ADMIN_OFFLINE, *self._admin):
            admin.set(self._admin[state], state)
        disks = Gauge(
            "corral_mirrored_disks",
            "Disks of the mirrored template by sync state (in_sync: no copy outdated)",
            ("sync_state",),
        )
        for state in (IN_SYNC, OUTDATED):
            disks.set(self._disks[state], state)
        return [admin, disks]
