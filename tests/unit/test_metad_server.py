"""corral-metad's server in-process on loopback: the device is ``lo``, the guest
127.0.0.1, any other source address a stranger.  The control socket is reached
through the client noded uses."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral.metad import client, wire
from corral.metad.listener import GuestConnection, GuestLimits, TapSite
from corral.metad.server import MAX_RECORD, NOT_FOUND, Metad, serve_metad
from corral.paths import Paths
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE, USER_DATA, sample
from tests.helpers.noded import free_port
from tests.helpers.waiting import wait_until_async

GUEST, STRANGER = "127.0.0.1", "127.0.0.2"
LIMITS = GuestLimits(request_timeout=0.5, max_connections=4, max_body=4096)


class Bed:
    def __init__(self, paths: Paths, port: int) -> None:
        self.paths = paths
        self.port = port

    async def ask(self, raw: bytes, source: str = GUEST) -> tuple[int, bytes]:
        """Send ``raw``, read the answer to its end: status and body."""
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port, local_addr=(source, 0)
        )
        writer.write(raw)
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), body

    async def get(self, path: str, source: str = GUEST) -> tuple[int, bytes]:
        return await self.ask(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), source)


@pytest.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    paths = Paths(tmp_path)
    port = free_port()
    metad = Metad("127.0.0.1", port, LIMITS)
    ready = asyncio.Event()
    task = asyncio.create_task(serve_metad(metad, paths.metad_socket, ready.set))
    await asyncio.wait_for(ready.wait(), 10)
    yield Bed(paths, port)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def publish(bed: Bed, installing: bool = False, os_dir: str | None = None) -> None:
    record = client.record_of(sample(installing=installing, os_dir=os_dir), "lo", GUEST)
    await client.publish(bed.paths, record)


async def test_a_guest_gets_its_own_data(bed: Bed) -> None:
    await publish(bed, installing=True)
    status, body = await bed.get("/ganeti/latest/os/parameters.json")
    assert status == 200
    assert json.loads(body)["password"] == [SECRET_VALUE, "secret"]
    assert (await bed.get("/nocloud/meta-data"))[0] == 200
    assert (await bed.get("/openstack"))[0] == 200


async def test_another_source_address_gets_nothing(bed: Bed) -> None:
    await publish(bed, installing=True)
    for path in ("/ganeti/latest/os/parameters.json", "/nocloud/user-data", "/openstack"):
        assert await bed.get(path, STRANGER) == (404, NOT_FOUND.encode())


async def test_withdrawn_data_is_gone(bed: Bed) -> None:
    await publish(bed)
    await client.withdraw(bed.paths, "inst1.example.com")
    await client.withdraw(bed.paths, "inst1.example.com")  # idempotent
    with pytest.raises(OSError):
        await bed.get("/nocloud/meta-data")  # the tap's socket is closed with its last guest


async def test_progress_written_by_the_install_reaches_noded_once(bed: Bed) -> None:
    await publish(bed, installing=True)
    for text in ("unpacking\n", "50% done\r\nconfiguring"):
        raw = (
            f"POST /ganeti/latest/write HTTP/1.1\r\nHost: x\r\nContent-Length: {len(text)}\r\n\r\n"
        )
        assert (await bed.ask(raw.encode() + text.encode()))[0] == 200
    assert await bed.get("/ganeti/latest/read") == (200, b"unpacking\n50% done\nconfiguring\n")
    assert await client.progress(bed.paths, "inst1.example.com") == [
        "unpacking",
        "50% done",
        "configuring",
    ]
    assert await client.progress(bed.paths, "inst1.example.com") == []
    with pytest.raises(client.MetadError, match="not published"):
        await client.progress(bed.paths, "nobody")


async def test_a_chunked_write_and_a_head_in_pieces_are_taken(bed: Bed) -> None:
    await publish(bed, installing=True)
    chunked = (
        b"PUT /ganeti/latest/write HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"6\r\nstep 1\r\n7\r\n\nstep 2\r\n0\r\n\r\n"
    )
    assert (await bed.ask(chunked))[0] == 200
    assert await client.progress(bed.paths, "inst1.example.com") == ["step 1", "step 2"]
    reader, writer = await asyncio.open_connection("127.0.0.1", bed.port)
    for byte in b"GET /openstack HTTP/1.1\r\nHost: x\r\n\r\n":
        writer.write(bytes([byte]))
        await writer.drain()
    assert (await asyncio.wait_for(reader.read(), 5)).endswith(b"\r\n\r\nlatest\n")
    writer.close()


async def test_head_requests_get_the_head_alone(bed: Bed) -> None:
    await publish(bed)
    answer = await bed.get("/nocloud/user-data")
    head = await bed.ask(b"HEAD /nocloud/user-data HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer[0] == head[0] == 200 and head[1] == b""
    assert answer[1] == USER_DATA


@pytest.mark.parametrize("reading", [True, False])
async def test_a_large_answer_is_sent_whole_and_a_guest_not_reading_is_cut(reading: bool) -> None:
    # A connection on one end of a socket pair whose send buffer is small.
    big = wire.response(200, bytes(range(256)) * 4096)
    site = TapSite("lo", "127.0.0.1", 0, LIMITS, lambda tap, source, head, body: big)
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    with ours, theirs:
        theirs.setblocking(False)
        await loop.sock_sendall(theirs, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        GuestConnection(site, ours, GUEST)
        if not reading:  # cut by the deadline (0.5 s) while its answer waits
            await wait_until_async(lambda: not site.live, 10, "the guest cut")
        answer = bytearray()
        while chunk := await loop.sock_recv(theirs, 65536):
            answer += chunk
    assert answer == big if reading else 0 < len(answer) < len(big)
    assert not site.live


async def test_node_files_are_streamed(bed: Bed, tmp_path: Path) -> None:
    os_dir = tmp_path / "os"
    os_dir.mkdir()
    (os_dir / "create").write_text("#!/bin/sh\necho created\n")
    await publish(bed, installing=True, os_dir=str(os_dir))
    assert await bed.get("/ganeti/latest/os/scripts/create") == (200, b"#!/bin/sh\necho created\n")
    assert (await bed.get("/ganeti/latest/os/scripts/export"))[0] == 404  # not there


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /" + b"a" * 8000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 8000 + b"\r\n\r\n", 400),
        (b"POST /ganeti/latest/write HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n", 413),
        (b"NONSENSE\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -4\r\n\r\n", 400),
        (b"DELETE /nocloud/meta-data HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"GET /ganeti/latest/write HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    ],
)
async def test_huge_or_malformed_requests_are_refused(bed: Bed, raw: bytes, status: int) -> None:
    await publish(bed, installing=True)
    code, body = await bed.ask(raw + b"x" * 9000 if status == 413 else raw)
    assert code == status
    assert SECRET_VALUE.encode() not in body and PRIVATE_VALUE.encode() not in body
    assert await client.progress(bed.paths, "inst1.example.com") == []


async def test_a_request_that_never_ends_is_cut(bed: Bed) -> None:
    await publish(bed)
    reader, writer = await asyncio.open_connection("127.0.0.1", bed.port)
    writer.write(b"GET /nocloud/meta-data HTTP/1.1\r\nHost: x\r\n")  # no end of head
    # Closed by metad's deadline (0.5 s), long before ours.
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()


async def test_a_tap_holds_a_bounded_number_of_connections(bed: Bed) -> None:
    await publish(bed)
    held = [
        await asyncio.open_connection("127.0.0.1", bed.port) for _ in range(LIMITS.max_connections)
    ]
    reader, writer = await asyncio.open_connection("127.0.0.1", bed.port)
    assert await asyncio.wait_for(reader.read(), 5) == b""  # refused: closed at once
    writer.close()
    for _, held_writer in held:
        held_writer.close()


async def test_bad_records_are_refused_and_change_nothing(bed: Bed) -> None:
    await publish(bed)
    good = client.record_of(sample(), "lo", GUEST)
    bad_records = [
        (
            {**good, "tap": "no-such-tap0"},
            "Cannot listen on 127.0.0.1:.* on no-such-tap0: No such device",
        ),
        ({**good, "tap": "x" * 16}, "'tap' must be an interface name"),
        ({**good, "ip": "10.0.0.300"}, "Bad record"),
        ({**good, "metadata": {**good["metadata"], "hostname": 5}}, "'hostname' must be"),
    ]
    for record, message in bad_records:
        with pytest.raises(client.MetadError, match=message):
            await client.publish(bed.paths, record)
    # Just over the bound: what the client sends fits in the socket's buffers.
    huge = {**good, "metadata": {**good["metadata"], "ssh_keys": ["k" * MAX_RECORD]}}
    with pytest.raises(client.MetadError, match=r"answered 413: Maximum request body size"):
        await client.publish(bed.paths, huge)
    other = client.record_of(sample("inst2.example.com"), "lo", GUEST)
    with pytest.raises(client.MetadError, match=r"belongs to instance inst1\.example\.com"):
        await client.publish(bed.paths, other)
    status, body = await bed.get("/nocloud/meta-data")
    assert status == 200 and sample().instance_id.encode() in body


async def test_the_client_says_when_metad_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(client.MetadError, match=r"corral-metad at .*ganeti-metad"):
        await client.withdraw(Paths(tmp_path), "inst1")
