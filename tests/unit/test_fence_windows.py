"""The fence windows checker (tests/helpers/fence_windows.py) on made-up
noded logs: windows that keep apart, that overlap, that come out of token
order, and the refusals counted."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.fence_windows import check, masterd_refusals, parse, read

PREFIX = "2026-11-28 04:00:00,000: node-daemon pid=1 INFO "


def window(token: int, calls: int, first: float, last: float) -> str:
    return (
        f"{PREFIX}Fence token {token} window: {calls} calls let in from {first:.6f} to {last:.6f}"
    )


def refused(token: int, newest: int) -> str:
    return f"{PREFIX[:-5]}WARNING Refused upload_file: fence token {token}, older than {newest}"


def test_windows_apart_in_token_order_pass() -> None:
    node1 = parse("node1", [window(3, 10, 100.0, 110.0), window(4, 5, 120.0, 130.0)])
    node2 = parse(
        "node2", [window(3, 2, 101.0, 111.5), "unrelated line", window(5, 1, 140.0, 140.0)]
    )
    node3 = parse("node3", [window(4, 7, 119.0, 135.0), refused(3, 4), refused(3, 4)])
    verdict = check([node1, node2, node3])
    assert verdict, verdict
    assert [(s.token, s.first, s.last, s.calls) for s in verdict.spans] == [
        (3, 100.0, 111.5, 12),
        (4, 119.0, 135.0, 12),
        (5, 140.0, 140.0, 1),
    ]
    assert verdict.refused == 2 and verdict.calls == 25
    assert "3 fence windows (no overlap)" in str(verdict)


def test_a_deposed_token_let_in_after_its_successor_fails() -> None:
    # node2 let token 3 in at 121, after token 4's first call on node1 (120).
    node1 = parse("node1", [window(3, 10, 100.0, 110.0), window(4, 5, 120.0, 130.0)])
    node2 = parse("node2", [window(3, 2, 101.0, 121.0)])
    verdict = check([node1, node2])
    assert not verdict
    assert verdict.overlaps == [
        "token 3's calls (100.000000 to 121.000000) reach past token 4's first (120.000000)"
    ]
    assert [(w.node, w.token) for w in verdict.late] == [("node2", 3)]


def test_windows_out_of_token_order_fail() -> None:
    # Token 5 let in before token 4: the newer master came first.
    node1 = parse("node1", [window(5, 1, 100.0, 101.0)])
    node2 = parse("node2", [window(4, 1, 102.0, 103.0)])
    verdict = check([node1, node2])
    assert not verdict and len(verdict.overlaps) == 1 and verdict.late


def test_a_late_window_of_an_old_token_is_found_past_the_next_one() -> None:
    # Token 2 on node3 overlaps token 4 (not only its successor 3).
    logs = [
        parse("node1", [window(2, 1, 10.0, 11.0), window(3, 1, 12.0, 13.0)]),
        parse("node2", [window(4, 1, 14.0, 15.0)]),
        parse("node3", [window(2, 1, 10.5, 14.5)]),
    ]
    verdict = check(logs)
    assert not verdict and [w.token for w in verdict.late] == [2]


def test_suppressed_refusals_are_counted(tmp_path: Path) -> None:
    log = tmp_path / "node-daemon.log"
    lines = [
        refused(7, 8),
        f"{PREFIX[:-5]}WARNING Suppressed 41 similar messages in 60 s:"
        " Refused %s: fence token %d, older than %d",
        f"{PREFIX[:-5]}WARNING Suppressed 9 similar messages in 60 s: TLS handshake failed",
    ]
    log.write_text("\n".join(lines) + "\n")
    (found,) = read({"node1": log})
    assert found.refused == {7: 1} and found.refused_uncounted == 41
    assert check([found]).refused == 42


def test_no_windows_pass_and_say_so() -> None:
    verdict = check([parse("node1", [])])
    assert verdict and verdict.calls == 0 and "0 fence windows" in str(verdict)


def test_refused_writes_and_calls_are_counted_in_a_masterd_log(tmp_path: Path) -> None:
    log = tmp_path / "corral-masterd.log"
    message = "Refused to write the config: a newer master daemon (fence token 9) writes it now"
    lines = [
        f"{PREFIX[:-5]}WARNING Write refused: {message}; this one (token 8) was deposed",
        f"{PREFIX}Mastership acquired by node2.example.com (fence token 9)",
        f"{PREFIX[:-5]}WARNING Suppressed 3 similar messages in 60 s: Write refused: %s",
        f"{PREFIX[:-5]}ERROR Fenced call refused: RPC call upload_file to 10.213.0.3 not made",
        f"{PREFIX[:-5]}ERROR Suppressed 2 similar messages in 60 s: Fenced call refused: %s",
    ]
    log.write_text("\n".join(lines) + "\n")
    assert masterd_refusals(log) == {"writes": 4, "calls": 3}
