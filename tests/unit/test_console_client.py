"""gnt-instance console's pieces: the WebSocket framing of the relay client
and Ganeti's shell quoting of --show-cmd."""

from __future__ import annotations

import os

import pytest

from corral.cli import console_client as CC
from corral.cli.instance_console import shell_quote, shell_quote_args


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 200_000])
def test_a_client_frame_parses_back_at_every_length_encoding(size: int) -> None:
    payload = os.urandom(size)
    data = CC.frame(2, payload)
    # Masked: the payload never travels as it is (RFC 6455 asks it of clients).
    assert size < 8 or payload not in data
    frames = CC.Frames()
    # Byte by byte up to the end of the header, then the rest: whole frames only.
    for i in range(min(len(data) - 1, 20)):
        frames.feed(data[i : i + 1])
        assert frames.next() is None
    frames.feed(data[min(len(data) - 1, 20) :])
    assert frames.next() == (2, payload)
    assert frames.next() is None


def test_unmasked_server_frames_and_several_in_one_read() -> None:
    frames = CC.Frames(b"\x82\x03abc\x89\x00\x88\x02\x03\xe8")
    assert [frames.next(), frames.next(), frames.next(), frames.next()] == [
        (2, b"abc"),
        (9, b""),
        (8, b"\x03\xe8"),
        None,
    ]


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("-oPort=22", "-oPort=22"),
        ("STDIO,raw,echo=0", "STDIO,raw,echo=0"),
        ("a b", "'a b'"),
        ("it's", "'it'\\''s'"),
        ("100%", "'100%'"),
    ],
)
def test_shell_quoting_is_ganetis(value: str, quoted: str) -> None:
    assert shell_quote(value) == quoted


def test_quoted_arguments_are_joined_by_spaces() -> None:
    assert shell_quote_args(["socat", "a b", "x"]) == "socat 'a b' x"
