"""Bad opcodes sent over luxi to a real masterd: each is refused at submission
with OpPrereqError / wrong_input and one line naming the field, and nothing
changes (no job, no config change)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from corral.opcodes import from_dict
from corral.opcodes.types import NOT_BUILT_KEY
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import cluster_state, wait_final
from tests.helpers.opcodes import SERVED, not_built_fields, required_fields, with_required
from tests.helpers.osdef import make_os

INSTANCE = "inst1.example.com"

# Values tried, in turn, for a field Corral does not implement: the first one
# of the field's type that is not Ganeti's default is used.
CANDIDATES: list[Any] = [
    True, False, 1, 7, 2.5, "hail", ["node2.example.com"], {"a": "b"},
    [["add", "x"]], {"kvm": {"a": "b"}}, {"plain": {"stripes": 2}}, [[1, 2]], [{"size": 1}],
    "plain", "blktap", {"diskstats": False}, {"diskstats": 5000000},
]  # fmt: skip


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("opcode-bad-input")) as cluster:
        make_os(cluster.paths, "debootstrap")
        added = cluster.gnt(
            "instance", "add", "-t", "diskless", "-o", "debootstrap+default",
            "--no-name-check", "--no-ip-check", "--no-start", INSTANCE,
        )  # fmt: skip
        assert added.rc == 0, added.stderr
        yield cluster


def refused(cl: TestCluster, op: dict[str, Any]) -> str:
    """Submit ``op``; it must be refused as wrong input, changing nothing."""
    before = cluster_state(cl)
    with cl.client() as client, pytest.raises(errors.OpPrereqError) as info:
        client.submit_job([op])
    assert info.value.ecode == C.ECODE_INVAL
    assert "\n" not in info.value.message
    assert cluster_state(cl) == before
    return info.value.message


def non_default_value(op_id: str, field: str) -> Any:
    """A value of the field's type that asks for something Corral does not do."""
    for value in CANDIDATES:
        try:
            from_dict(with_required(op_id, **{field: value}))
        except errors.OpPrereqError as err:
            if "is not supported by Corral yet" in err.message:
                return value
    raise AssertionError(f"{op_id}.{field}: no candidate value is refused as not supported")


@pytest.mark.parametrize(("op_id", "field"), not_built_fields())
def test_unimplemented_field_set_is_refused(cl: TestCluster, op_id: str, field: str) -> None:
    op = with_required(op_id, **{field: non_default_value(op_id, field)})
    if "instance_name" in op:
        op["instance_name"] = INSTANCE  # an instance that exists
    message = refused(cl, op)
    assert message.startswith(f"Parameter '{field}' of {op_id} is not supported by Corral yet")
    assert "leave it unset" in message


@pytest.mark.parametrize("op_id", ["OP_INSTANCE_SET_PARAMS", "OP_CLUSTER_SET_PARAMS"])
def test_unimplemented_fields_at_default_or_null_are_accepted(cl: TestCluster, op_id: str) -> None:
    """What Ganeti's library sends (every field, unset ones at their defaults or
    null) is accepted, and the part Corral implements is done."""
    model = SERVED[op_id].model_fields
    defaults = {
        name: info.json_schema_extra[NOT_BUILT_KEY][0]  # type: ignore[index]
        for name, info in model.items()
        if isinstance(info.json_schema_extra, dict) and NOT_BUILT_KEY in info.json_schema_extra
    }
    nulls = {name: None for name in defaults}
    change: dict[str, Any] = (
        {"instance_name": INSTANCE, "beparams": {"maxmem": 256}}
        if op_id == "OP_INSTANCE_SET_PARAMS"
        else {"beparams": {"maxmem": 256}}
    )
    for fields in (defaults, nulls):
        with cl.client() as client:
            job = client.submit_job([{"OP_ID": op_id, **fields, **change}])
            assert wait_final(client, [job], ("opresult",))[0][0] == "success"
    with cl.client() as client:
        if op_id == "OP_INSTANCE_SET_PARAMS":
            assert client.call("QueryInstances", [INSTANCE], ["be/maxmem"], False) == [[256]]
        else:
            assert client.call("QueryClusterInfo")["beparams"]["default"]["maxmem"] == 256


WRONG_TYPES = [
    pytest.param("OP_INSTANCE_STARTUP", "force", "yes", id="bool"),
    pytest.param("OP_INSTANCE_SHUTDOWN", "timeout", -5, id="non-negative-int"),
    pytest.param("OP_INSTANCE_GROW_DISK", "amount", "big", id="int"),
    pytest.param("OP_TEST_DELAY", "duration", "soon", id="float"),
    pytest.param("OP_TEST_DELAY", "on_nodes", [""], id="non-empty-string"),
    pytest.param("OP_INSTANCE_STARTUP", "instance_name", 17, id="string"),
    pytest.param("OP_INSTANCE_REBOOT", "reboot_type", "gentle", id="choice"),
    pytest.param("OP_INSTANCE_CREATE", "disk_template", "lvm2", id="choice-of-templates"),
    pytest.param("OP_TAGS_SET", "tags", "single", id="list-of-strings"),
    pytest.param("OP_TAGS_SET", "kind", "planet", id="tag-kind"),
    pytest.param("OP_INSTANCE_SET_PARAMS", "beparams", ["maxmem"], id="dict"),
    pytest.param("OP_CLUSTER_SET_PARAMS", "hvparams", {"fake": 1}, id="dict-of-dicts"),
    pytest.param("OP_INSTANCE_CREATE", "nics", [{"bogus": "x"}], id="nic-list"),
    pytest.param("OP_INSTANCE_CREATE", "disks", ["1g"], id="disk-list"),
    pytest.param("OP_INSTANCE_SET_PARAMS", "disks", [["bogus", "x"]], id="device-changes"),
    pytest.param("OP_TEST_DELAY", "priority", 99, id="priority"),
    pytest.param("OP_TEST_DELAY", "depends", [[1, ["finished"]]], id="dependencies"),
    pytest.param("OP_TEST_DELAY", "reason", "because", id="reason-trail"),
]


@pytest.mark.parametrize(("op_id", "field", "value"), WRONG_TYPES)
def test_wrong_type_is_refused_naming_the_field(
    cl: TestCluster, op_id: str, field: str, value: Any
) -> None:
    message = refused(cl, with_required(op_id, **{field: value}))
    assert message.startswith(f"Invalid {op_id}: parameter '{field}")


@pytest.mark.parametrize(("op_id", "field"), required_fields())
def test_null_for_a_required_field_is_refused(cl: TestCluster, op_id: str, field: str) -> None:
    message = refused(cl, with_required(op_id, **{field: None}))
    assert message == f"Invalid {op_id}: parameter '{field}' is required, got null"


@pytest.mark.parametrize(("op_id", "field"), required_fields())
def test_missing_required_field_is_refused(cl: TestCluster, op_id: str, field: str) -> None:
    op = with_required(op_id)
    del op[field]
    message = refused(cl, op)
    assert f"parameter '{field}' is required" in message


def test_unknown_op_id_is_refused(cl: TestCluster) -> None:
    before = cluster_state(cl)
    with cl.client() as client, pytest.raises(errors.OpCodeUnknown) as info:
        client.submit_job([{"OP_ID": "OP_INSTANCE_TELEPORT", "instance_name": INSTANCE}])
    assert info.value.message == "Unknown opcode 'OP_INSTANCE_TELEPORT'"
    assert cluster_state(cl) == before
