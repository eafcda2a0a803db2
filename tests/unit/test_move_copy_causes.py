"""Why a disk copy failed: the end that failed by itself, whatever the
order the master learns of the two ends' failures in."""

from __future__ import annotations

from typing import Any

import pytest

from corral.cmdlib.instance_move_copy import _Causes
from corral.objects import Node
from corral.services import impexp


class _Log:
    master: Any = None

    def __init__(self) -> None:
        self.lines: list[str] = []

    def feedback(self, message: str) -> None:
        self.lines.append(message)

    def warn(self, message: str) -> None:
        self.lines.append(message)


def _ended(
    mode: str, node: str, message: str, failure: str, *, aborted: bool = False
) -> impexp.Endpoint:
    ep = impexp.Endpoint(
        Node(name=node, primary_ip="127.0.0.1", secondary_ip="127.0.0.1", group="g"), "disk", {}
    )
    ep.mode, ep.label, ep.success, ep.message, ep.aborted = mode, "disk/0", False, message, aborted
    ep.status = {"exit_status": 1, "error_message": message, "failure": failure}
    return ep


SENDER = ("export", "n1", "TLS error: EOF occurred in violation of protocol", "peer")
RECEIVER = ("import", "n2", "No space left on the device of /srv/x", "own")


@pytest.mark.parametrize("order", [(SENDER, RECEIVER), (RECEIVER, SENDER)])
def test_the_end_that_failed_by_itself_is_the_cause(order: tuple[tuple[str, ...], ...]) -> None:
    causes, log = _Causes(), _Log()
    for index, (mode, node, message, failure) in enumerate(order):
        # The end seen second was aborted by the master meanwhile; its own
        # error came first and is what its status says.
        causes.finished(log, _ended(mode, node, message, failure, aborted=index == 1))
    assert causes.cause("disk/0") == (
        "disk/0 failed to receive data on n2: No space left on the device of /srv/x"
    )


def test_an_aborted_end_is_never_the_cause() -> None:
    causes, log = _Causes(), _Log()
    causes.finished(log, _ended("export", "n1", "Read error", "own"))
    causes.finished(log, _ended("import", "n2", "Aborted", "aborted", aborted=True))
    assert causes.cause("disk/0") == "disk/0 failed to send data on n1: Read error"


def test_a_lost_connection_alone_is_the_cause() -> None:
    causes, log = _Causes(), _Log()
    causes.finished(log, _ended(*SENDER))
    causes.finished(log, _ended("import", "n2", "Aborted", "aborted", aborted=True))
    assert causes.cause("disk/0").startswith("disk/0 failed to send data on n1: TLS error")
    assert _Causes().cause("disk/1") == "disk/1 failed"
