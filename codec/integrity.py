"""Hashes over byte ranges, streamed in bounded pieces (never a whole shard in memory)."""
from __future__ import annotations

from typing import Callable

import blake3 as _b3

from .io import PIECE, Source

AUTO = _b3.blake3.AUTO


def blake3_bytes(data) -> bytes:
    h = _b3.blake3(max_threads=AUTO) if len(data) >= (1 << 20) else _b3.blake3()
    h.update(data)
    return h.digest()


def blake3_range(src: Source, start: int, length: int, progress: Callable[[int], None] | None = None) -> bytes:
    """BLAKE3-256 of ``src.buf[start:start+length]``, streamed; mapped pages are released
    behind the hasher so resident memory stays flat whatever the size."""
    h = _b3.blake3(max_threads=AUTO)
    end = start + length
    pos = start
    while pos < end:
        n = min(PIECE, end - pos)
        h.update(src.buf[pos:pos + n])
        src.release(pos, n)
        if progress:
            progress(n)
        pos += n
    return h.digest()


def blake3_pages(src: Source, start: int, length: int, page_size: int,
                 progress: Callable[[int], None] | None = None) -> list[bytes]:
    """BLAKE3-256 of each ``page_size`` page of a range (the last page may be short)."""
    out = []
    pos, end = start, start + length
    while pos < end:
        n = min(page_size, end - pos)
        out.append(blake3_range(src, pos, n) if n > PIECE else blake3_bytes(src.buf[pos:pos + n]))
        if n <= PIECE:
            src.release(pos, n)
        if progress:
            progress(n)
        pos += n
    return out


class PageHasher:
    """Feeds a byte stream and cuts it into BLAKE3 digests of fixed-size pages (AIP-0002)."""

    def __init__(self, page_size: int):
        self.page_size = page_size
        self.digests: list[bytes] = []
        self._h = _b3.blake3()
        self._fill = 0

    def update(self, data) -> None:
        mv = memoryview(data).cast("B")
        while mv:
            take = min(self.page_size - self._fill, len(mv))
            self._h.update(mv[:take])
            self._fill += take
            mv = mv[take:]
            if self._fill == self.page_size:
                self.digests.append(self._h.digest())
                self._h = _b3.blake3()
                self._fill = 0

    def finish(self) -> list[bytes]:
        if self._fill:
            self.digests.append(self._h.digest())
            self._h = _b3.blake3()
            self._fill = 0
        return self.digests


def _crc32c(pieces) -> int:
    import google_crc32c
    crc = 0
    for p in pieces:
        crc = google_crc32c.extend(crc, bytes(p) if not isinstance(p, bytes) else p)
    return crc


#: checksum algorithms a schema may name (schemas.dsl.Checksum.algorithm)
CHECKSUMS: dict[str, Callable] = {"crc32c": _crc32c}


def checksum(spec, buf, end: int) -> int:
    """The declared checksum ``spec`` over ``buf[spec.start:end]``, streamed in pieces."""
    fn = CHECKSUMS[spec.algorithm]
    return fn(buf[k:min(k + PIECE, end)] for k in range(spec.start, end, PIECE))


def new_hasher():
    return _b3.blake3(max_threads=AUTO)
