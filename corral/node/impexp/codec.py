"""Compression of the stream: the exporter encodes, the importer decodes.

Ganeti's levels: ``gzip`` and ``gzip-fast`` are ``gzip -1``, ``gzip-slow``
is gzip's default (6); the data is in gzip format (zlib with a gzip
wrapper).  ``zstd`` is Zstandard at its default level (3): several times
faster than gzip -1 for a similar ratio on disk images.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol

import zstandard

from corral import errors
from corral.node.impexp.wire import FRAME

_GZIP_LEVELS = {"gzip": 1, "gzip-fast": 1, "gzip-slow": 6}
_GZIP_WBITS = 16 + zlib.MAX_WBITS
ZSTD_LEVEL = 3


class Encoder(Protocol):
    def compress(self, data: memoryview) -> bytes: ...

    def flush(self) -> bytes: ...


class Decoder:
    """Decompresses the frames' payloads into pieces of at most FRAME bytes
    (a small frame of zeros may expand a lot: it is not held all at once)."""

    def __init__(self, compress: str) -> None:
        self._zlib = zlib.decompressobj(_GZIP_WBITS) if compress != "zstd" else None
        self._zstd = zstandard.ZstdDecompressor().decompressobj() if compress == "zstd" else None

    def feed(self, data: memoryview) -> Iterator[bytes]:
        """The uncompressed pieces of ``data``."""
        try:
            if self._zstd is not None:
                out = self._zstd.decompress(data)
                for start in range(0, len(out), FRAME):
                    yield out[start : start + FRAME]
                return
            assert self._zlib is not None
            chunk: bytes | memoryview = data
            while chunk:
                yield self._zlib.decompress(chunk, FRAME)
                chunk = self._zlib.unconsumed_tail
        except (zlib.error, zstandard.ZstdError) as err:
            raise errors.OpExecError(f"the compressed stream is corrupt: {err}") from None

    def finish(self) -> None:
        """Check that the compressed stream ended cleanly."""
        if self._zlib is not None and not self._zlib.eof:
            raise errors.OpExecError("the compressed stream ended early")


def encoder(compress: str) -> Encoder | None:
    """The encoder of ``compress`` (None for ``none``)."""
    if compress == "none":
        return None
    if compress == "zstd":
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
    return zlib.compressobj(_GZIP_LEVELS[compress], zlib.DEFLATED, _GZIP_WBITS)


def decoder(compress: str) -> Decoder | None:
    """The decoder of ``compress`` (None for ``none``)."""
    return None if compress == "none" else Decoder(compress)
