"""Opcodes for tags on the cluster, nodes, groups, instances and networks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from corral.opcodes.base import OpCode

TagKind = Literal["cluster", "node", "nodegroup", "instance", "network"]


class OpTagsGet(OpCode):
    OP_ID = "OP_TAGS_GET"

    kind: TagKind
    use_locking: bool = False
    name: str | None = None


class OpTagsSearch(OpCode):
    OP_ID = "OP_TAGS_SEARCH"
    OP_DSC_FIELD = "pattern"

    pattern: str = Field(min_length=1)


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
