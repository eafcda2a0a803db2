"""GET /2/info then PUT /2/modify with what it said (Ganeti's QA does so):
the parameters Corral has not built yet are accepted at the value the
cluster shows for them, since putting them back changes nothing."""

from __future__ import annotations

import pytest

from corral.cmdlib.cluster import cluster_info
from corral.errors import OpPrereqError
from corral.objects import Cluster
from corral.opcodes.cluster import OpClusterSetParams
from corral.opcodes.types import NOT_BUILT_KEY

# GET /2/info's aliases (Ganeti's rlib2 GET_ALIASES).
ALIASES = {"vg_name": "volume_group_name", "drbd_helper": "drbd_usermode_helper"}
# Not settable over RAPI (Ganeti's QA leaves them out too).
FORBIDDEN = {"compression_tools", "hv_state", "disk_state"}

NOT_BUILT = sorted(
    name
    for name, info in OpClusterSetParams.model_fields.items()
    if isinstance(info.json_schema_extra, dict)
    and NOT_BUILT_KEY in info.json_schema_extra
    and name not in FORBIDDEN
)


@pytest.mark.parametrize("name", NOT_BUILT)
def test_a_not_built_parameter_is_accepted_at_the_shown_value(name: str) -> None:
    info = cluster_info(Cluster(name="c", master_node="n", master_ip="127.0.0.1"), "n")
    shown = info[ALIASES.get(name, name)]
    op = OpClusterSetParams.model_validate({name: shown})
    assert getattr(op, name) == shown
    op.check_not_built()


def test_a_not_built_parameter_is_refused_at_another_value() -> None:
    op = OpClusterSetParams.model_validate({"prealloc_wipe_disks": True})
    with pytest.raises(OpPrereqError, match=r"'prealloc_wipe_disks' .* not supported by Corral"):
        op.check_not_built()
