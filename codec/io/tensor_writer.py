"""One streaming writer for files laid out as a control region followed by data regions at
aligned offsets: where each region goes (:func:`place`) and the file written from it
(:func:`write_placed`) -- atomically, in bounded pieces, zeros between the regions, with a
progress bar on a terminal.  A format's writer builds its control bytes (headers, tables) from
its schema and hands them over with the arrays; the alignment is the format's declared one."""
from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

import numpy as np

from .atomic import atomic_write
from .integrity import first_odd_bool
from ..errors import UsageError
from ..ui.progress import Progress
from .writer_io import PIECE, LazyTensor, array_pieces, as_array, name_bytes, named_pairs, write_all


def admit(tensors: Mapping | Iterable, caps, dtypes) -> list[tuple[str, int, np.ndarray]]:
    """A writer's input checked, before anything is written, against what its format declares
    it holds: its capabilities (:class:`codec.registry.Capabilities`: names, ranks, extents)
    and its element types (a :class:`codec.engine.dtypes.DTypeTable`).  ``tensors``: a mapping or
    pairs of name -> array (or :class:`LazyTensor`, for a format whose capabilities say
    ``lazy``: kept lazy).  Returns (name, element type code, the array as stored) in input
    order; a UsageError names the first tensor it cannot hold, and why."""
    out, seen = [], set()
    empty_ok = caps.names is not None and re.fullmatch(caps.names, "") is not None
    for name, a in named_pairs(tensors):
        name_bytes(name, empty_ok=empty_ok)
        if name in seen:
            raise UsageError(f"duplicate tensor name {name!r}")
        seen.add(name)
        lazy = caps.lazy and isinstance(a, LazyTensor)
        a = a if lazy else as_array(name, a)
        code = dtypes.code_for(name, a)
        why = caps.refuse(name, dtypes.numpy[code].name, a.shape)
        if why is not None:
            raise UsageError(f"tensor {name!r}: {why}")
        if lazy and a.dtype != dtypes.numpy[code]:
            a = LazyTensor(dtypes.numpy[code], a.shape, lambda t=a, c=code, n=name: dtypes.stored(t.materialise(n), c))
        out.append((name, code, a if lazy else dtypes.stored(a, code)))
    return out


def check_bools(name: str, a: np.ndarray) -> np.ndarray:
    """``a`` itself when it is not bool or every element is the byte 0 or 1; else UsageError
    naming the tensor and the first other byte (for a format whose readers refuse them)."""
    if a.dtype != np.bool_:
        return a
    flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    odd = first_odd_bool(flat[s:s + PIECE] for s in range(0, flat.size, PIECE))
    if odd is not None:
        raise UsageError(f"tensor {name!r}: a bool element must be the byte 0 or 1, element {odd[0]} is {odd[1]} "
                         "(a.view(numpy.uint8) != 0 gives the bools it stands for); nothing was written")
    return a


def align_up(x: int, n: int) -> int:
    """The least multiple of ``n`` at or after ``x``."""
    return -(-x // n) * n


def size_of(v) -> int:
    """The bytes a region's value takes: an array's (or lazy tensor's) ``nbytes``, else its length."""
    n = getattr(v, "nbytes", None)
    return len(v) if n is None else n


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
