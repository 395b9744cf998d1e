"""Typed metadata values: one vocabulary of value types across formats.

Some formats type each metadata value (a u8 is not a u32, a f32 not a f64); others hold JSON,
where a number is just a number.  To carry typed values through an untyped format and back
unchanged, a value's type is described by a short text:

* a scalar: ``uint8 int8 uint16 int16 uint32 int32 uint64 int64 float32 float64 bool string``;
* ``array[T]``: an array whose elements all have type T (also when it is empty);
* ``array(T1,T2,...)``: an array of arrays whose elements have different types, one each;
* ``array``: an empty array of arrays (nothing says what its elements would be).

:func:`describe` gives the description of a typed value (numpy scalars and arrays carry their
type; plain Python values get the smallest lossless type: an int a ``int32`` when it fits,
then ``int64``, then ``uint64``; a float a ``float32`` when that holds it exactly, else
``float64``), :func:`typed` gives a value back its type from a description, and
:func:`plain` the JSON-able value (for an untyped format, which keeps the descriptions under
:data:`TYPES_KEY`, read back by :func:`kept_types`).  JSON has no number for NaN, inf and
-inf: :func:`to_json` writes such a float as the text of its bits ("0x7fc00000", two hex
digits per byte of its type), which :func:`typed` turns back into that very float.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UsageError

#: the metadata key under which an untyped (JSON) metadata model keeps the value types of
#: typed metadata, as [[key, description], ...] in the keys' order (JSON objects may be
#: written sorted: the list keeps the order too)
TYPES_KEY = "modelcodec.value_types"

NUMERIC = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32", "float64")
SCALARS = NUMERIC + ("bool", "string")
_NP = {n: np.dtype(n) for n in NUMERIC} | {"bool": np.dtype(bool)}
_I32, _I64 = np.iinfo(np.int32), np.iinfo(np.int64)


def _scalar_type(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, np.generic) and v.dtype.name in _NP:
        return v.dtype.name
    if isinstance(v, int):
        if _I32.min <= v <= _I32.max:
            return "int32"
        if _I64.min <= v <= _I64.max:
            return "int64"
        if 0 <= v < 2 ** 64:
            return "uint64"
        raise UsageError(f"the integer {v} does not fit 64 bits")
    if isinstance(v, float):
        with np.errstate(over="ignore"):  # (a float past float32's range is a float64)
            return "float32" if np.isnan(v) or float(np.float32(v)) == v else "float64"
    raise UsageError(f"{type(v).__name__} is not a typed metadata value (numbers, bools, text and arrays of them)")


def _plain_numbers(v: list) -> str:
    """The smallest type holding every plain Python number of a list exactly."""
    types = {_scalar_type(x) for x in v}
    if all(isinstance(x, int) for x in v):
        for t in ("int32", "int64", "uint64"):
            if all(np.iinfo(t).min <= x <= np.iinfo(t).max for x in v):
                return t
        raise UsageError("an array of integers no 64-bit type holds")
    if any(isinstance(x, int) and float(x) != x for x in v):
        raise UsageError("an array mixes floats and integers a float64 cannot hold exactly")
    with np.errstate(over="ignore"):
        return "float32" if types <= {"float32", "int32"} and all(float(np.float32(x)) == x or x != x for x in v) \
            else "float64"


def describe(v: Any) -> str:
    """The type description of a typed metadata value (UsageError for what has none)."""
    if isinstance(v, np.ndarray):
        if v.ndim != 1 or v.dtype.name not in _NP:
            raise UsageError(f"a {v.dtype}{list(v.shape)} array is not a typed metadata value "
                             "(one-dimensional arrays of numbers or bools)")
        return f"array[{v.dtype.name}]"
    if isinstance(v, (list, tuple)):
        if not v or all(isinstance(x, str) for x in v):
            return "array[string]"
        inner = [describe(x) for x in v]
        if len(set(inner)) == 1:
            return f"array[{inner[0]}]"
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return f"array[{_plain_numbers(list(v))}]"
        if all(t.startswith("array") for t in inner):
            return "array(" + ",".join(inner) + ")"
        raise UsageError(f"an array mixes {', '.join(sorted(set(inner)))}: a typed array holds one type")
    return _scalar_type(v)


def parse(desc: str):
    """A description as a tree: a scalar name, ("array", T), ("array", [T1, T2, ...]) or
    ("array", None) (an empty array of arrays); UsageError when it is not one."""
    def one(s: str, i: int):
        for name in sorted(SCALARS, key=len, reverse=True):
            if s.startswith(name, i):
                return name, i + len(name)
        if not s.startswith("array", i):
            raise UsageError(f"{desc!r} is not a value type description")
        i += 5
        if i < len(s) and s[i] == "[":
            t, i = one(s, i + 1)
            if i >= len(s) or s[i] != "]":
                raise UsageError(f"{desc!r}: ']' expected at {i}")
            return ("array", t), i + 1
        if i < len(s) and s[i] == "(":
            items, i = [], i + 1
            while True:
                t, i = one(s, i)
                items.append(t)
                if i < len(s) and s[i] == ",":
                    i += 1
                    continue
                if i < len(s) and s[i] == ")":
                    return ("array", items), i + 1
                raise UsageError(f"{desc!r}: ',' or ')' expected at {i}")
        return ("array", None), i
    if not isinstance(desc, str):
        raise UsageError(f"a value type description is text, not {type(desc).__name__}")
    tree, end = one(desc, 0)
    if end != len(desc):
        raise UsageError(f"{desc!r}: unexpected text at {end}")
    return tree


def typed(v: Any, desc: str | tuple) -> Any:
    """``v`` with the type ``desc`` gives it: numbers as numpy scalars, arrays of numbers as
    numpy arrays, text as str, arrays of text or arrays as lists.  UsageError when ``v`` cannot
    take that type exactly (a value out of range, a float that would round)."""
    return _typed(v, parse(desc) if isinstance(desc, str) else desc)


def _typed(v: Any, tree) -> Any:
    if isinstance(tree, str):
        if tree == "string":
            if not isinstance(v, str):
                raise UsageError(f"{v!r} is not text")
            return v
        if tree == "bool":
            if not isinstance(v, (bool, np.bool_)):
                raise UsageError(f"{v!r} is not a bool")
            return np.bool_(v)
        return _number(v, _NP[tree])
    _, inner = tree
    if not isinstance(v, (list, tuple, np.ndarray)):
        raise UsageError(f"{v!r} is not an array")
    if isinstance(inner, str) and inner in _NP:
        fast = _numbers(v, _NP[inner])
        return fast if fast is not None else np.array([_typed(x, inner) for x in v], dtype=_NP[inner])
    if inner == "string" and all(isinstance(x, str) for x in v):
        return list(v)
    if inner is None:
        if len(v):
            raise UsageError("'array' describes an empty array of arrays only")
        return []
    if isinstance(inner, list):
        if len(inner) != len(v):
            raise UsageError(f"{len(v)} elements, {len(inner)} types")
        return [_typed(x, t) for x, t in zip(v, inner)]
    return [_typed(x, inner) for x in v]


def retyped(v: Any, desc: str) -> Any:
    """``v`` (as any reader gives it: typed, or as JSON holds it) with the type ``desc``, every
    bit of a NaN kept (:func:`typed`, of its plain value when it does not take it as it is)."""
    try:
        return typed(v, desc)
    except UsageError:
        return typed(plain(v), desc)


def _numbers(v, dt: np.dtype) -> np.ndarray | None:
    """``v`` as an array of ``dt`` in one step when every value is exactly one (None: check
    them one by one, which names the first that is not)."""
    if len(v) == 0:
        return np.zeros(0, dt)
    a = np.asarray(v)
    if a.ndim != 1 or a.dtype.kind not in "biuf" or (a.dtype.kind == "b") != (dt.kind == "b"):
        return None
    with np.errstate(all="ignore"):
        b = a.astype(dt)
        same = (b == a) | (np.isnan(b) & np.isnan(a)) if a.dtype.kind == "f" else b == a
    return b if bool(np.all(same)) else None


def _number(v, dt: np.dtype):
    if isinstance(v, str) and dt.kind == "f":
        return _from_bits(v, dt)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise UsageError(f"{v!r} is not a number")
    if dt.kind in "iu":
        if isinstance(v, (float, np.floating)) and not float(v).is_integer():
            raise UsageError(f"{v!r} is not an integer")
        i, info = int(v), np.iinfo(dt)
        if not info.min <= i <= info.max:
            raise UsageError(f"{v!r} is outside {dt.name}")
        return dt.type(i)
    with np.errstate(all="ignore"):
        out = dt.type(v)
    if not (float(out) == float(v) or (np.isnan(out) and np.isnan(float(v)))):
        raise UsageError(f"{v!r} is not exactly a {dt.name}")
    return out


def _bits_text(x: np.floating) -> str:
    """A non-finite float as JSON holds it: the text of its bits, "0x" and one hex digit per
    nibble of its width ("0x7fc00000" is float32's NaN, "0xfff0000000000000" float64's -inf)."""
    u = np.dtype(f"u{x.dtype.itemsize}")
    return f"0x{int(np.asarray(x).view(u)):0{2 * x.dtype.itemsize}x}"


def _from_bits(v: str, dt: np.dtype):
    """The non-finite float ``v`` (:func:`_bits_text`) names, bit for bit; UsageError for any
    other text (a finite float is a JSON number, never text)."""
    n = 2 * dt.itemsize
    if not (len(v) == n + 2 and v.startswith("0x") and all(c in "0123456789abcdef" for c in v[2:])):
        raise UsageError(f"{v!r} is not a number (a non-finite {dt.name} is written as '0x' and {n} hex digits)")
    x = np.array(int(v[2:], 16), dtype=f"u{dt.itemsize}").view(dt)[()]
    if np.isfinite(x):
        raise UsageError(f"{v!r} is a finite {dt.name}: it is written as a number, not as its bits")
    return x


def has_nonfinite(v: Any) -> bool:
    """Does the value hold a NaN, inf or -inf (which JSON has no number for)?"""
    if isinstance(v, np.ndarray):
        return v.dtype.kind == "f" and not bool(np.isfinite(v).all())
    if isinstance(v, (float, np.floating)):
        return not np.isfinite(v)
    if isinstance(v, (list, tuple)):
        return any(has_nonfinite(x) for x in v)
    return False


def to_json(v: Any, desc: str) -> Any:
    """``v`` of the type ``desc`` as JSON holds it, every bit kept: :func:`plain`, but a
    non-finite float (NaN with its payload, inf, -inf) as the text of its bits, which
    :func:`typed` reads back as the same float of that type."""
    return _jsonable(typed(v, desc))


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.floating) and not np.isfinite(v):
        return _bits_text(v)
    if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not bool(np.isfinite(v).all()):
        return [_jsonable(x) for x in v]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return plain(v)


def kept_types(v: Any) -> dict[str, str]:
    """The {key: description} kept under :data:`TYPES_KEY` (in its order); {} when ``v`` is
    not a list of [key, description] pairs of text."""
    if not isinstance(v, list) or not all(isinstance(p, (list, tuple)) and len(p) == 2
                                          and all(isinstance(x, str) for x in p) for p in v):
        return {}
    return dict(v)


def plain(v: Any) -> Any:
    """A typed value as JSON holds it (numpy scalars and arrays as Python numbers and lists)."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


class Metadata(dict):
    """Metadata as a reader gives it: a dict of the file's keys and values, with the type of
    each value beside it (``value_types``: key -> description, for a format that types its
    values or kept them under :data:`TYPES_KEY`).  A writer of a typed format given it back
    gives each plain value its kept type (:func:`kept_type_of`), and a writer of JSON keeps them
    under :data:`TYPES_KEY`: read, then written, the types survive.  A plain ``dict(...)`` copy
    carries values only."""

    def __init__(self, data=(), value_types: dict | None = None):
        super().__init__(data)
        self.value_types = dict(value_types or {})


def types_of(metadata) -> dict[str, str]:
    """The value types a metadata mapping carries (a :class:`Metadata`'s; {} for others)."""
    t = getattr(metadata, "value_types", None)
    return dict(t) if isinstance(t, dict) else {}


def kept_type_of(v: Any, kept: str | None) -> str:
    """The type a writer of typed values gives ``v``: its own when it has one (a numpy scalar
    or array), else the type it was read with (``kept``) when it takes it exactly, else the
    smallest lossless one (:func:`describe`)."""
    if kept is not None and not isinstance(v, (np.generic, np.ndarray)):
        try:
            typed(v, kept)
            return kept
        except UsageError:
            pass
    return describe(v)


def user_view(raw: dict, types: dict[str, str]) -> Metadata:
    """The metadata a user sees of a file's ``raw`` metadata: the value types an untyped format
    kept under :data:`TYPES_KEY` are not a key of it but its ``value_types`` (with ``types``,
    the format's own), its keys in their kept order, and each typed value as a typed format
    gives it back (arrays of numbers as numpy arrays, a non-finite float as a float)."""
    kept = kept_types(raw.get(TYPES_KEY))
    if not kept:
        return Metadata(raw, types)
    out = {k: raw[k] for k in kept if k in raw}
    out.update((k, v) for k, v in raw.items() if k != TYPES_KEY and k not in out)
    for k, d in kept.items():
        if k in out:
            try:
                v = typed(out[k], d)
            except UsageError:
                continue  # (a value that does not take its kept type stays as the file holds it)
            out[k] = v.item() if isinstance(v, np.generic) and not (v.dtype.kind == "f" and np.isnan(v)) else v
    return Metadata(out, {**{k: d for k, d in kept.items() if k in out}, **types})


def json_ready(metadata) -> dict:
    """Metadata as a JSON document holds it: every typed value (numpy scalars and arrays, a
    reader's :class:`Metadata`) as its plain value, a non-finite float as the text of its bits,
    and the types of the typed ones under :data:`TYPES_KEY` so that they come back."""
    types = types_of(metadata)
    out, kept = {}, {}
    for k, v in metadata.items():
        if k == TYPES_KEY:
            continue
        if hasattr(v, "bits") and isinstance(v.bits, tuple):  # a bitset: its bits
            v = list(v.bits)
        d = types.get(k)
        if d is None and _typed_value(v):
            try:
                d = describe(v)
            except UsageError:
                d = None
        if d is not None:
            try:
                out[k] = to_json(v, d)
                kept[k] = d
                continue
            except UsageError:
                pass
        out[k] = plain(v)
    if kept:
        given = kept_types(metadata.get(TYPES_KEY))
        out[TYPES_KEY] = [[k, d] for k, d in {**given, **kept}.items() if k in out]
    elif TYPES_KEY in metadata:
        out[TYPES_KEY] = metadata[TYPES_KEY]
    return out


def _typed_value(v: Any) -> bool:
    """Does ``v`` carry a type of its own (a numpy scalar or array, in a list too)?"""
    if isinstance(v, (np.generic, np.ndarray)):
        return True
    return isinstance(v, (list, tuple)) and any(_typed_value(x) for x in v)
