"""Which of etcd's error answers leave a call's outcome unknown (the client
makes it again, on another member if need be) and which are refusals."""

from __future__ import annotations

import pytest

from corral.state.etcd.client import fate_unknown


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (14, "etcdserver: leader changed"),
        (4, "etcdserver: request timed out"),
        (1, "context canceled"),
        # A member being stopped: its JSON gateway lost its own gRPC connection
        # (seen when the stores moved back from etcd in CI).
        (2, "OK: HTTP status code 200; transport: missing content-type field"),
        (13, "transport: received unexpected content-type"),
    ],
)
def test_an_answer_that_may_hide_an_applied_write_is_made_again(code: int, message: str) -> None:
    assert fate_unknown(code, message)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (3, "etcdserver: key is not provided"),
        (9, "etcdserver: requested lease not found"),
        (8, "etcdserver: too many operations in txn request"),
        (2, "etcdserver: some other failure"),
    ],
)
def test_a_refusal_is_final(code: int, message: str) -> None:
    assert not fate_unknown(code, message)
