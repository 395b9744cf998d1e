"""Opening an AERO file that is not here (remote): only the ranges the structure check needs."""
from __future__ import annotations

from typing import Callable

from ...schemas import aero as S
from ...schemas.aero import FourCC

from ... import errors as E
from ...io.sources import PartialSource
from .chunks import HEADER, TOC_ENTRY, TOC_HEADER
from .reader import AeroReader

#: a file that is not here (remote) is opened by reading its first OPEN_PREFIX bytes: header,
#: TOC, string table and, for models of up to a few thousand tensors, the metadata chunks too
OPEN_PREFIX = 256 * 1024
#: ranges the opener needs that are closer than this are read as one
_OPEN_GAP = 64 * 1024
#: the chunks a reader decodes at open (MJSN: for metadata)
_OPEN_CHUNKS = (FourCC.MMSG, FourCC.TIDX, FourCC.MJSN)


def open_partial(name: str, size: int, read: Callable[[list[tuple[int, int]]], list], *, strict: bool = True,
                 prefix: int = OPEN_PREFIX, _collect: bool = False) -> AeroReader:
    """Open an AERO file of ``size`` bytes that is not here, reading only what the structure
    check needs, with ``read([(start, length), ...]) -> [bytes, ...]`` (at most three calls):
    the first ``prefix`` bytes; then, only if they were not in it, the TOC and the string
    table; then the first MMSG, TIDX and MJSN chunks the TOC lists — exactly what the reader
    reads at open, so both give the same tensors or the same error.  A range is read only when
    it lies inside the file and within the limits the header and TOC declare, so a hostile
    header cannot make the opener download (or hold) more than those limits.  Tensor bytes
    are not read: ``tensors[name].offset`` says where they are."""
    src = PartialSource(name, size)
    first = min(size, max(prefix, S.HEADER_SIZE))
    src.add(0, read([(0, first)])[0])
    try:
        if first >= S.HEADER_SIZE:
            h = HEADER.parse(src.buf, 0, "FileHeader")
            if not _stops(HEADER.check(h, 0, "FileHeader")):
                toc_off, toc_len = h["toc_offset"], h["toc_length"]
                st_off, st_len = h["string_table_offset"], h["string_table_length"]
                want = [(a, a + n) for a, n in ((toc_off, toc_len), (st_off, st_len))
                        if a + n <= size and n <= _MAX_TOC_BYTES]
                _read_into(src, read, want)
                if want and want[0][0] == toc_off:
                    _read_into(src, read, _metadata_spans(src, toc_off, size))
    except E.FormatError:
        pass  # the reader reports it, from what is here
    return AeroReader(src, strict=strict, _collect=_collect)


#: the largest TOC a header may make the opener read (MAX_ENTRY_COUNT entries)
_MAX_TOC_BYTES = S.TOC_HEADER_SIZE + S.TOC_ENTRY_SIZE * S.MAX_ENTRY_COUNT


def _read_into(src: PartialSource, read, spans: list[tuple[int, int]]) -> None:
    """Read the parts of ``spans`` that ``src`` does not hold yet (near ones as one range)."""
    todo: list[list[int]] = []
    for a, b in sorted(spans):
        for x, y in src.missing(a, b):
            if todo and x <= todo[-1][1] + _OPEN_GAP:
                todo[-1][1] = max(todo[-1][1], y)
            else:
                todo.append([x, y])
    if todo:
        for (a, _), data in zip(todo, read([(a, b - a) for a, b in todo])):
            src.add(a, data)


def _stops(violations) -> bool:
    """Violations after which the reader reads no further (so neither does the opener)."""
    return any(isinstance(v, (E.MagicError, E.UnsupportedVersionError, E.LimitError)) for v in violations)


def _metadata_spans(src: PartialSource, toc_off: int, size: int) -> list[tuple[int, int]]:
    """Where the first chunk of each type the reader decodes at open lies (when it is sane)."""
    th = TOC_HEADER.parse(src.buf, toc_off, "TocHeader")
    n = th["entry_count"]
    if _stops(TOC_HEADER.check(th, toc_off, "TocHeader")) or \
            not src.has(toc_off + S.TOC_HEADER_SIZE, n * S.TOC_ENTRY_SIZE):
        return []
    tab = TOC_ENTRY.view(src.buf, toc_off + S.TOC_HEADER_SIZE, n)
    spans, seen = [], set()
    for fourcc, off, ln in zip(tab["fourcc"], tab["chunk_offset"].tolist(), tab["chunk_length"].tolist()):
        fc = bytes(fourcc)
        if fc in _OPEN_CHUNKS and fc not in seen:
            seen.add(fc)
            if 0 < ln <= S.MAX_METADATA_ULEN and off + ln <= size:
                spans.append((off, off + ln))
    return spans
