"""Pieces of the node's import/export engine on their own: the framing, the
compressions, the name checks of the export directory, the per-move keys."""

from __future__ import annotations

import mmap
import os
import socket
from pathlib import Path

import pytest
from cryptography import x509

from corral import errors
from corral.node.impexp import codec, exports, sources, wire, x509keys
from corral.paths import Paths
from tests.helpers.waiting import wait_until


@pytest.mark.parametrize("compress", ["gzip", "gzip-fast", "gzip-slow", "zstd"])
def test_codec_round_trip_in_bounded_pieces(compress: str) -> None:
    data = os.urandom(3 * wire.FRAME // 2) + bytes(9 * wire.FRAME) + b"end"
    enc = codec.encoder(compress)
    assert enc is not None
    packed = b"".join(
        enc.compress(memoryview(data[i : i + wire.FRAME])) for i in range(0, len(data), wire.FRAME)
    )
    packed += enc.flush()
    dec = codec.decoder(compress)
    assert dec is not None
    out = []
    for start in range(0, len(packed), 65536):
        out += list(dec.feed(memoryview(packed[start : start + 65536])))
    dec.finish()
    assert b"".join(out) == data
    assert max(len(piece) for piece in out) <= wire.FRAME


def test_gzip_levels_are_ganetis() -> None:
    # gzip and gzip-fast are "gzip -1", gzip-slow gzip's default level.
    assert codec._GZIP_LEVELS == {"gzip": 1, "gzip-fast": 1, "gzip-slow": 6}


def test_truncated_gzip_stream_is_an_error() -> None:
    enc = codec.encoder("gzip")
    assert enc is not None
    packed = enc.compress(memoryview(os.urandom(100_000))) + enc.flush()
    dec = codec.decoder("gzip")
    assert dec is not None
    list(dec.feed(memoryview(packed[:-10])))
    with pytest.raises(errors.OpExecError, match="ended early"):
        dec.finish()


def test_header_and_refusal_over_a_socket() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(wire.Header("magic-123", "zstd", True, 12345).encode())
        header = wire.read_header(b)
        assert (header.magic, header.compress, header.hashed, header.size) == (
            "magic-123",
            "zstd",
            True,
            12345,
        )
        wire.send_status(b, "wrong magic")
        with pytest.raises(errors.OpExecError, match="refused the stream: wrong magic"):
            wire.read_status(a)
        a.sendall(b"GET / HTTP/1.1\r\n")
        with pytest.raises(errors.OpExecError, match="does not start"):
            wire.read_header(b)


@pytest.mark.parametrize("bad", ["..", "a/b", "../x", "", ".x", "a/../b", "x" * 300, None, 3])
def test_export_names_are_plain(tmp_path: Path, bad: object) -> None:
    paths = Paths(tmp_path)
    with pytest.raises(errors.OpExecError, match="Invalid"):
        exports.export_path(paths, bad)


def test_finalize_replaces_the_export(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    (exports.new_dir(paths, "inst1") / "d0").write_bytes(b"data")
    exports.finalize(paths, "inst1", "[export]\n")
    (exports.new_dir(paths, "inst1") / "d0").write_bytes(b"newer")
    exports.finalize(paths, "inst1", "[export]\nversion = 0\n")
    assert exports.listing(paths) == ["inst1"]
    assert exports.info(paths, "inst1") == "[export]\nversion = 0\n"
    assert (paths.export_dir / "inst1" / "d0").read_bytes() == b"newer"
    assert (paths.export_dir / "inst1" / "config.ini").stat().st_mode & 0o777 == 0o600
    # The replaced export is removed in the background, out of the listing meanwhile.
    wait_until(lambda: not list(paths.export_dir.glob(".*")), what="the old export removed")
    assert sorted(p.name for p in paths.export_dir.iterdir()) == ["inst1"]
    exports.new_dir(paths, "inst2")
    (paths.export_dir / ".retired-inst1-0123abcd").mkdir()
    assert exports.purge_unfinished(paths) == [".retired-inst1-0123abcd", "inst2.new"]
    exports.remove(paths, "inst1")
    assert exports.listing(paths) == []


def test_x509_key(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    for bad in (0, -1, 8 * 86400, True, "60"):
        with pytest.raises(errors.OpExecError, match="validity"):
            x509keys.create(paths, "node1.example.com", "192.0.2.1", bad)
    name, pem = x509keys.create(paths, "node1.example.com", "192.0.2.1", 3600)
    cert = x509.load_pem_x509_certificate(pem.encode())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["node1.example.com"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["192.0.2.1"]
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime.total_seconds() == 3600 + 300
    key, _ = x509keys.files(paths, name)
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.parent.stat().st_mode & 0o777 == 0o700
    assert x509keys.purge_expired(paths) == []
    with pytest.raises(errors.OpExecError, match="Invalid X509 key name"):
        x509keys.remove(paths, "../" + name)
    x509keys.remove(paths, name)
    with pytest.raises(errors.OpExecError, match="Unknown X509 key"):
        x509keys.remove(paths, name)


def _read_all(source: sources.FileSource) -> tuple[bytes, set[str]]:
    buffer = mmap.mmap(-1, wire.FRAME)
    data, origins = b"", set()
    while view := source.read(buffer):
        origins.add("buffer" if view.obj is buffer else "cache")
        data += view.tobytes()
        view.release()
    return data, origins


def test_file_source_from_cache_or_device(tmp_path: Path) -> None:
    path = tmp_path / "disk"
    content = os.urandom(2 * wire.FRAME + 4096 + 5)
    with path.open("wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    # Just written: in the page cache, sent from there without a copy.
    source = sources.FileSource(path, len(content))
    try:
        assert _read_all(source) == (content, {"cache"})
    finally:
        source.close()
    with path.open("rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    source = sources.FileSource(path, len(content))
    try:
        assert _read_all(source) == (content, {"buffer"})
    finally:
        source.close()
