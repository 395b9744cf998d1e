"""One streaming writer for files laid out as a control region followed by data regions at
aligned offsets: where each region goes (:func:`place`) and the file written from it
(:func:`write_placed`) -- atomically, in bounded pieces, zeros between the regions, with a
progress bar on a terminal.  A format's writer builds its control bytes (headers, tables) from
its schema and hands them over with the arrays; the alignment is the format's declared one."""
from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from .atomic import atomic_write
from .progress import Progress
from .writer_io import LazyTensor, array_pieces, write_all


def align_up(x: int, n: int) -> int:
    """The least multiple of ``n`` at or after ``x``."""
    return -(-x // n) * n


def size_of(v) -> int:
    """The bytes a region's value takes: an array's (or lazy tensor's) ``nbytes``, else its length."""
    n = getattr(v, "nbytes", None)
    return len(v) if n is None else n


def place(sizes: Iterable[int], start: int, align: int, *, pad_end: bool = False) -> tuple[list[int], int]:
    """Offsets of regions of ``sizes`` laid in order from ``start``, each at the next multiple
    of ``align`` after the previous one's end, and where the last one ends (rounded up to
    ``align`` with ``pad_end``)."""
    offsets, pos = [], start
    for n in sizes:
        pos = align_up(pos, align)
        offsets.append(pos)
        pos += n
    return offsets, (align_up(pos, align) if pad_end else pos)


def write_placed(path, head: bytes, regions: Iterable[tuple[int, object, str]], end: int, *,
                 progress: bool | None = None) -> str:
    """Write ``head`` at 0 and each region's bytes at its offset, zeros in every gap, up to
    ``end``: one atomic file.  ``regions``: ``(offset, value, name)`` in increasing offset order;
    a value is bytes (control data), an array (streamed in pieces) or a :class:`LazyTensor`
    (loaded when its turn comes, dropped after)."""
    regions = list(regions)
    total = sum(size_of(v) for _, v, _ in regions if isinstance(v, (np.ndarray, LazyTensor)))
    with Progress(total, f"write {os.path.basename(os.fspath(path))}", enabled=progress) as bar, \
            atomic_write(path) as f:
        write_all(f, head)
        at = len(head)
        for off, v, name in regions:
            if off > at:
                write_all(f, bytes(off - at))
            if isinstance(v, LazyTensor):
                v = v.materialise(name)  # one lazy tensor in memory at a time
            if isinstance(v, np.ndarray):
                for p in array_pieces(v)():
                    write_all(f, p)
                    bar.update(len(p))
                at = off + v.nbytes
            else:
                write_all(f, v)
                at = off + size_of(v)
        if end > at:
            write_all(f, bytes(end - at))
    return os.fspath(path)
