"""The etcd member a node's noded runs (:mod:`corral.node.etcd_member`):
a node in no cluster (one that left it) starts none."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.node.etcd_member import MemberKeeper, MemberWish, etcd_root
from corral.paths import Paths


async def test_a_node_without_its_certificate_starts_no_member(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    wish = MemberWish("n1", "127.0.97.1", 2379, 2380, {"n1": "https://127.0.97.1:2380"}, True)
    with pytest.raises(errors.OpPrereqError, match="in no cluster") as info:
        await MemberKeeper(paths).start(wish)
    assert info.value.ecode == C.ECODE_STATE
    assert not etcd_root(paths).exists()
