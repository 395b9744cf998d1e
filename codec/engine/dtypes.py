"""A format's element types as numpy dtypes: the one table type every reader and writer uses.

Derived from the format's :class:`schemas.dsl.ElementTypes` declaration (code -> name, array
type name, size): the dtype of the array a reader returns for a code, the code a writer stores
for an array, and the names a format's capabilities list.  Array types are little-endian;
bfloat16 and the float8 types come from ``ml_dtypes``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import errors as E


def numpy_dtype(name: str) -> np.dtype:
    """The little-endian numpy dtype of an array type name (numpy's, or ml_dtypes' bfloat16 and
    float8 types)."""
    t = getattr(ml_dtypes, name) if hasattr(ml_dtypes, name) and not hasattr(np, name) else name
    return np.dtype(t).newbyteorder("<")


def little(dt: np.dtype) -> np.dtype:
    """``dt`` with little-endian byte order (a no-op for one-byte and non-numeric types)."""
    return dt.newbyteorder("<")


class DTypeTable:
    """``numpy[code]``: the array dtype of a code; ``code_of(dtype)``: the code of an array's
    dtype (either byte order) or None; ``code_for(name, array)``: the same for a writer, a
    ``UsageError`` naming the types the format has when there is none; ``array_names``: the
    numpy names of the types (a format's capabilities)."""

    def __init__(self, decl, fmt: str):
        self.decl = decl
        self.fmt = fmt
        self.names = decl.names
        self.itemsize = decl.itemsize
        self.numpy: dict[int, np.dtype] = {}
        for code, (np_name, size) in decl.arrays().items():
            dt = numpy_dtype(np_name)
            if dt.itemsize != size:
                raise AssertionError(f"{fmt} element type {decl.names[code]}: {np_name} is {dt.itemsize} bytes, "
                                     f"the format says {size}")
            self.numpy[code] = dt
        #: little-endian array dtype -> code
        self.by_dtype: dict[np.dtype, int] = {}
        for code, dt in self.numpy.items():
            self.by_dtype.setdefault(dt, code)
        self.array_names = frozenset(dt.name for dt in self.numpy.values())

    def code_of(self, dt: np.dtype) -> int | None:
        return self.by_dtype.get(little(np.dtype(dt)))

    def code_for(self, name: str, a: np.ndarray) -> int:
        code = self.code_of(a.dtype)
        if code is None:
            have = ", ".join(sorted({dt.name for dt in self.numpy.values()}))
            raise E.UsageError(f"{name}: {self.fmt} has no element type for {a.dtype} (it has {have})")
        return code

    def stored(self, a: np.ndarray, code: int) -> np.ndarray:
        """``a`` as the bytes the format stores for ``code`` (little-endian; a view when it is)."""
        dt = self.numpy[code]
        return a if a.dtype == dt else a.astype(dt)


#: numpy's limit on an array's extents and on the product of its non-zero extents x itemsize
NUMPY_MAX = 2**63 - 1


def numpy_can_hold(shape, itemsize: int = 1) -> bool:
    """Can numpy make an array of this shape?  It refuses any extent over 2^63-1 and any shape
    whose non-zero extents multiply (x itemsize) past it — even when another extent is 0."""
    n = itemsize
    for d in shape:
        if d < 0 or d > NUMPY_MAX:
            return False
        if d:
            n *= d
            if n > NUMPY_MAX:
                return False
    return True
