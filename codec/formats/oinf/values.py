"""OINF v1: the records, type tables and typed metadata values (``UninitializedTensor``,
``TensorSpec``, ``SizeVar``, ``Bitset``, ``ScalarValue``) shared by the reader, the writer and
the dataclass export."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...schemas import oinf as S

from ... import errors as E
from ...engine.dtypes import DTypeTable
from ...engine.records import record_of
from ...io.tensor_writer import align_up

FMT = S.FORMAT
HEADER = record_of(S.FileHeader)
SIZEVAR = record_of(S.SizeVar)
META = record_of(S.MetadataEntry)
TENSOR = record_of(S.TensorEntry)
STRING = record_of(S.StringPayload)
BITSET = record_of(S.BitsetPayload)
NDARRAY = record_of(S.NdarrayHeader)

DTYPES = DTypeTable(S.DTYPES, FMT)
#: value type tag -> numpy dtype (numeric and bool types); little-endian dtype -> tag; name -> tag
NP_DTYPES, TAG_OF, TAG_OF_NAME = DTYPES.numpy, DTYPES.by_dtype, S.DTYPES.codes
_NAME_SET = frozenset(S.NAME_CHARS)


def _align(x: int) -> int:
    return align_up(x, S.ALIGN)


_err = E.for_format(FMT)



# =============================================================================== values
@dataclass(frozen=True)
class UninitializedTensor:
    """A tensor declared without data (HAS_DATA = 0): its dtype and shape only; ``name``
    renames a dataclass field's tensor."""
    dtype: Any
    shape: tuple = ()
    name: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "dtype", _type_name(self.dtype))
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))


class TensorSpec:
    """A tensor value: ``data`` (anything np.asarray takes), ``dtype`` (an OINF type name or
    tag 1-12) to convert it to, ``name`` to rename a dataclass field's tensor.  Arguments as
    in openinfer-oinf's ``TensorSpec(data, dtype=None, name=None)``; ``array=`` is ``data``."""

    def __init__(self, data: Any = None, dtype: Any = None, name: str | None = None, *, array: Any = None):
        if array is not None:
            if data is not None:
                raise E.UsageError("TensorSpec: give data or array=, not both")
            data = array
        self.data = data
        self.dtype = None if dtype is None else _type_name(dtype)
        self.name = name

    @property
    def array(self) -> Any:
        return self.data

    def resolved(self, what: str) -> np.ndarray:
        """The data as an array, converted to ``dtype`` when one is given."""
        if self.dtype is None:
            return self.data
        return _as_type(f"tensor {what!r}", self.data, TAG_OF_NAME[self.dtype])

    def __eq__(self, other) -> bool:
        return (isinstance(other, TensorSpec) and self.dtype == other.dtype and self.name == other.name
                and np.array_equal(np.asarray(self.data), np.asarray(other.data)))

    __hash__ = None

    def __repr__(self) -> str:
        return f"TensorSpec({self.data!r}, dtype={self.dtype!r}, name={self.name!r})"


@dataclass(frozen=True)
class SizeVar:
    """Marks a size variable (an unsigned 64-bit value)."""
    value: int


@dataclass(frozen=True)
class Bitset:
    """A BITSET metadata value: ``bits`` as booleans, stored LSB-first."""
    bits: tuple

    def __post_init__(self):
        object.__setattr__(self, "bits", tuple(bool(b) for b in self.bits))


@dataclass(frozen=True)
class ScalarValue:
    """A metadata value with an explicit type (a scalar, or a list/array for NDARRAY); without
    ``dtype`` the type is inferred as for a plain value."""
    value: Any
    dtype: str | None = None


#: openinfer-oinf's names of its later types (tags 16-25), which OINF v1 does not have
_LATER_TYPES = {"bf16": 16, "f8": 17, "f8e5m2": 17, "float8e5m2": 17, "i4": 18, "i2": 19, "i1": 20, "u4": 21,
                "u2": 22, "u1": 23, "t2": 24, "t1": 25}


def _type_name(dt) -> str:
    """The OINF type name of a dtype argument: a type name (``"f32"``; case and surrounding
    spaces ignored) or a type tag 1-12 -- what openinfer-oinf takes.  Its later types (bf16,
    f8, i4 ... t1: tags 16-25) are refused: OINF v1 has tags 1-15, tensors 1-12 only."""
    if isinstance(dt, str):
        key = dt.strip().lower()
        if key in TAG_OF_NAME:
            return key
        if key in _LATER_TYPES:
            raise E.UsageError(f"OINF v1 has no type {dt!r} (tag {_LATER_TYPES[key]} is not one of the spec's "
                               f"tags 1-15); numeric types: {', '.join(TAG_OF_NAME)}")
    elif isinstance(dt, (int, np.integer)) and not isinstance(dt, (bool, np.bool_)) and int(dt) in NP_DTYPES:
        return S.TYPE_NAMES[int(dt)]
    hint = ""
    if dt is not None and not isinstance(dt, (str, int)):  # a numpy dtype: name its OINF type
        try:
            tag = TAG_OF.get(np.dtype(dt).newbyteorder("<"))
            hint = f" (for {np.dtype(dt)} give {S.TYPE_NAMES[tag]!r})" if tag else ""
        except (TypeError, ValueError):
            pass
    raise E.UsageError(f"OINF has no type {dt!r}: give a type name ({', '.join(TAG_OF_NAME)}) or its tag 1-12{hint}")


def _as_type(what: str, value, tag: int) -> np.ndarray:
    """``value`` as an array of OINF type ``tag``.  Floats to integers truncate (numpy's
    astype), but a value the integer type cannot hold -- out of its range, NaN or infinite --
    is a UsageError: numpy would wrap it (300 -> 44 in u8) and write data that was not given."""
    dt = NP_DTYPES[tag]
    try:
        a = np.asarray(value)
        if a.dtype == object:
            raise ValueError("not a numeric value or a homogeneous array of them")
        if dt.kind in "iu" and a.size and a.dtype.kind in "iuf":
            if a.dtype.kind == "f":
                if not np.isfinite(a).all():
                    raise ValueError("NaN or infinity has no integer value")
                lo, hi = int(np.trunc(a.min())), int(np.trunc(a.max()))
            else:
                lo, hi = int(a.min()), int(a.max())
            info = np.iinfo(dt)
            if lo < info.min or hi > info.max:
                raise ValueError(f"{lo if lo < info.min else hi} is outside {S.TYPE_NAMES[tag]}'s range "
                                 f"[{info.min}, {info.max}]")
        return a.astype(dt)
    except (TypeError, ValueError, OverflowError) as e:
        raise E.UsageError(f"{what}: cannot convert to {S.TYPE_NAMES[tag]}: {e}") from None


