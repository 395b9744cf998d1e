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

from . import errors as E
from . import registry, values
from .model import Packed

#: dtype names a cast may name (numpy's, and ml_dtypes' bfloat16)
_CASTABLE = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
             "bfloat16", "float32", "float64")


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


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


def lossless_cast(name: str, a: np.ndarray, to: str) -> np.ndarray:
    """``a`` as ``to`` when the cast is lossless -- casting back gives the very same bytes;
    else UsageError naming the first element that would change."""
    a = np.ascontiguousarray(a)
    with np.errstate(all="ignore"):
        b = a.astype(_dtype(to))
        back = np.ascontiguousarray(b.astype(a.dtype))
    same = (back.view(np.uint8).reshape(a.size, -1) == a.view(np.uint8).reshape(a.size, -1)).all(axis=1) \
        if a.size else np.ones(0, dtype=bool)
    if not same.all():
        bad = int(np.flatnonzero(~same)[0])
        raise E.UsageError(f"tensor {name!r}: casting {a.dtype.name} to {to} would change its values "
                           f"(element {bad}: {a.reshape(-1)[bad]!r}); nothing was written")
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
    metadata (:mod:`codec.values`), from the source itself or from the key an untyped format
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
        if v is None or (isinstance(v, str) and not v):  # an empty value says nothing: not carried
            continue
        bad = [x for x in (k, *_texts(v)) if caps.text is not None and not re.fullmatch(caps.text, x)]
        if bad:
            raise E.UsageError(f"metadata {k!r}: {target.upper()} text matches {caps.text} and {bad[0]!r} does not: "
                               "--drop-metadata (drop_metadata=True) writes the tensors without it; nothing was written")
        if hasattr(v, "bits") and isinstance(v.bits, tuple):  # a bitset
            v = list(v.bits)
        if caps.metadata == "typed-arrays":
            try:
                out[k] = values.typed(values.plain(v), types[k]) if k in types else v
                values.describe(out[k])
                continue
            except E.UsageError as e:
                why = str(e)
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
    it (size variables as integer entries; empty values are not carried), else refused
    unless ``drop_metadata``."""
    import codec
    target, path = registry.for_write(dst, format)
    caps = target.capabilities
    if caps is None:
        raise E.UsageError(f"{target.name} declares no capabilities: it cannot be a conversion target")
    if rename not in (None, "index"):
        raise E.UsageError(f"rename={rename!r}: the one rule is 'index' (tensors named 0, 1, ... in order)")
    casts = parse_casts(cast)
    with codec.open(src, **src_options) as opened, opened.whole(progress) as r:
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
                hint = (" (--rename index names them 0, 1, ...)" if caps.names and "name" in why else
                        f" (--cast {have}=TYPE converts it, losslessly)" if want == have else "")
                raise E.UsageError(f"tensor {name!r}: {target.name.upper()} cannot hold it: {why}{hint}; "
                                   "nothing was written")
            plan.append((out, name, want))
        meta = _metadata(r.metadata, getattr(r, "sizevars", None), r.value_types, caps, target.name,
                         not drop_metadata)

        def tensors():
            for out, name, want in plan:
                a = r.tensor(name)
                if want == "packed":
                    t = r.tensors[name]
                    a = Packed(a, tuple(t.shape), t.quant_params or {})
                elif a.dtype.name != want:
                    a = lossless_cast(name, a, want)
                yield (int(out) if caps.ids else out), a

        options: dict = {}
        if meta:
            options["metadata"] = meta
        if progress is not None:
            options["progress"] = progress
        items = dict(tensors()) if caps.ids else tensors()
        written = target.writer(os.fspath(path), items, **options)
        return os.fspath(written) if isinstance(written, (str, os.PathLike)) else os.fspath(path)


def load(path, **options) -> dict[str, np.ndarray]:
    """Every tensor of a model file as an array of its own (copied out of the file)."""
    import codec
    with codec.open(path, **options) as opened, opened.whole() as r:
        return {name: np.array(r.tensor(name)) for name in r.tensors}


def save(tensors: Mapping[str, np.ndarray], path, *, format: str | None = None, **options) -> str:
    """Write ``tensors`` to ``path`` (the format from ``format`` or the file name)."""
    import codec
    return codec.write(path, tensors, format=format, **options)
