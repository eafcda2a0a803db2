"""RpcResult: how callers turn a node's failure into an error."""

from __future__ import annotations

import pytest

from corral import errors
from corral.rpc.client import RpcResult


def test_success_does_not_raise() -> None:
    result = RpcResult("node1", "version", payload=3000000)
    assert not result.failed
    result.raise_if_failed("Cannot get version")


def test_failure_keeps_the_lines_of_the_details() -> None:
    # A script's output tail must stay readable, one line per line.
    result = RpcResult("node1", "version", fail_msg="line one\nline two\n")
    assert result.failed and not result.offline
    with pytest.raises(errors.OpExecError) as info:
        result.raise_if_failed("Cannot get version from node1")
    assert str(info.value) == "Cannot get version from node1: line one\nline two"
