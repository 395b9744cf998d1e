"""Conversion between formats: every tensor comes out bit-identical (name, dtype, shape,
bytes), or nothing is written.

Format-blind: what a target can hold comes from its descriptor's :class:`Capabilities`;
every tensor is checked against them before the first byte is written, and the tensors then
stream from the source's zero-copy views into the target's writer (bounded memory).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping

import numpy as np

from . import errors as E, registry
from .engine import values
from .engine.casts import holds_every, is_int as _is_int, lossless_cast, lossy_cast
from .engine.casts import same_values  # noqa: F401  (where codec.compare and the docs find it)
from .engine.dtypes import numpy_dtype
from .model import Packed
from .io.tensor_writer import check_bools
from .io.writer_io import LazyTensor, writer_options

#: dtype names a cast may name (numpy's, and ml_dtypes' bfloat16 and float8 types)
_CASTABLE = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float8_e4m3fn",
             "float8_e5m2", "float16", "bfloat16", "float32", "float64")
#: what packed (quantized) tensors can be cast to: ``packed=float32`` dequantizes them
_DEQUANTIZED = ("float32", "float16", "bfloat16", "float64")


def parse_casts(cast) -> dict[str, str]:
    """``{"int64": "int32"}``, ``["int64=int32", ...]`` or one ``"int64=int32"`` -> {from: to}."""
    if not cast:
        return {}
    if isinstance(cast, str):  # (one cast, as --cast gives it)
        cast = [cast]
    if not isinstance(cast, Mapping) and (not isinstance(cast, (list, tuple, set, frozenset))
                                          or not all(isinstance(c, str) for c in cast)):
        raise E.UsageError(f"cast must be 'FROM=TO', a list of them or a {{FROM: TO}} mapping (got {cast!r})")
    items = cast.items() if isinstance(cast, Mapping) else (c.split("=", 1) if "=" in c else (c, "") for c in cast)
    out = {}
    for a, b in items:
        a, b = str(a).strip().lower(), str(b).strip().lower()
        if a == "packed" and b in _DEQUANTIZED:  # (dequantization: see dequantize)
            out[a] = b
            continue
        if a not in _CASTABLE or b not in _CASTABLE:
            raise E.UsageError(f"cast {a}={b}: both sides must be one of {', '.join(_CASTABLE)} (or packed="
                               f"{'|'.join(_DEQUANTIZED)}: dequantizes packed tensors)")
        out[a] = b
    return out


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
              keep: bool, fresh: set = frozenset()) -> tuple[dict | None, list[tuple[str, str]]]:
    """(the source's metadata as the target can hold it, (key, a line) for each entry it
    cannot) -- none is carried when not ``keep``.  ``types``: the value types of typed metadata
    (:mod:`codec.engine.values`), from the source itself or from the key an untyped format kept them
    under: a typed target gets every value with its type back, an untyped (JSON) one keeps the
    types under that key, so that typed metadata comes back unchanged.  ``fresh``: keys whose
    value is not the source's (given by the caller): typed by their value alone."""
    if not keep:
        return None, []
    merged = dict(md or {})
    for k, v in (sizevars or {}).items():  # (size variables travel as integer metadata)
        merged.setdefault(k, int(v))
    kept = values.kept_types(merged.get(values.TYPES_KEY))
    types = {k: d for k, d in {**kept, **(types or {})}.items() if k not in fresh}
    if caps.metadata == "typed-arrays" and kept:  # the typed values come back, in their order
        del merged[values.TYPES_KEY]
        merged = {**{k: merged[k] for k in kept if k in merged}, **merged}
    if not merged:
        return None, []
    out, refused = {}, []
    for k, v in merged.items():
        bad = [x for x in (k, *_texts(v)) if caps.text is not None and not re.fullmatch(caps.text, x)]
        if bad:
            refused.append((k, f"metadata {k!r}: {target.upper()} text matches {caps.text} and {bad[0]!r} does not"))
            continue
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
        refused.append((k, f"metadata {k!r} ({type(v).__name__}) cannot be held by {target.upper()} "
                           f"(it keeps {_KEEPS[caps.metadata]}{': ' + why if why else ''})"))
    if caps.metadata == "json" and types:
        out[values.TYPES_KEY] = [[k, d] for k, d in types.items() if k in out]
    return out, refused


def _hint(caps: registry.Capabilities, k: int, name: str, t, have: str, want: str,
          rename: str | None) -> tuple[str, list[str]]:
    """(what makes the target hold tensor number ``k`` (its info ``t``; its dtype ``have``, cast
    to ``want`` as asked), the flags that do) -- only an option that does: the target's own
    check passes with it (a cast to a type the target holds, lossless when every value fits;
    naming it by index).  ("", []) when no option (or pair of them) does, e.g. for a rank or an
    extent the target lacks."""
    shape = tuple(t.shape)
    if have == "packed" and want == "packed":
        c = registry.packed_codec(t.quant_params)
        if c is not None and c.decode is not None and caps.refuse(name, "float32", shape) is None:
            return f" (--cast packed=float32 dequantizes its {c.name} blocks)", ["--cast packed=float32"]
    types = [want] + [d for d in _CASTABLE if d != want and d in caps.dtypes] if have in _CASTABLE else [want]
    for ren in ([rename] if rename == "index" else [None, "index"]):
        out = str(k) if ren == "index" else name
        fits = [d for d in types if caps.refuse(out, d, shape, t.nbytes, t.quant_params) is None]
        if not fits:
            continue
        # (a cast of a type to itself is no cast: when the cast asked for is what does not fit,
        # leaving it out is the option)
        other = [d for d in fits if d != have]
        drop = [f"without --cast {have}={want}"] if want != have and have in fits else []
        every = [d for d in other if holds_every(have, d)]
        kin = [d for d in other if _is_int(numpy_dtype(d)) == _is_int(numpy_dtype(have))] or other
        widest = [max(kin, key=lambda d: numpy_dtype(d).itemsize)] if kin else []  # (likeliest to keep values)
        # (the first option: a cast that keeps every value, else leaving the cast out, else the widest)
        flags = [] if want in fits else [f"--cast {have}={every[0]}"] if every else drop or [
            f"--cast {have}={d}" for d in widest]
        rounds = [d for d in other if d != "bool"]  # (--lossy never rounds to bool: it keeps values or refuses)
        recast = [] if not other else [
            f"--cast {have}=TYPE (TYPE one of {', '.join(every)}: each holds every value)" if every else
            f"--cast {have}=TYPE (TYPE one of {', '.join(rounds)}: refused if any value would change, unless "
            "--lossy rounds them)" if rounds else f"--cast {have}=bool (refused if any value is not 0 or 1)"]
        cast = "" if want in fits else " or ".join(recast + drop if every else drop + recast)
        if ren == "index" and rename != "index":
            flags.append("--rename index")
        ren = "--rename index (names them 0, 1, ...)" if ren == "index" and rename != "index" else ""
        return f" ({' and '.join(x for x in (cast, ren) if x)} makes it fit)", flags
    return "", []


#: a target that loads each tensor when it writes it (``Capabilities.lazy``) is given the tensors
#: smaller than _HELD_EACH bytes as arrays, while their total stays within _HELD_TOTAL (10^5 tiny
#: tensors: no second read each), every other one as a LazyTensor
_HELD_EACH, _HELD_TOTAL = 64 << 10, 64 << 20
#: metadata key and file suffix of the tensor names a ``rename="index"`` conversion replaced
NAMES_KEY, NAMES_SUFFIX = "modelcodec.tensor_names", ".names.json"
#: tensor refusals listed in full before the rest are counted
_LISTED = 8


class Converted(str):
    """The path :func:`convert` wrote (a str), with ``lossy``: for each tensor a lossy cast
    rounded, ``{"name", "from", "to", "max_abs_error", "max_rel_error", "changed",
    "overflowed"}`` (see :func:`lossy_cast`), and ``names``: the file of the name map written
    (``rename="index"``), or None."""
    lossy: list
    names: str | None


def _names_file(path: str, directory: bool) -> str:
    """The name map's file beside the model ``path`` (a set: beside its directory)."""
    path = os.path.abspath(path)
    base = os.path.dirname(path) if directory and not os.path.isdir(path) else path
    return base.rstrip("/" + os.sep) + NAMES_SUFFIX


def _source_names(src, r, names: list[str]) -> tuple[dict | None, str | None]:
    """({written name: original name}, where it came from) of a source written with
    ``rename="index"``: its metadata's NAMES_KEY, else the JSON file beside it; (None, None)
    when it has neither.  A map whose keys are not exactly the source's tensor names is a
    UsageError (``rename="keep"`` converts with the names as they are)."""
    got, where = (r.metadata or {}).get(NAMES_KEY), NAMES_KEY
    if got is None and isinstance(src, (str, os.PathLike)) and "://" not in os.fspath(src):
        side = _names_file(os.fspath(src), registry.get(r.format).directory)
        if os.path.isfile(side):
            from .io.sources import open_regular
            try:
                with open_regular(side) as f:
                    got, where = json.loads(f.read(64 << 20).decode("utf-8")), side
            except (OSError, ValueError) as e:
                raise E.UsageError(f"{side}: the tensor names map cannot be read ({e}): --rename keep "
                                   "(rename='keep') converts without it") from None
    if got is None:
        return None, None
    try:
        got = json.loads(got) if isinstance(got, str) else got
        got = dict(enumerate(got)) if isinstance(got, list) else got
        got = {str(a): str(b) for a, b in got.items()}
    except (ValueError, AttributeError, TypeError):
        got = None
    if got is None or sorted(got) != sorted(names) or len(set(got.values())) != len(got):
        raise E.UsageError(f"{where}: the tensor names map does not match the tensors of {src} (its keys must be "
                           "their names, its values distinct): --rename keep (rename='keep') converts without it")
    return got, where


def _write_names(path: str, directory: bool, mapping: dict) -> str:
    """The name map written atomically beside ``path``; its file name."""
    from .io.atomic import atomic_write
    side = _names_file(path, directory)
    with atomic_write(side) as f:
        f.write((json.dumps(mapping, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return side


def _metadata_edits(set_metadata, unset_metadata) -> tuple[dict, tuple]:
    """``set_metadata`` and ``unset_metadata`` checked: ({key: value}, (key, ...)); UsageError
    for anything else (a key that is not text, a key both set and unset)."""
    if set_metadata is None:
        set_metadata = {}
    if not isinstance(set_metadata, dict) or not all(type(k) is str and k for k in set_metadata):
        raise E.UsageError(f"set_metadata={set_metadata!r}: a dict of metadata entries {{key (text): value}}")
    if isinstance(unset_metadata, str):
        unset_metadata = [unset_metadata]
    unset = tuple(unset_metadata or ())
    if not all(type(k) is str and k for k in unset):
        raise E.UsageError(f"unset_metadata={unset_metadata!r}: the metadata keys (text) to leave out")
    both = sorted(set(unset) & set(set_metadata))
    if both:
        raise E.UsageError(f"metadata {', '.join(map(repr, both))}: both set (--set-metadata) and unset "
                           "(--unset-metadata)")
    return dict(set_metadata), unset


def _keys(md: dict, sizevars: dict) -> str:
    keys = [*md, *(k for k in sizevars if k not in md)]
    return ", ".join(map(repr, keys[:_LISTED])) + (f" and {len(keys) - _LISTED} more" if len(keys) > _LISTED
                                                  else "") if keys else "none"


def _split_options(target, options: dict, read: frozenset) -> tuple[dict, dict]:
    """(the options ``target``'s writer takes by keyword, the others: the reader's); an option
    the source's reader takes (``read``) is the reader's, even when the writer has one of that
    name (a remote set's ``cache=``: how it is read, never the written set's cache hints); an
    option of another format's writer that neither takes is a UsageError naming it."""
    import inspect

    def takes(writer) -> set:
        params = inspect.signature(writer).parameters
        return {k for k, p in params.items() if p.kind is p.KEYWORD_ONLY} - {"metadata", "progress"}
    mine = takes(target.writer) - read
    for k in options:
        if k not in mine and k not in read and any(k in takes(f.writer) for f in registry.formats()
                                                   if f.writer is not None):
            raise E.UsageError(f"{k}: an option the {target.name.upper()} writer does not take (it takes "
                               f"{', '.join(sorted(mine)) or 'none'}); nothing was written")
    return {k: v for k, v in options.items() if k in mine}, {k: v for k, v in options.items() if k not in mine}


def convert(src, dst, *, format: str | None = None, cast=None, rename: str | None = None,
            drop_metadata: bool = False, set_metadata: dict | None = None, unset_metadata=None,
            lossy: bool = False, overflow: str | None = None,
            progress: bool | None = None, dst_storage_options: dict | None = None, **options: Any) -> Converted:
    """Convert the model ``src`` (any format, as :func:`codec.open` takes it) to ``dst``; the
    target format is ``format`` or the one ``dst``'s name gives (as :func:`codec.write`; a name
    that gives another format than ``format`` is refused).  Returns the path written (a
    :class:`Converted`).  ``options``: the source's reader's keyword options (``remote=``,
    ``storage_options=``, a remote set's ``cache=`` and ``base_url=``: how it is read), then the
    target writer's (e.g. a set's ``max_shard_bytes``, ``max_part_shards``; an option of both
    names is the reader's).  ``dst`` may be an object-storage URL (written here, then uploaded:
    :func:`codec.write`), reached with ``dst_storage_options`` (default: the source's
    ``storage_options``).

    Every tensor keeps its name, dtype, shape and bytes.  When the target cannot hold one (a
    dtype, rank, extent or name it lacks) or its metadata, nothing is written: one UsageError
    lists every problem with the option that resolves each, such as ``cast``
    (``{"int64": "int32"}`` or ``["int64=int32"]``: lossless, every value must come back
    exactly, unless ``lossy``: then values round to the nearest, ties to even, and one beyond the
    target's range is refused unless ``overflow`` is "saturate" or "inf" -- the error each
    tensor got is in the result's ``lossy``; ``"packed=float32"`` -- or float16, bfloat16,
    float64 -- dequantizes packed tensors whose codec a format knows, see :func:`dequantize`),
    ``rename="index"`` (tensors renamed 0, 1, ... in
    order, for a target keyed by ids; the original names are written beside the output, in
    ``<output>.names.json``, and in its metadata where it holds them, and a conversion from such
    a file gives them back unless ``rename="keep"``: then the map is not carried either) or
    ``drop_metadata``.  Metadata is carried as the target can hold it (size variables as
    integer entries; empty values too: a key comes back whenever the source had it), with the
    entries of ``set_metadata`` (``{key: value}``) added or replacing the source's (in its
    place, with the value's own type) and the keys of ``unset_metadata`` left out (a key the
    source lacks is refused); with ``drop_metadata`` only the entries of ``set_metadata`` are
    written.  E.g. ``set_metadata={"format": "pt"}``, which Hugging Face transformers asks of a
    checkpoint's metadata.  A conversion that would write no tensor and no metadata is refused."""
    from . import api
    if not isinstance(dst, (str, os.PathLike)):
        raise E.UsageError(f"convert(src, dst): dst must be text or a path, not {type(dst).__name__}")
    if rename not in (None, "index", "keep"):
        raise E.UsageError(f"rename={rename!r}: 'index' (tensors named 0, 1, ... in order) or 'keep' (a names map "
                           "beside the source is not applied)")
    if overflow is not None and not lossy:
        raise E.UsageError(f"overflow={overflow!r} goes with lossy=True (--overflow with --lossy): a lossless "
                           "cast has no value out of range")
    if api.is_url(dst):  # object storage: written here first, uploaded once whole
        done, to_url = [], []
        url = api.staged(dst, format, options.get("storage_options") if dst_storage_options is None
                         else dst_storage_options,
                         lambda local: done.append(convert(src, local, format=format, cast=cast, rename=rename,
                                                           drop_metadata=drop_metadata, set_metadata=set_metadata,
                                                           unset_metadata=unset_metadata, lossy=lossy,
                                                           overflow=overflow, progress=progress, **options)),
                         to_url)
        out = Converted(url)
        out.lossy, out.names = done[0].lossy, (to_url[0](done[0].names) if done[0].names else None)
        return out
    target, path = registry.for_write(dst, format)
    named = registry.by_extension(os.fspath(dst))
    if format is not None and named is not None and named is not target:
        raise E.UsageError(f"{os.fspath(dst)} is named as {named.name.upper()} but format={target.name!r} writes "
                           f"{target.name.upper()}: name it *{target.extensions[0]} or drop format=")
    caps = target.capabilities
    if caps is None:
        raise E.UsageError(f"{target.name} declares no capabilities: it cannot be a conversion target")
    casts = parse_casts(cast)
    fresh, unset = _metadata_edits(set_metadata, unset_metadata)
    wopts, src_options = _split_options(target, options, api.reader_options(src))
    writer_options(target.writer, target.name, wopts)  # (their types: before the source is read)
    api.check_destination(target, path)
    with api.open_whole(src, progress, **src_options) as r:
        names = list(r.tensors)
        back, _ = _source_names(src, r, names) if rename is None else (None, None)
        problems: list[tuple[str, list[str]]] = []
        if caps.max_tensors is not None and len(names) > caps.max_tensors:
            problems.append((f"{target.name.upper()} holds at most {caps.max_tensors} tensors; {src} has "
                             f"{len(names)}", [None]))
        plan, refused = [], 0
        infos: dict[str, tuple] = {}  # name -> (its TensorInfo, its dtype's common name)
        for k, name in enumerate(names):
            t = r.tensors[name]
            have = t.common_dtype
            want = casts.get(have, have)
            out = str(k) if rename == "index" else (back or {}).get(name, name)
            if have == "packed" and want != "packed":
                _decoder(t.quant_params, name)
            why = caps.refuse(out, want, tuple(t.shape), t.nbytes, t.quant_params)
            bare = t.extra.get("has_data") is False  # (declared without data: no values)
            if why is None and bare and not caps.without_data:
                why = f"it is declared without data, which {target.name.upper()} cannot declare"
            elif why is None and bare and want != have:
                why = f"it is declared without data: --cast {have}={want} has no values to cast"
            if why is not None:
                hint, flags = _hint(caps, k, name, t, have, want, rename) if not bare else ("", [])
                refused += 1
                hint = hint or " (no option makes it fit)"
                line = f"tensor {name!r}: {target.name.upper()} cannot hold it: {why}{hint}" \
                    if refused <= _LISTED else None
                problems.append((line, flags or [None]))
            plan.append((out, name, want))
            infos[name] = (t, have)
        md = dict(r.metadata or {})
        md.pop(NAMES_KEY, None)  # (applied, or not wanted: a map of the names as they were written)
        sizevars = dict(getattr(r, "sizevars", None) or {})
        lacking = [k for k in unset if k not in md and k not in sizevars]
        if lacking:
            raise E.UsageError(f"unset_metadata (--unset-metadata): {src} has no metadata "
                               f"{', '.join(map(repr, lacking))} (its keys: {_keys(md, sizevars)}); nothing was written")
        had = bool(md)
        if drop_metadata:
            md, sizevars = {}, {}
        for k in (*unset, *fresh):
            sizevars.pop(k, None)
            if k not in fresh:
                md.pop(k, None)
        md.update(fresh)
        carried = {}
        if caps.sizevars and sizevars:  # (the target has size variables: they stay ones)
            carried, sizevars = sizevars, {}
        meta, bad_meta = _metadata(md, sizevars, r.value_types, caps, target.name, True, fresh=set(fresh))
        problems += [(f"{line}: the value given by --set-metadata (set_metadata=) must be one it holds",
                      [None]) if k in fresh else
                     (f"{line}: --drop-metadata (drop_metadata=True) writes the tensors without it, "
                      f"--unset-metadata {k} (unset_metadata=) without this entry", ["--drop-metadata"])
                     for k, line in bad_meta]
        if meta:  # (the model's architecture and name under the target's own keys too)
            meta = registry.carry_common(meta, registry.get(r.format).capabilities, caps)
        if problems:
            raise E.UsageError(_problems(src, target.name, problems, refused))
        mapping = {out: name for out, name, _ in plan if out != name} if rename == "index" else {}
        if mapping and not drop_metadata and caps.metadata in ("json", "typed-arrays", "text"):
            held = [name for _, name, _ in plan]  # (the original names, in the order of their new ones)
            if caps.metadata == "text":
                held = json.dumps(held, ensure_ascii=False)
            if caps.text is None or all(re.fullmatch(caps.text, x) for x in (NAMES_KEY, *_texts(held))):
                meta = {**(meta or {}), NAMES_KEY: held}
        if not plan and not meta and not carried:
            dropped = " (drop_metadata / --drop-metadata)" if had and drop_metadata else ""
            raise E.UsageError(f"{src} has no tensors{' and no metadata' if not had else ''} that "
                               f"{target.name.upper()} would keep{dropped}: nothing to write, nothing was written")
        report: list[dict] = []

        def converted(name: str, have: str, want: str, a=None, lossy_report: list | None = None):
            """Tensor ``name`` (an array of dtype ``have``; ``a``: already read) cast to ``want``."""
            a = r.tensor(name) if a is None else a
            if want == have or want == "packed":
                return a
            if lossy:
                a, got = lossy_cast(name, a, want, overflow)
                if lossy_report is not None:
                    lossy_report.append({"name": name, "from": have, "to": want, **got})
                return a
            return lossless_cast(name, a, want)

        def lazy(name: str, t, have: str, want: str) -> LazyTensor:
            # (for a target that loads each tensor when it writes it: a remote source's bytes are
            # fetched then and dropped after -- about one tensor in memory at a time.  What a
            # cast or a strict target refuses is found first, one tensor at a time, before the
            # writer writes anything; the tensor is read again when it is written)
            if want != have or (caps.strict_bools and want == "bool"):
                a = converted(name, have, want, lossy_report=report)
                if caps.strict_bools:
                    check_bools(name, a)
                del a
            return LazyTensor(t.dtype if want == have else numpy_dtype(want), t.shape,
                              lambda: converted(name, have, want))

        def tensors():
            small = 0  # (the bytes of the small tensors given as arrays)
            for out, name, want in plan:
                t, have = infos[name]
                if caps.lazy and have != "packed":
                    if t.nbytes >= _HELD_EACH or small + t.nbytes > _HELD_TOTAL:
                        yield (int(out) if caps.ids else out), lazy(name, t, have, want)
                        continue
                    small += t.nbytes
                a = tensor_of(r, name)
                if isinstance(a, Packed) and want != "packed":  # (a writer that can: one tensor at a time)
                    a = LazyTensor(numpy_dtype(want), a.shape, lambda t=a, w=want, n=name: dequantize(
                        t, w, what=f"tensor {n!r}")) if caps.lazy else dequantize(a, want, what=f"tensor {name!r}")
                elif not isinstance(a, Packed):
                    a = converted(name, have, want, a, report)
                if caps.strict_bools:
                    a = check_bools(name, a)
                yield (int(out) if caps.ids else out), a

        wopts = dict(wopts)
        if meta:
            wopts["metadata"] = meta
        if carried:  # (those given as a writer option win)
            wopts["sizevars"] = {**carried, **(wopts.get("sizevars") or {})}
        if progress is not None:
            wopts["progress"] = progress
        items = dict(tensors()) if caps.ids else tensors()
        written = target.writer(os.fspath(path), items, **wopts)
        done = Converted(os.fspath(written) if isinstance(written, (str, os.PathLike)) else os.fspath(path))
        done.lossy, done.names = report, (_write_names(done, target.directory, mapping) if mapping else None)
        return done


def _problems(src, target: str, problems: list[tuple[str | None, list]], refused: int) -> str:
    """One message listing every problem (tensor refusals past the first few counted), then the
    options that resolve them all -- or which have none; one problem is one line."""
    lines = [line for line, _ in problems if line is not None]
    if len(problems) == 1:  # (one line says it, with its option)
        return f"{lines[0]}; nothing was written"
    if refused > _LISTED:
        lines.append(f"... and {refused - _LISTED} more tensors {target.upper()} cannot hold")
    flags = list(dict.fromkeys(f for _, fl in problems for f in fl))
    some = " ".join(f for f in flags if f)
    adds = [f for f in flags if f and not f.startswith("without ")]
    rerun = " and ".join(([f"with {' '.join(adds)}"] if adds else []) + [f for f in flags if f and f not in adds])
    fix = (f"rerun {rerun}" if flags and None not in flags else
           "no option makes every problem go" + (f" (the others: {some})" if some else ""))
    n = len(problems)
    return (f"cannot convert {src} to {target.upper()} ({n} problem{'s' if n != 1 else ''}; nothing "
            "was written):\n  " + "\n  ".join(lines) + f"\n{fix}")


def _decoder(quant_params, name: str):
    """The decoder of packed tensor ``name`` (UsageError: no format can dequantize its codec)."""
    c = registry.packed_codec(quant_params)
    if c is None or c.decode is None:
        what = c.name if c is not None else f"codec {quant_params!r}"
        raise E.UsageError(f"tensor {name!r}: its packed bytes ({what}) cannot be dequantized; nothing was written")
    return c.decode


def dequantize(t: Packed, dtype: str = "float32", *, what: str = "packed tensor") -> np.ndarray:
    """The values a :class:`Packed` tensor encodes, as a new array of its logical shape and
    ``dtype`` (float32; float16 or bfloat16 rounded to nearest even from float32; float64; by
    name or as numpy's, ``np.float16``), by the format that knows its codec (e.g. ggml's block
    types: ``{"ggml_type": 2}``)."""
    if not isinstance(t, Packed):
        raise E.UsageError(f"dequantize(): {what} is a {type(t).__name__}, not a codec.Packed")
    if dtype is not None and not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            pass  # (refused below, as given)
    return _decoder(t.quant_params, what)(t.data, t.shape, str(dtype), what)


def tensor_of(r, name: str, copy: bool = False):
    """Tensor ``name`` of the open reader ``r`` as formats exchange it: an array, or for packed
    (quantized) bytes a :class:`Packed` with their logical shape and codec parameters
    (``copy``: data of its own, not a view of the file)."""
    a = r.tensor(name)
    if copy and isinstance(a, np.ndarray):  # (not a format's value for a tensor declared without data)
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
    if names is not None:  # (only those: read where they are, not the whole model fetched)
        with api.open(path, **options) as opened:
            return {name: tensor_of(opened, name, copy=True) for name in names}
    with api.open_whole(path, **options) as r:
        return {name: tensor_of(r, name, copy=True) for name in r.tensors}


def save(tensors: Mapping[str, np.ndarray | Packed], path, *, format: str | None = None, **options) -> str:
    """Write ``tensors`` to ``path`` (the format from ``format`` or the file name).  A
    :class:`Packed` tensor the format cannot hold is a UsageError naming it (nothing written)."""
    from . import api
    api.argument_order("save(tensors, path)", path, tensors)
    target, _ = registry.for_write(api.staging_name(path, "/") if api.is_url(path) else path, format)
    caps = target.capabilities
    if isinstance(tensors, Mapping) and caps is not None:
        for name, t in tensors.items():
            why = caps.refuse(str(name), "packed", tuple(t.shape), t.nbytes, t.quant_params) \
                if isinstance(t, Packed) else None
            if why is not None:
                raise E.UsageError(f"tensor {name!r}: {target.name.upper()} cannot hold it: {why}; "
                                   "nothing was written")
    return api.write(path, tensors, format=format, **options)
