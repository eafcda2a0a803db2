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
