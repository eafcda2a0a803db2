"""Opcodes for tags on the cluster, nodes, groups, instances and networks."""

from __future__ import annotations

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr, TagKind

# How luxid names the tag kinds in job summaries (Haskell's constructor names).
_KIND_SUMMARY = {
    "instance": "TagKindInstance",
    "node": "TagKindNode",
    "nodegroup": "TagKindGroup",
    "cluster": "TagKindCluster",
    "network": "TagKindNetwork",
}


class OpTagsGet(OpCode):
    OP_ID = "OP_TAGS_GET"

    kind: TagKind
    use_locking: bool = False
    name: str | None = None

    def summary_value(self) -> str | None:
        return _KIND_SUMMARY[self.kind]


class OpTagsSearch(OpCode):
    OP_ID = "OP_TAGS_SEARCH"
    OP_DSC_FIELD = "pattern"

    pattern: NonEmptyStr


class OpTagsSet(OpCode):
    OP_ID = "OP_TAGS_SET"

    kind: TagKind
    tags: list[str]
    name: str | None = None


class OpTagsDel(OpCode):
    OP_ID = "OP_TAGS_DEL"

    kind: TagKind
    tags: list[str]
    name: str | None = None
