"""Casts between element types, value by value: whether two arrays hold the same numbers
(compared exactly), whether a type holds every value of another, a lossless cast that refuses
any change, and a lossy one that rounds to the nearest value, ties to even, as numpy and
ml_dtypes round, and says what it changed.  Every cast works block by block (bounded temporary
memory) and names the tensor and the first element it refuses."""
from __future__ import annotations

import numpy as np

from .. import errors as E
from .dtypes import numpy_dtype

#: elements a cast converts and checks at a time (bounded temporary memory)
BLOCK = 1 << 20


def is_int(dt: np.dtype) -> bool:
    """Whether elements of ``dt`` are integers (bool included)."""
    return dt.kind in "iub"


def same_values(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element by element, whether ``x`` and ``y`` (1-d, of any two cast types) hold the same
    number -- compared exactly, never through a type that rounds either: integers as integers
    (a negative value is never an unsigned one), floats as float64 (which holds every value of
    every narrower float), an integer and a float by the float being a whole number inside the
    integer type's range and equal to it there.  A bool is 0 or 1 (any byte but 0 is 1).  NaN
    equals NaN (its payload and sign are not compared); -0.0 equals 0."""
    if x.dtype == np.bool_:
        x = x.view(np.uint8) != 0
    if y.dtype == np.bool_:
        y = y.view(np.uint8) != 0
    with np.errstate(all="ignore"):
        if is_int(x.dtype) and is_int(y.dtype):
            if np.dtype(np.uint64) in (x.dtype, y.dtype):
                neg = np.zeros(x.shape, bool)
                for a in (x, y):
                    if a.dtype.kind == "i":
                        neg |= a < 0
                return ~neg & (x.astype(np.uint64) == y.astype(np.uint64))
            return x.astype(np.int64) == y.astype(np.int64)
        if not is_int(x.dtype) and not is_int(y.dtype):
            a, b = x.astype(np.float64), y.astype(np.float64)
            return (a == b) | (np.isnan(a) & np.isnan(b))
        i, f = (x, y) if is_int(x.dtype) else (y, x)
        f = f.astype(np.float64)
        lo, hi = (0, 1) if i.dtype == np.bool_ else (int(np.iinfo(i.dtype).min), int(np.iinfo(i.dtype).max))
        # (lo and hi + 1 are 0 or powers of two: float64 holds them exactly)
        ok = (f >= float(lo)) & (f < float(hi + 1)) & (np.floor(f) == f)
        ok[ok] = f[ok].astype(i.dtype) == i[ok]
        return ok


def holds_every(frm: str, to: str) -> bool:
    """Whether type ``to`` holds every value of type ``frm`` (a cast between them never
    changes a value): a bool is 0 or 1; an integer range inside the other's; an integer whose
    magnitude fits a float's significand and range; a float whose significand, exponents
    (subnormals included) and infinities the other has."""
    a, b = numpy_dtype(frm), numpy_dtype(to)
    if a == np.bool_:
        return True
    if b == np.bool_ or (not is_int(a) and is_int(b)):
        return False
    if is_int(a) and is_int(b):
        return np.iinfo(b).min <= np.iinfo(a).min and np.iinfo(a).max <= np.iinfo(b).max
    import ml_dtypes
    fb = ml_dtypes.finfo(b)
    if is_int(a):
        return int(np.iinfo(a).max).bit_length() <= fb.nmant + 1 and float(np.iinfo(a).max) < float(fb.max)
    fa = ml_dtypes.finfo(a)
    with np.errstate(all="ignore"):
        infs = not np.isinf(np.array(np.inf, a).astype(np.float64)) or np.isinf(np.array(np.inf, b).astype(np.float64))
    return (fb.nmant >= fa.nmant and fb.maxexp >= fa.maxexp and fb.minexp - fb.nmant <= fa.minexp - fa.nmant
            and infs)


def _value(a: np.ndarray, k: int) -> str:
    """Element ``k`` of the 1-d ``a``, written as the number it is."""
    v = a[k]
    if a.dtype == np.bool_:
        return str(bool(a.view(np.uint8)[k]))
    return str(int(v)) if is_int(a.dtype) else repr(float(v))


def lossless_cast(name: str, a: np.ndarray, to: str) -> np.ndarray:
    """``a`` as ``to`` when the cast is lossless -- every element keeps its numeric value
    (:func:`same_values`: NaN stays NaN, -0.0 may become 0) -- else UsageError naming the
    tensor and the first element that would change, and what it would become."""
    a = np.ascontiguousarray(a)
    flat = a.reshape(-1)
    b = np.empty(a.shape, numpy_dtype(to))
    out = b.reshape(-1)
    for s in range(0, flat.size, BLOCK):
        src = flat[s:s + BLOCK]
        if src.dtype == np.bool_:  # (a bool is 0 or 1, whatever byte holds it)
            src = src.view(np.uint8) != 0
        with np.errstate(all="ignore"):
            out[s:s + BLOCK] = src.astype(out.dtype)
        same = same_values(src, out[s:s + BLOCK])
        if not same.all():
            k = int(np.flatnonzero(~same)[0])
            at = s + k
            where = f"element {at}" + (f" {[int(i) for i in np.unravel_index(at, a.shape)]}" if a.ndim > 1 else "")
            raise E.UsageError(f"tensor {name!r}: casting {a.dtype.name} to {to} would change its values "
                               f"({where}: {_value(flat, at)} would become {_value(out, at)}): --lossy (lossy=True) "
                               "lets a cast round; nothing was written")
    return b


#: what a lossy cast does with a value beyond the target's range (None: refuse it)
OVERFLOW = ("saturate", "inf")


def _wide(v: np.ndarray) -> np.ndarray:
    """``v`` as long doubles, exactly where the platform's long double holds every int64/uint64
    (x86: 64 significand bits) -- the numbers a cast's error is measured in."""
    return v.astype(np.longdouble) if is_int(v.dtype) else v.astype(np.float64).astype(np.longdouble)


def _beyond(src: np.ndarray, to: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(below, above): the elements of the 1-d integer ``src`` outside integer type ``to``'s range."""
    ti, si = np.iinfo(to), np.iinfo(src.dtype)
    below = src < np.array(ti.min).astype(src.dtype) if si.min < ti.min else np.zeros(src.shape, bool)
    above = src > np.array(ti.max).astype(src.dtype) if si.max > ti.max else np.zeros(src.shape, bool)
    return below, above


def _rounded(src: np.ndarray, to: np.dtype, overflow: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(``src`` rounded to the nearest ``to``, ties to even -- numpy's and ml_dtypes' rounding --,
    mask of the elements beyond ``to``'s range), the masked ones replaced as ``overflow`` says
    (saturate: the largest finite value of their sign; inf: an infinity of their sign)."""
    with np.errstate(all="ignore"):
        if is_int(to):
            if is_int(src.dtype):
                below, above = _beyond(src, to)
                got = src.astype(to)
            else:
                f = np.rint(src.astype(np.float64))
                ti = np.iinfo(to)
                below, above = f < float(ti.min), f >= float(int(ti.max) + 1)  # (powers of two: exact)
                got = np.where(below | above | np.isnan(f), 0, f).astype(to)
            if overflow == "saturate":
                got[below], got[above] = np.iinfo(to).min, np.iinfo(to).max
            return got, below | above
        got = src.astype(to)
        wide = src.astype(np.float64)
        g = got.astype(np.float64)
        over = (~np.isnan(wide) & np.isnan(g)) | (np.isfinite(wide) & np.isinf(g))
        if overflow == "saturate":
            import ml_dtypes
            top = ml_dtypes.finfo(to).max
            got[over & (wide < 0)], got[over & (wide > 0)] = -top, top
        elif overflow == "inf":
            got[over & (wide < 0)], got[over & (wide > 0)] = -np.inf, np.inf
        return got, over


def lossy_cast(name: str, a: np.ndarray, to: str, overflow: str | None = None) -> tuple[np.ndarray, dict]:
    """(``a`` as ``to``, each element rounded to the nearest ``to`` value, ties to even, as
    numpy and ml_dtypes round; what that changed: ``max_abs_error``, ``max_rel_error`` (over the
    elements that are finite both before and after, relative to the nonzero originals),
    ``changed`` and ``overflowed`` element counts).  An element beyond ``to``'s range (an
    infinity or a finite value ``to`` has no neighbour for, or any integer outside it) is a
    UsageError naming it unless ``overflow`` is "saturate" (the largest finite value of its
    sign) or "inf" (an infinity of its sign, for a float type that has one); NaN to an integer
    type is always one."""
    if overflow not in (None, *OVERFLOW):
        raise E.UsageError(f"overflow={overflow!r}: one of {', '.join(OVERFLOW)} (or None: refuse values out of range)")
    dt = numpy_dtype(to)
    if dt == np.bool_:
        raise E.UsageError(f"tensor {name!r}: a cast to bool keeps values or is refused "
                           "(--lossy does not round to bool)")
    has_inf = not is_int(dt) and bool(np.isinf(np.array(np.inf, dt).astype(np.float64)))
    if overflow == "inf" and not has_inf:
        raise E.UsageError(f"tensor {name!r}: {to} has no infinity: --overflow inf (overflow='inf') cannot apply; "
                           "use saturate")
    a = np.ascontiguousarray(a)
    flat = a.reshape(-1)
    b = np.empty(a.shape, dt)
    out = b.reshape(-1)
    report = {"max_abs_error": 0.0, "max_rel_error": 0.0, "changed": 0, "overflowed": 0}
    for s in range(0, flat.size, BLOCK):
        src = flat[s:s + BLOCK]
        if src.dtype == np.bool_:
            src = src.view(np.uint8) != 0
        got, over = _rounded(src, dt, overflow)
        bad = over if overflow is None else np.zeros(over.shape, bool)
        if is_int(dt) and not is_int(src.dtype):
            bad = bad | np.isnan(src.astype(np.float64))
        if bad.any():
            at = s + int(np.flatnonzero(bad)[0])
            where = f"element {at}" + (f" {[int(i) for i in np.unravel_index(at, a.shape)]}" if a.ndim > 1 else "")
            why = ("NaN has no integer value" if is_int(dt) and np.isnan(float(flat[at])) else
                   f"beyond {to}'s range: --overflow {'saturate|inf' if has_inf else 'saturate'} (overflow=) "
                   "says what it becomes")
            raise E.UsageError(f"tensor {name!r}: casting {a.dtype.name} to {to}: {where} is {_value(flat, at)}, "
                               f"{why}; nothing was written")
        out[s:s + BLOCK] = got
        x, y = _wide(src), _wide(got)
        with np.errstate(all="ignore"):
            both = np.isfinite(x) & np.isfinite(y)
            d = np.where(both, np.abs(x - y), 0)
            rel = np.where(both & (x != 0), d / np.abs(np.where(x != 0, x, 1)), 0)
        report["changed"] += int(np.count_nonzero(~same_values(src, got)))
        report["overflowed"] += int(np.count_nonzero(over))
        if d.size:
            report["max_abs_error"] = max(report["max_abs_error"], float(d.max()))
            report["max_rel_error"] = max(report["max_rel_error"], float(rel.max()))
    return b, report
