"""AERO: the records, dtype tables and chunks the reader, opener and writer share; the bounded
zstd inflation of a chunk's payload."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import zstandard

from ...schemas import aero as S
from ...schemas.aero import DType, Rule

from ... import errors as E
from ...engine.dtypes import DTypeTable
from ...engine.records import record_of
from ...io.tensor_writer import align_up
from ...io.writer_io import PIECE
from ...engine.relations.plan import after

FMT = S.FORMAT
HEADER = record_of(S.FileHeader)
TOC_HEADER = record_of(S.TocHeader)
TOC_ENTRY = record_of(S.TocEntry)

DTYPES = DTypeTable(S.DTYPES, FMT)
#: AERO dtype code -> numpy dtype of the array tensor() returns (a PACKED tensor: its bytes)
NP_DTYPES: dict[int, np.dtype] = {**DTYPES.numpy, DType.PACKED: np.dtype("u1")}
#: numpy dtype (byte order ignored) -> AERO dtype code
CODE_OF: dict[np.dtype, int] = DTYPES.by_dtype


#: the hash every AERO digest uses, as reports name it
B3 = "blake3-256"


_err = E.for_format(FMT)


@dataclass
class Chunk:
    index: int
    fourcc: bytes
    name: str
    flags: int
    offset: int
    length: int
    ulen: int
    blake3: bytes
    toc_offset_field: int  # absolute offset of this chunk's TOC entry

    @property
    def compressed(self) -> bool:
        return bool(self.flags & S.ChunkFlags.COMPRESSED_ZSTD)

    def path(self) -> str:
        return f"toc[{self.index}]({self.fourcc.decode('ascii', 'replace')} {self.name!r})"


_align = align_up


def chunk_at(pos: int) -> int:
    """Where a chunk payload may start at or after ``pos``, as the schema declares."""
    return after(S.TOC_RELATIONS, "TocEntry.chunk_offset", pos, records=S.RECORDS)


def _zstd_frame_ok(raw, c: Chunk) -> None:
    """The frame header is zstd and does not contradict chunk_ulen (checked before inflating)."""
    try:
        params = zstandard.get_frame_parameters(raw)
    except zstandard.ZstdError as e:
        raise _err(E.CompressionError, c.offset, f"{c.path()}.payload", Rule.ZSTD, f"not a zstd frame: {e}") from None
    declared = params.content_size
    if declared != zstandard.CONTENTSIZE_UNKNOWN and declared != c.ulen:
        where = c.toc_offset_field + TOC_ENTRY.by_name["chunk_ulen"].offset
        raise _err(E.CompressionError, where, f"{c.path()}.chunk_ulen", Rule.ZSTD,
                   f"zstd frame declares {declared} bytes, chunk_ulen says {c.ulen} (refused before decompressing)")


def _ulen_error(c: Chunk, got: int) -> E.FormatError:
    where = c.toc_offset_field + TOC_ENTRY.by_name["chunk_ulen"].offset
    return _err(E.CompressionError, where, f"{c.path()}.chunk_ulen", Rule.ZSTD,
                f"payload decompresses to {'more than ' if got > c.ulen else ''}{got} bytes, chunk_ulen says {c.ulen}")


_LOCAL = threading.local()


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor for one-shot calls (a new one costs ~15 us: more than inflating a
    small manifest); a stream reader, which keeps its state between calls, gets its own."""
    d = getattr(_LOCAL, "d", None)
    if d is None:
        d = _LOCAL.d = zstandard.ZstdDecompressor()
    return d


def _zstd_bounded(raw, c: Chunk) -> bytes:
    """Decompress a metadata chunk without ever producing more than chunk_ulen bytes."""
    _zstd_frame_ok(raw, c)
    try:
        if zstandard.get_frame_parameters(raw).content_size == c.ulen:  # size known and checked: one bounded call
            out = _decompressor().decompress(raw, max_output_size=c.ulen)
            if len(out) != c.ulen:
                raise zstandard.ZstdError(f"frame decoded to {len(out)} bytes")
            return out
        with zstandard.ZstdDecompressor().stream_reader(bytes(raw), read_across_frames=True) as r:
            parts, got = [], 0
            while got <= c.ulen:
                b = r.read(min(PIECE, c.ulen + 1 - got))
                if not b:
                    break
                parts.append(b)
                got += len(b)
    except zstandard.ZstdError as e:
        raise _err(E.CompressionError, c.offset, f"{c.path()}.payload", Rule.ZSTD, f"zstd: {e}") from None
    if got != c.ulen:
        raise _ulen_error(c, got)
    return b"".join(parts)
