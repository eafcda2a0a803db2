"""The HTTP metad's guests speak (corral.metad.wire): request heads taken or
refused with the right status, bodies by length or in chunks however they
arrive, answers as bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.metad import wire

LIMITS = wire.HeadLimits(max_line=100, max_fields=4, max_body=64)


def head(raw: bytes) -> wire.Head:
    return wire.parse_head(raw, LIMITS)


def test_a_request_head_is_taken() -> None:
    found = head(b"POST /ganeti/latest/write?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 ")
    assert found == wire.Head("POST", "/ganeti/latest/write", 12, False)
    assert head(b"GET /nocloud/meta%2Ddata HTTP/1.0").path == "/nocloud/meta-data"
    assert head(b"GET http://169.254.169.254/openstack HTTP/1.1").path == "/openstack"
    assert head(b"PUT /w HTTP/1.1\r\ntransfer-encoding: Chunked").chunked


@pytest.mark.parametrize(
    ("raw", "status", "words"),
    [
        (b"GET /" + b"a" * 100 + b" HTTP/1.1", 400, "head line over 100 bytes"),
        (b"GET / HTTP/1.1" + b"\r\nX: y" * 5, 400, "more than 4 header fields"),
        (b"NONSENSE", 400, "malformed request line"),
        (b"GET  / HTTP/1.1", 400, "malformed request line"),
        (b"GET / HTTP/2.0", 400, "malformed request line"),
        (b"get / HTTP/1.1", 400, "malformed request line"),
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 400, "malformed request line"),
        (b"GET ftp://a/b HTTP/1.1", 400, "target must be a path"),
        (b"GET / HTTP/1.1\r\nX : y", 400, "malformed header field"),
        (b"GET / HTTP/1.1\r\n folded", 400, "malformed header field"),
        (b"GET / HTTP/1.1\r\nX: a\x00b", 400, "malformed header field"),
        (b"GET / HTTP/1.1\r\nContent-Length: -4", 400, "invalid Content-Length"),
        (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1", 400, "given twice"),
        (b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip", 400, "only transfer coding"),
        (b"PUT / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked", 400, "both"),
        (b"PUT / HTTP/1.1\r\nContent-Length: 65", 413, "over 64 bytes"),
    ],
)
def test_bad_heads_are_refused(raw: bytes, status: int, words: str) -> None:
    with pytest.raises(wire.HttpError, match=words) as caught:
        head(raw)
    assert caught.value.status == status


def test_an_unfinished_head_is_refused_once_over_a_bound() -> None:
    wire.check_partial(b"GET / HTTP/1.1\r\nX: " + b"y" * 90, 1, LIMITS)
    with pytest.raises(wire.HttpError, match="over 100 bytes"):
        wire.check_partial(b"GET / HTTP/1.1\r\nX: " + b"y" * 100, 1, LIMITS)
    with pytest.raises(wire.HttpError, match="more than 4 header fields"):
        wire.check_partial(b"GET / HTTP/1.1" + b"\r\nX: y" * 5, 6, LIMITS)


def fed(body: wire.Body, data: bytes, cuts: list[int]) -> bytes | None:
    """``data`` fed in pieces cut at ``cuts``: the body once whole."""
    found = None
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        assert found is None, "the body was whole before its end"
        found = body.feed(data[start:end])
    return found


CHUNKED = b"5;ext=1\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"


@given(st.lists(st.integers(1, len(CHUNKED) - 1), unique=True).map(sorted))
def test_a_chunked_body_is_gathered_however_it_arrives(cuts: list[int]) -> None:
    chunked = wire.Body(wire.Head("POST", "/", 0, True), 64)
    assert fed(chunked, CHUNKED, cuts) == b"hello, world"


@given(st.lists(st.integers(1, 11), unique=True).map(sorted))
def test_a_body_of_a_given_length_is_gathered_however_it_arrives(cuts: list[int]) -> None:
    plain = wire.Body(wire.Head("POST", "/", 12, False), 64)
    assert fed(plain, b"hello, world", cuts) == b"hello, world"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"41\r\n", 413),  # 65 bytes announced
        (b"40\r\n" + b"x" * 64 + b"\r\n1\r\n", 413),
        (b"zz\r\n", 400),
        (b"2\r\nabc\r\n", 400),
        (b"1" * 2000, 400),
    ],
)
def test_bad_chunks_are_refused(raw: bytes, status: int) -> None:
    with pytest.raises(wire.HttpError) as caught:
        wire.Body(wire.Head("POST", "/", 0, True), 64).feed(raw)
    assert caught.value.status == status


def test_answers_are_whole_and_heads_cut_from_them() -> None:
    answer = wire.response(405, b"no", headers=(("Allow", "GET, HEAD"),))
    assert answer == (
        b"HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 2\r\nConnection: close\r\nAllow: GET, HEAD\r\n\r\nno"
    )
    assert wire.head_only(answer) == answer[:-2]
