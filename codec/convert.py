"""Conversion between formats: every tensor comes out bit-identical (name, dtype, shape,
bytes), or nothing is written.

Format-blind: what a target can hold comes from its descriptor's :class:`Capabilities`;
every tensor is checked against them before the first byte is written, and the tensors then
stream from the source's zero-copy views into the target's writer (bounded memory).
"""
from __future__ import annotations

import os
import re
from typing import Any, Mapping

import numpy as np

from . import errors as E, registry
from .engine import values
from .engine.dtypes import numpy_dtype
from .model import Packed
from .io.tensor_writer import check_bools

#: dtype names a cast may name (numpy's, and ml_dtypes' bfloat16 and float8 types)
_CASTABLE = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float8_e4m3fn",
             "float8_e5m2", "float16", "bfloat16", "float32", "float64")
#: elements a cast converts and checks at a time (bounded temporary memory)
_BLOCK = 1 << 20


def parse_casts(cast) -> dict[str, str]:
    """``{"int64": "int32"}`` or ``["int64=int32", ...]`` -> {from: to}."""
    if not cast:
        return {}
    items = cast.items() if isinstance(cast, Mapping) else (c.split("=", 1) if "=" in c else (c, "") for c in cast)
    out = {}
    for a, b in items:
        a, b = str(a).strip().lower(), str(b).strip().lower()
        if a not in _CASTABLE or b not in _CASTABLE:
            raise E.UsageError(f"cast {a}={b}: both sides must be one of {', '.join(_CASTABLE)}")
        out[a] = b
    return out


def _is_int(dt: np.dtype) -> bool:
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
        if _is_int(x.dtype) and _is_int(y.dtype):
            if np.dtype(np.uint64) in (x.dtype, y.dtype):
                neg = np.zeros(x.shape, bool)
                for a in (x, y):
                    if a.dtype.kind == "i":
                        neg |= a < 0
                return ~neg & (x.astype(np.uint64) == y.astype(np.uint64))
            return x.astype(np.int64) == y.astype(np.int64)
        if not _is_int(x.dtype) and not _is_int(y.dtype):
            a, b = x.astype(np.float64), y.astype(np.float64)
            return (a == b) | (np.isnan(a) & np.isnan(b))
        i, f = (x, y) if _is_int(x.dtype) else (y, x)
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
    if b == np.bool_ or (not _is_int(a) and _is_int(b)):
        return False
    if _is_int(a) and _is_int(b):
        return np.iinfo(b).min <= np.iinfo(a).min and np.iinfo(a).max <= np.iinfo(b).max
    import ml_dtypes
    fb = ml_dtypes.finfo(b)
    if _is_int(a):
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
    return str(int(v)) if _is_int(a.dtype) else repr(float(v))


def lossless_cast(name: str, a: np.ndarray, to: str) -> np.ndarray:
    """``a`` as ``to`` when the cast is lossless -- every element keeps its numeric value
    (:func:`same_values`: NaN stays NaN, -0.0 may become 0) -- else UsageError naming the
    tensor and the first element that would change, and what it would become."""
    a = np.ascontiguousarray(a)
    flat = a.reshape(-1)
    b = np.empty(a.shape, numpy_dtype(to))
    out = b.reshape(-1)
    for s in range(0, flat.size, _BLOCK):
        src = flat[s:s + _BLOCK]
        if src.dtype == np.bool_:  # (a bool is 0 or 1, whatever byte holds it)
            src = src.view(np.uint8) != 0
        with np.errstate(all="ignore"):
            out[s:s + _BLOCK] = src.astype(out.dtype)
        same = same_values(src, out[s:s + _BLOCK])
        if not same.all():
            k = int(np.flatnonzero(~same)[0])
            at = s + k
            where = f"element {at}" + (f" {[int(i) for i in np.unravel_index(at, a.shape)]}" if a.ndim > 1 else "")
            raise E.UsageError(f"tensor {name!r}: casting {a.dtype.name} to {to} would change its values "
                               f"({where}: {_value(flat, at)} would become {_value(out, at)}); nothing was written")
    return b


_KEEPS = {"json": "JSON metadata", "scalars": "only int, float and bool metadata",
          "typed": "only numbers, bools, text and flat lists of numbers",
          "typed-arrays": "typed numbers, bools, text and arrays of them", "text": "only text metadata",
          "none": "no metadata"}


def _texts(v):
    """The text values in a metadata value (nested lists included)."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _texts(x)


def _metadata(md: dict, sizevars: dict, types: dict, caps: registry.Capabilities, target: str,
              keep: bool) -> dict | None:
    """The source's metadata as the target can hold it; UsageError naming the first entry it
    cannot (unless not ``keep``: then none is carried).  ``types``: the value types of typed
    metadata (:mod:`codec.engine.values`), from the source itself or from the key an untyped format
    kept them under: a typed target gets every value with its type back, an untyped (JSON)
    one keeps the types under that key, so that typed metadata comes back unchanged."""
    if not keep:
        return None
    merged = dict(md or {})
    for k, v in (sizevars or {}).items():  # (size variables travel as integer metadata)
        merged.setdefault(k, int(v))
    kept = values.kept_types(merged.get(values.TYPES_KEY))
    types = {**kept, **(types or {})}
    if caps.metadata == "typed-arrays" and kept:  # the typed values come back, in their order
        del merged[values.TYPES_KEY]
        merged = {**{k: merged[k] for k in kept if k in merged}, **merged}
    if not merged:
        return None
    out = {}
    for k, v in merged.items():
        bad = [x for x in (k, *_texts(v)) if caps.text is not None and not re.fullmatch(caps.text, x)]
        if bad:
            raise E.UsageError(f"metadata {k!r}: {target.upper()} text matches {caps.text} and {bad[0]!r} does not: "
                               "--drop-metadata (drop_metadata=True) writes the tensors without it; nothing was written")
        if hasattr(v, "bits") and isinstance(v.bits, tuple):  # a bitset
            v = list(v.bits)
        if caps.metadata == "typed-arrays":
            try:
                out[k] = values.retyped(v, types[k]) if k in types else v
                values.describe(out[k])
                continue
            except E.UsageError as e:
                why = str(e)
        else:
            if caps.metadata == "json" and values.has_nonfinite(v):  # (JSON has no NaN: its bits, typed)
                types[k] = types.get(k) or values.describe(v)
                v = values.to_json(v, types[k])
            else:
                v = values.plain(v)
            why = None
            if {"json": True, "scalars": isinstance(v, (bool, int, float)), "typed": isinstance(v, (bool, int, float, str)) or (isinstance(v, list) and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)),
                    "text": isinstance(v, str), "none": False}[caps.metadata]:
                out[k] = v
                continue
        raise E.UsageError(f"metadata {k!r} ({type(v).__name__}) cannot be held by {target.upper()} "
                           f"(it keeps {_KEEPS[caps.metadata]}{': ' + why if why else ''}): --drop-metadata "
                           "(drop_metadata=True) writes the tensors without it; nothing was written")
    if caps.metadata == "json" and types:
        out[values.TYPES_KEY] = [[k, d] for k, d in types.items() if k in out]
    return out


def _hint(caps: registry.Capabilities, k: int, name: str, t, have: str, want: str, rename: str | None) -> str:
    """What makes the target hold tensor number ``k`` (its info ``t``; its dtype ``have``, cast
    to ``want`` as asked) -- only an option that does: the target's own check passes with it
    (a cast to a type the target holds, lossless when every value fits; naming it by index).
    "" when no option (or pair of them) does, e.g. for a rank or an extent the target lacks."""
    shape = tuple(t.shape)
    types = [want] + [d for d in _CASTABLE if d != want and d in caps.dtypes] if have in _CASTABLE else [want]
    for ren in ([rename] if rename == "index" else [None, "index"]):
        out = str(k) if ren == "index" else name
        fits = [d for d in types if caps.refuse(out, d, shape, t.nbytes, t.quant_params) is None]
        if not fits:
            continue
        every = [d for d in fits if holds_every(have, d)]
        cast = "" if want in fits else (f"--cast {have}=TYPE (TYPE one of {', '.join(every)}: each holds every "
                                         "value)" if every else f"--cast {have}=TYPE (TYPE one of {', '.join(fits)}: "
                                         "refused if any value would change)")
        ren = "--rename index (names them 0, 1, ...)" if ren != rename else ""
        return f" ({' and '.join(x for x in (cast, ren) if x)} makes it fit)"
    return ""


def convert(src, dst, *, format: str | None = None, cast=None, rename: str | None = None,
            drop_metadata: bool = False, progress: bool | None = None, **src_options: Any) -> str:
    """Convert the model ``src`` (any format, as :func:`codec.open` takes it) to ``dst``; the
    target format is ``format`` or the one ``dst``'s name gives (as :func:`codec.write`).
    Returns the path written.

    Every tensor keeps its name, dtype, shape and bytes.  When the target cannot hold one (a
    dtype, rank, extent or name it lacks), nothing is written: a UsageError names the tensor and
    the reason, unless ``cast`` (``{"int64": "int32"}`` or ``["int64=int32"]``: lossless only,
    every value must come back exactly) or ``rename="index"`` (tensors renamed 0, 1, ... in
    order, for a target keyed by ids) makes it fit.  Metadata is carried as the target can hold
    it (size variables as integer entries; empty values too: a key comes back whenever the
    source had it), else refused
    unless ``drop_metadata``."""
    from . import api
    target, path = registry.for_write(dst, format)
    caps = target.capabilities
    if caps is None:
        raise E.UsageError(f"{target.name} declares no capabilities: it cannot be a conversion target")
    if rename not in (None, "index"):
        raise E.UsageError(f"rename={rename!r}: the one rule is 'index' (tensors named 0, 1, ... in order)")
    casts = parse_casts(cast)
    with api.open(src, **src_options) as opened, opened.whole(progress) as r:
        names = list(r.tensors)
        if caps.max_tensors is not None and len(names) > caps.max_tensors:
            raise E.UsageError(f"{target.name.upper()} holds at most {caps.max_tensors} tensors; {src} has "
                               f"{len(names)}; nothing was written")
        plan = []
        for k, name in enumerate(names):
            t = r.tensors[name]
            have = t.common_dtype
            want = casts.get(have, have) if have != "packed" else have
            out = str(k) if rename == "index" else name
            why = caps.refuse(out, want, tuple(t.shape), t.nbytes, t.quant_params)
            if why is not None:
                raise E.UsageError(f"tensor {name!r}: {target.name.upper()} cannot hold it: {why}"
                                   f"{_hint(caps, k, name, t, have, want, rename)}; nothing was written")
            plan.append((out, name, want))
        meta = _metadata(r.metadata, getattr(r, "sizevars", None), r.value_types, caps, target.name,
                         not drop_metadata)
        if meta:  # (the model's architecture and name under the target's own keys too)
            meta = registry.carry_common(meta, registry.get(r.format).capabilities, caps)

        def tensors():
            for out, name, want in plan:
                a = tensor_of(r, name)
                if want != "packed" and a.dtype.name != want:
                    a = lossless_cast(name, a, want)
                if caps.strict_bools:
                    a = check_bools(name, a)
                yield (int(out) if caps.ids else out), a

        options: dict = {}
        if meta:
            options["metadata"] = meta
        if progress is not None:
            options["progress"] = progress
        items = dict(tensors()) if caps.ids else tensors()
        written = target.writer(os.fspath(path), items, **options)
        return os.fspath(written) if isinstance(written, (str, os.PathLike)) else os.fspath(path)


def tensor_of(r, name: str, copy: bool = False):
    """Tensor ``name`` of the open reader ``r`` as formats exchange it: an array, or for packed
    (quantized) bytes a :class:`Packed` with their logical shape and codec parameters
    (``copy``: data of its own, not a view of the file)."""
    a = r.tensor(name)
    if copy:
        a = np.array(a)
    t = r.tensors[name]
    return Packed(a, tuple(t.shape), t.quant_params or {}) if t.common_dtype == "packed" else a


def load(path, names=None, **options) -> dict[str, np.ndarray | Packed]:
    """Every tensor of a model file (or only those ``names`` lists, in that order) as an array
    of its own (copied out of the file); a packed (quantized) tensor as a :class:`Packed` (its
    bytes, logical shape and codec parameters), so that :func:`save` writes it back as it was.
    A name the model does not have is a NotFoundError."""
    from . import api
    if isinstance(names, (str, bytes)) or (names is not None and not isinstance(names, (list, tuple, set, frozenset))):
        raise E.UsageError(f"names must be a list of tensor names, not {type(names).__name__}")
    with api.open(path, **options) as opened:
        if names is not None:  # (only those: read where they are, not the whole model fetched)
            return {name: tensor_of(opened, name, copy=True) for name in names}
        with opened.whole() as r:
            return {name: tensor_of(r, name, copy=True) for name in r.tensors}


def save(tensors: Mapping[str, np.ndarray | Packed], path, *, format: str | None = None, **options) -> str:
    """Write ``tensors`` to ``path`` (the format from ``format`` or the file name).  A
    :class:`Packed` tensor the format cannot hold is a UsageError naming it (nothing written)."""
    from . import api
    api.argument_order("save(tensors, path)", path, tensors)
    target, _ = registry.for_write(path, format)
    caps = target.capabilities
    if isinstance(tensors, Mapping) and caps is not None:
        for name, t in tensors.items():
            why = caps.refuse(str(name), "packed", tuple(t.shape), t.nbytes, t.quant_params) \
                if isinstance(t, Packed) else None
            if why is not None:
                raise E.UsageError(f"tensor {name!r}: {target.name.upper()} cannot hold it: {why}; "
                                   "nothing was written")
    return api.write(path, tensors, format=format, **options)
