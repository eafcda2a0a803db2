"""``master-failover --no-voting``'s pieces that need no cluster: the luxi
argument, the declaration of its node call, a node with no copy to keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.master import rescue
from corral.master.standby import _no_voting
from corral.paths import Paths
from corral.rpc.declare import RESCUES, node_call


@pytest.mark.parametrize(("args", "wanted"), [([], False), ([False], False), ([True], True)])
def test_take_mastership_takes_an_optional_no_voting(args: list[object], wanted: bool) -> None:
    assert _no_voting(args) is wanted


def test_take_mastership_refuses_what_is_not_a_flag() -> None:
    with pytest.raises(errors.OpPrereqError, match="no_voting must be true or false") as info:
        _no_voting(["yes"])
    assert info.value.ecode == C.ECODE_INVAL
    with pytest.raises(errors.LuxiError, match="0 to 1 argument"):
        _no_voting([True, True])


def test_a_rescue_call_is_masterds_only() -> None:
    with pytest.raises(errors.ProgrammerError, match="masterd's only"):
        node_call(1.0, effect=RESCUES)


async def test_a_node_without_the_stores_in_etcd_keeps_no_copy(tmp_path: Path) -> None:
    with pytest.raises(errors.OpPrereqError, match="holds no copy") as info:
        await rescue.force_store(Paths(tmp_path), "node2.example.com")
    assert info.value.ecode == C.ECODE_STATE
