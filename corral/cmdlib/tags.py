"""Logical units for tags on the cluster, node groups, nodes, instances and networks."""

from __future__ import annotations

import re
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.objects import ConfigObject, Instance, Network, Node, NodeGroup
from corral.opcodes import tags as opt

_TAG_RE = re.compile(r"^[\w.+*/:@-]+$")
_KIND_CLASS: dict[str, type[ConfigObject]] = {
    C.TAG_NODE: Node,
    C.TAG_NODEGROUP: NodeGroup,
    C.TAG_INSTANCE: Instance,
    C.TAG_NETWORK: Network,
}
_LOCK_LEVEL = {
    C.TAG_NODE: C.LEVEL_NODE,
    C.TAG_NODEGROUP: C.LEVEL_NODEGROUP,
    C.TAG_INSTANCE: C.LEVEL_INSTANCE,
    C.TAG_NETWORK: C.LEVEL_NETWORK,
}


def check_tag(tag: str) -> None:
    """Refuse a tag Ganeti would refuse, with the reason."""
    if not tag:
        raise errors.TagError("Tags cannot be empty")
    if len(tag) > C.MAX_TAG_LEN:
        raise errors.TagError(f"Tag too long (>{C.MAX_TAG_LEN} characters): {tag[:20]}...")
    if not _TAG_RE.match(tag):
        raise errors.TagError(
            f"Tag contains invalid characters: '{tag}'"
            " (allowed: letters, digits and . + * / : @ - _)"
        )


class _TagsLU(LogicalUnit[Any]):
    """Finds the tagged object and locks it."""

    REQ_BGL = False
    target: ConfigObject

    def check_arguments(self) -> None:
        if self.op.kind != C.TAG_CLUSTER and not self.op.name:
            raise errors.OpPrereqError(f"Tags of a {self.op.kind} need its name", C.ECODE_INVAL)

    def expand_names(self) -> None:
        kind = self.op.kind
        if kind == C.TAG_CLUSTER:
            self.target = self.cfg.cluster
            return
        cls = _KIND_CLASS.get(kind)
        if cls is None:
            raise errors.OpPrereqError(
                f"{kind.capitalize()} '{self.op.name}' is unknown", C.ECODE_NOENT
            )
        self.target = self.expand(cls, self.op.name)

    def declare_locks(self) -> None:
        level = _LOCK_LEVEL.get(self.op.kind)
        if level is not None:
            # Instances are locked by name (as at creation), the others by uuid.
            key = self.target.name if level == C.LEVEL_INSTANCE else self.target.uuid
            self.needed_locks[level] = [key]
            self.share_locks[level] = self._read_only

    _read_only = False

    async def check_prereq(self) -> None:
        # The object as committed now, under its lock.
        current = self.cfg.get(type(self.target), self.target.uuid)
        if current is None:
            raise errors.OpPrereqError(f"'{self.target.name}' was removed", C.ECODE_NOENT)
        self.target = current

    def _fresh_copy(self) -> ConfigObject:
        return self.target.copy_for_update()


class LUTagsGet(_TagsLU):
    OPCODE = opt.OpTagsGet
    _read_only = True

    async def exec(self) -> Any:
        return sorted(self.target.tags)


class _TagsWriteLU(_TagsLU):
    """Adds or removes tags: the tags must be valid, the object is locked exclusively."""

    def bgl_shared(self) -> bool:
        # Cluster tags live in the cluster object: its writers take the BGL exclusively.
        return bool(self.op.kind != C.TAG_CLUSTER)

    def check_arguments(self) -> None:
        super().check_arguments()
        for tag in self.op.tags:
            check_tag(tag)


class LUTagsSet(_TagsWriteLU):
    OPCODE = opt.OpTagsSet

    async def exec(self) -> Any:
        obj = self._fresh_copy()
        new = [t for t in dict.fromkeys(self.op.tags) if t not in obj.tags]
        if len(obj.tags) + len(new) > C.MAX_TAGS_PER_OBJ:
            raise errors.TagError(f"Too many tags (limit {C.MAX_TAGS_PER_OBJ})")
        obj.tags.extend(new)
        self.tx.update(obj)
        return None


class LUTagsDel(_TagsWriteLU):
    OPCODE = opt.OpTagsDel

    async def check_prereq(self) -> None:
        await super().check_prereq()
        missing = sorted(set(self.op.tags) - set(self.target.tags))
        if missing:
            raise errors.OpPrereqError(
                f"Tag(s) {', '.join(repr(t) for t in missing)} not found", C.ECODE_NOENT
            )

    async def exec(self) -> Any:
        obj = self._fresh_copy()
        obj.tags = [t for t in obj.tags if t not in set(self.op.tags)]
        self.tx.update(obj)
        return None


class LUTagsSearch(LogicalUnit[opt.OpTagsSearch]):
    OPCODE = opt.OpTagsSearch
    REQ_BGL = False

    def check_arguments(self) -> None:
        try:
            self._regex = re.compile(self.op.pattern)
        except re.error as err:
            raise errors.OpPrereqError(
                f"Invalid search pattern '{self.op.pattern}': {err}", C.ECODE_INVAL
            ) from None

    async def exec(self) -> Any:
        objects: list[tuple[str, ConfigObject]] = [("/cluster", self.cfg.cluster)]
        objects += [(f"/nodes/{n.name}", n) for n in self.cfg.nodes()]
        objects += [(f"/nodegroup/{g.name}", g) for g in self.cfg.groups()]
        objects += [(f"/instances/{i.name}", i) for i in self.cfg.instances()]
        objects += [(f"/network/{n.name}", n) for n in self.cfg.networks()]
        return [
            [path, tag]
            for path, obj in objects
            for tag in sorted(obj.tags)
            if self._regex.search(tag)
        ]
