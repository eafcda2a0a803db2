"""What instances hold alone (a file's path, an adopted device, a network
port) and what running jobs have reserved for instances not committed yet.

What the configuration's instances hold is derived from them: their disks'
templates say what each disk holds (``DiskTemplate.held``), a hypervisor that
needs one gives an instance a network port.  Removing a disk or an instance
from the configuration therefore releases what it held.

Between checking a new disk (or port) and committing its instance, a job
holds what it took in :class:`Reservations`, one per configuration (Ganeti's
``TemporaryReservationManager``): two running jobs never take one device or
one port.  The processor drops a job's reservations when its opcode ends; by
then its instance is in the configuration, holding them, or is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from corral.storage.strategy import RES_PORT, Resource
from corral.storage.templates import DISK_TEMPLATES

if TYPE_CHECKING:
    from corral.objects.instance import Instance


def holders(instances: Iterable[Instance], kind: str) -> dict[Resource, str]:
    """What ``instances`` hold alone of ``kind`` (RES_*), each with its instance's
    name: their disks' (as their templates say) and their network ports."""
    out: dict[Resource, str] = {}
    for inst in instances:
        if kind == RES_PORT and inst.network_port is not None:
            out[Resource(RES_PORT, inst.network_port)] = inst.name
        for disk in inst.disks:
            template = DISK_TEMPLATES.get(disk.dev_type)
            if template is None or kind not in template.holds:
                continue
            for resource in template.held(disk, inst.primary_node):
                if resource.kind == kind:
                    out[resource] = inst.name
    return out


class Reservations:
    """Resources reserved by running jobs, each for an instance the job has not
    committed yet (masterd's memory: a job does not outlive masterd)."""

    def __init__(self) -> None:
        # resource → (the job reserving it, the name of the instance it is for)
        self._reserved: dict[Resource, tuple[str, str]] = {}

    def reserver(self, resource: Resource, job: str) -> str | None:
        """The instance another job than ``job`` reserved ``resource`` for, or None."""
        found = self._reserved.get(resource)
        return None if found is None or found[0] == job else found[1]

    def reserve(self, resource: Resource, job: str, instance: str) -> None:
        """Reserve ``resource`` for ``job``'s ``instance`` (see :meth:`reserver`)."""
        self._reserved[resource] = (job, instance)

    def values(self, kind: str, node: str | None) -> set[str | int]:
        """The values of ``kind`` on ``node`` that some job reserved."""
        return {r.value for r in self._reserved if r.kind == kind and r.node == node}

    def release(self, job: str) -> None:
        """Drop what ``job`` reserved (its opcode has ended)."""
        self._reserved = {r: held for r, held in self._reserved.items() if held[0] != job}

    def __len__(self) -> int:
        return len(self._reserved)


class JobLedger:
    """The :class:`~corral.storage.strategy.Ledger` of one job making (or
    changing) instance ``instance``: what the configuration's instances hold
    and what other jobs reserved, both read at each question (a template
    whose disks cannot clash never asks: no scan of every instance for it)."""

    def __init__(
        self,
        reservations: Reservations,
        job: str,
        instance: str,
        instances: Callable[[], Iterable[Instance]],
    ) -> None:
        self._reservations = reservations
        self._job = job
        self._instance = instance
        self._instances = instances

    def _committed(self, kind: str) -> Mapping[Resource, str]:
        return holders(self._instances(), kind)

    def holder(self, resource: Resource) -> str | None:
        """The instance holding ``resource``, or a running job's new one, or None."""
        owner = self._committed(resource.kind).get(resource)
        return owner or self._reservations.reserver(resource, self._job)

    def take(self, resource: Resource) -> str | None:
        """Reserve ``resource``; if another instance holds it, reserve nothing
        and return that instance's name."""
        owner = self.holder(resource)
        if owner is None:
            self._reservations.reserve(resource, self._job, self._instance)
        return owner

    def allocate(self, kind: str, node: str | None, first: int) -> int:
        """Reserve and return one more than the highest value of ``kind`` held
        on ``node`` (by an instance or a reservation), from ``first`` on."""
        used = {r.value for r in self._committed(kind) if r.node == node}
        used |= self._reservations.values(kind, node)
        value = max({v for v in used if isinstance(v, int)} | {first - 1}) + 1
        self._reservations.reserve(Resource(kind, value, node), self._job, self._instance)
        return value
