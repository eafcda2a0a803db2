"""RpcResult and NodeCallError: how callers turn a node's failure into an error."""

from __future__ import annotations

import pytest

from corral import errors
from corral.rpc.result import NodeCallError, RpcResult


def test_success_gives_the_payload() -> None:
    result: RpcResult[int] = RpcResult("node1", "version", payload=3000000)
    assert not result.failed
    assert result.get("Cannot get version") == result.payload == 3000000


def test_failure_keeps_the_lines_of_the_details() -> None:
    # A script's output tail must stay readable, one line per line.
    result: RpcResult[int] = RpcResult("node1", "version", fail_msg="line one\nline two\n")
    assert result.failed and not result.offline
    with pytest.raises(errors.OpExecError) as info:
        result.get("Cannot get version from node1")
    assert str(info.value) == "Cannot get version from node1: line one\nline two"


def test_the_error_names_node_call_and_message() -> None:
    result: RpcResult[None] = RpcResult("n1", "instance_start", fail_msg="no memory", offline=True)
    with pytest.raises(NodeCallError) as info:
        result.payload  # noqa: B018 (reading the payload of a failure raises)
    err = info.value
    assert (err.node, err.call, err.fail_msg, err.offline) == (
        "n1",
        "instance_start",
        "no memory",
        True,
    )
    assert err.message == "no memory"


def test_the_error_travels_as_ganetis_opexecerror() -> None:
    err = NodeCallError("n1", "instance_start", "no memory", what="Could not start instance")
    encoded = errors.encode_exception(err)
    assert encoded == ["OpExecError", ["Could not start instance: no memory"]]
    assert type(errors.decode_exception(encoded)) is errors.OpExecError


def test_a_failure_checked_before_any_change_is_a_prerequisite_error() -> None:
    result: RpcResult[int] = RpcResult("node1", "version", fail_msg="Connection refused")
    with pytest.raises(errors.OpPrereqError) as info:
        result.get("Cannot reach node1", "environment_error")
    assert info.value.args == ("Cannot reach node1: Connection refused", "environment_error")


def test_report_warns_of_a_failure_and_says_whether_the_call_succeeded() -> None:
    warnings: list[str] = []
    failed: RpcResult[None] = RpcResult("node1", "blockdev_remove", fail_msg="busy\n")
    done: RpcResult[None] = RpcResult("node1", "blockdev_remove")
    assert not failed.report(warnings.append, "Could not remove disk/0")
    assert done.report(warnings.append, "Could not remove disk/1")
    assert warnings == ["Could not remove disk/0: busy"]


def test_value_is_the_payload_or_none() -> None:
    assert RpcResult[list[str]]("node1", "export_list", payload=["a"]).value == ["a"]
    assert RpcResult[list[str]]("node1", "export_list", fail_msg="no").value is None
