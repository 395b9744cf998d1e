"""The one list of formats.

``schemas.FORMATS`` names every format; each format module ``codec.formats.<name>`` declares
its :class:`FormatDescriptor` as ``DESCRIPTOR`` (name, schema, reader, writer, how its files
are recognised: by their first bytes, or by a path it claims, and which file names it writes).
Detection, ``codec.open`` / ``validate`` / ``write`` and the CLI go through these descriptors:
adding a format is one schema module and one format module with its descriptor.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

from . import errors as E
from .io.atomic import refuse_url


@dataclass(frozen=True)
class Capabilities:
    """What a format's files can hold, for conversion to decide before anything is written.
    ``dtypes``: element type names as ``TensorInfo.common_dtype`` gives them ("packed" for
    opaque quantized bytes); ``min_rank``/``max_rank``: ranks a file holds by itself;
    ``zero_extents``: whether an extent may be 0; ``names``: a regular expression a tensor name
    must match (None: any non-empty text), ``max_name_bytes`` the longest its UTF-8 may be,
    ``names_doc`` says both in words; ``ids``: tensors are
    keyed by their integer id (the name's digits); ``max_tensors``; ``metadata``: what metadata
    it keeps -- "json" (a JSON object), "scalars" (int, float, bool), "typed" (scalars, text,
    lists of numbers), "typed-arrays" (typed scalars, text and nested arrays of them, every
    value keeping its type: see :mod:`codec.engine.values`), "text" (text only), "none"; ``packed``:
    for a format holding packed (quantized) tensors only of codecs it knows, why it cannot hold
    one -- ``packed(shape, nbytes, quant_params) -> reason or None`` (None: any packed bytes);
    ``strict_bools``: a bool element must be the byte 0 or 1 (else any byte, non-zero being True);
    ``common_keys``: (common name, its key) for what every format means alike -- a model's
    ``architecture`` and ``model_name`` -- that conversion carries from the source's key to the
    target's (:func:`carry_common`);
    ``lazy``: its writer takes a :class:`codec.io.writer_io.LazyTensor` for an array and loads
    it only when it writes it (a conversion that computes tensors then holds one at a time);
    ``without_data``: a tensor may be declared without data (a dtype and shape, no elements: a
    reader's ``TensorInfo.extra["has_data"]`` False), which its writer takes as the source's
    reader gives it;
    ``sizevars``: its readers have ``.sizevars`` (name -> int) and its writer takes ``sizevars=``:
    a conversion between two such formats carries them as size variables (to any other target,
    as integer metadata)."""
    dtypes: frozenset
    min_rank: int = 0
    max_rank: int | None = None
    zero_extents: bool = True
    names: str | None = None
    names_doc: str = ""
    max_name_bytes: int | None = None  # a tensor name's longest UTF-8 encoding (None: no limit)
    ids: bool = False
    max_tensors: int | None = None
    metadata: str = "json"
    text: str | None = None  # a regular expression every metadata key and text value matches (None: any)
    packed: Callable[[tuple, int, dict | None], str | None] | None = None
    strict_bools: bool = False
    common_keys: tuple = ()
    lazy: bool = False
    without_data: bool = False
    sizevars: bool = False

    def refuse(self, name: str, dtype: str, shape: tuple, nbytes: int = 0, quant_params: dict | None = None) -> str | None:
        """Why a tensor cannot be held (None: it can)."""
        import re
        if dtype not in self.dtypes:
            return f"{dtype} is not one of its element types ({', '.join(sorted(self.dtypes))})"
        if dtype == "packed" and self.packed is not None:
            why = self.packed(tuple(shape), nbytes, quant_params)
            if why is not None:
                return why
        if len(shape) < self.min_rank or (self.max_rank is not None and len(shape) > self.max_rank):
            top = "" if self.max_rank is None else f"..{self.max_rank}"
            return f"rank {len(shape)} is outside {self.min_rank}{top}"
        if not self.zero_extents and 0 in shape:
            return f"an extent of 0 (shape {list(shape)}) cannot be stored"
        if self.names is not None and not re.fullmatch(self.names, name):
            return f"the name {name!r} is not {self.names_doc or self.names}"
        if self.max_name_bytes is not None and len(name.encode("utf-8", "surrogatepass")) > self.max_name_bytes:
            return f"the name {name!r} is not {self.names_doc or f'at most {self.max_name_bytes} bytes of UTF-8'}"
        return None


@dataclass(frozen=True)
class PackedCodec:
    """A codec of packed (quantized) tensors that a format knows, found from a tensor's codec
    parameters (:func:`packed_codec`): its ``name`` (e.g. "Q4_0"), ``block`` elements in
    ``block_bytes`` bytes, and ``decode(data, shape, dtype="float32", what=...)`` -> the
    elements as a new array (None: the codec is known but not dequantized here)."""
    name: str
    block: int
    block_bytes: int
    decode: Callable[..., Any] | None = None


@dataclass(frozen=True)
class FormatDescriptor:
    name: str                                  # what format= and the CLI call it
    schema: Any                                # the schemas.<fmt> module (records, rules, docs)
    reader: Callable[..., Any]                 # reader(source, strict=..., **options) -> Reader
    writer: Callable[..., Any]                 # writer(path, tensors, **options) -> path
    validate: Callable[..., Any] | None = None  # default: reader.validate_file
    magic: bytes | None = None                 # the first bytes of its files
    sniff: Callable[[bytes], bool] | None = None  # content detection without a magic (the first 16 bytes)
    claims: Callable[[str], bool] | None = None  # a path (or URL) it takes without reading it
    claims_doc: str = "a directory or index"   # which paths it claims, in words (`modelcodec formats`)
    suffixes: tuple | None = None              # file names write() gives it (default: the schema's EXTENSIONS)
    capabilities: Capabilities | None = None   # what its files can hold (conversion)
    commands: Callable[[Any], None] | None = None  # adds its own CLI subcommands: commands(subparsers)
    #: `modelcodec demo`: demo(out_dir, sample) -> [DemoStep], or a codec.tools.demo.Standard
    demo: Callable[[str, dict], list] | None = None
    #: a directory names one of its models (a set): write() and convert() take a directory for it
    directory: bool = False
    #: open_ranges(name, size, read, strict=, _collect=) -> Reader: a file that is not here (a
    #: URL), its structure read with read([(start, length)]) -> [bytes]; None: not over HTTP
    open_ranges: Callable[..., Any] | None = None
    summary: str = ""
    #: cgen() -> [codec.tools.cgen.CgenSpec]: the C++ headers generated from its schema (python -m codec.tools.cgen)
    cgen: Callable[[], list] | None = None
    #: packed_codec(quant_params) -> PackedCodec, or None when they name no codec it knows
    packed_codec: Callable[[dict | None], PackedCodec | None] | None = None
    #: update(model, {name: array}, storage_options=, progress=) -> its path: the named tensors'
    #: values replaced by rewriting only the files that hold them (None: not in place)
    update: Callable[..., str] | None = None

    @property
    def extensions(self) -> tuple:
        return tuple(self.suffixes if self.suffixes is not None else getattr(self.schema, "EXTENSIONS", ()))

    def detect(self, head: bytes) -> bool:
        if self.magic is not None:
            return head[:len(self.magic)] == self.magic
        return self.sniff is not None and self.sniff(head)

    @property
    def validator(self) -> Callable[..., Any]:
        return self.validate or self.reader.validate_file


def carry_common(meta: dict | None, source: Capabilities | None, target: Capabilities) -> dict | None:
    """``meta`` (what a conversion writes) with each common entry the source holds under its own
    key (e.g. ``general.architecture`` for ``architecture``) also under the target's key for it,
    when the target has one and the metadata holds none there yet; the source's own key stays,
    unless the target's key already holds the same value -- then it is the copy an earlier
    conversion made, and goes (converted there and back, a model has the same keys)."""
    from .engine import values
    have = dict(source.common_keys) if source is not None else {}
    out = dict(meta or {})
    for common, key in target.common_keys:
        src = have.get(common)
        v = out.get(src) if src is not None and src != key else None
        if not isinstance(v, str) or not v:
            continue
        if out.get(key) in (None, ""):
            out[key] = v
        elif out.get(key) == v:
            del out[src]
    kept = values.kept_types(out.get(values.TYPES_KEY))
    if kept:
        out[values.TYPES_KEY] = [[k, d] for k, d in kept.items() if k in out]
    return out or meta


#: the name this module used to give a descriptor
FormatEntry = FormatDescriptor

_REGISTRY: list[FormatDescriptor] | None = None


def formats() -> list[FormatDescriptor]:
    """Every format, in the order of ``schemas.FORMATS``."""
    global _REGISTRY
    if _REGISTRY is None:
        from . import schemas
        _REGISTRY = [importlib.import_module(f"codec.formats.{name}").DESCRIPTOR for name in schemas.FORMATS]
    return _REGISTRY


def packed_codec(quant_params) -> PackedCodec | None:
    """The codec a packed tensor's parameters name, from the format that knows it (None: no
    format does)."""
    for f in formats():
        if f.packed_codec is not None:
            c = f.packed_codec(quant_params)
            if c is not None:
                return c
    return None


def get(name: str) -> FormatDescriptor:
    for f in formats():
        if f.name == str(name).lower():
            return f
    raise E.UsageError(f"unknown format {name!r} (known: {', '.join(f.name for f in formats())})")


def detect(head: bytes, source: str = "<buffer>") -> FormatDescriptor:
    """The format whose files start with ``head``; when none does, the format whose extension
    the name ``source`` ends with (the longest): a file named for a format is checked as one,
    and its reader reports what is wrong with it under that format's own rule."""
    for f in formats():
        if f.detect(head):
            return f
    named = by_extension(source) if isinstance(source, str) else None
    if named is not None:
        return named
    known = ", ".join(f.name for f in formats() if f.magic is not None or f.sniff is not None)
    raise E.UnknownFormatError("?", 0, "magic", "DETECT",
                               f"no known format starts with {bytes(head[:8])!r} (known: {known})", source=source)


def claiming(source) -> FormatDescriptor | None:
    """The format that takes this path (a directory, an index name, a URL) without reading it."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    p = os.fspath(source)
    return next((f for f in formats() if f.claims is not None and f.claims(p)), None)


def resolve(source, format: str | None = None) -> FormatDescriptor:
    """The format of ``source``: the one named, else the one claiming the path, else the one
    its first bytes say."""
    if format is not None:
        return get(format)
    f = claiming(source)
    if f is not None:
        return f
    src = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<buffer>"
    if src != "<buffer>" and "://" not in src and os.path.isdir(src):  # (not "file is a directory")
        which = "; ".join(f"{f.name.upper()}: {f.claims_doc.replace('`', '')}" for f in formats()
                          if f.claims is not None and "director" in f.claims_doc)
        raise E.UsageError(f"{src}: a directory that no format reads as a model (a model in a directory: {which})")
    return detect(head_of(source), src)


def by_extension(name: str) -> FormatDescriptor | None:
    """The format whose extension ``name`` (a path or a URL, its query and fragment aside) ends
    with, the longest one (None: no format's)."""
    low = str(name).lower()
    if "://" in low:
        low = low.split("?", 1)[0].split("#", 1)[0]
    hits = [(len(s), f) for f in formats() for s in f.extensions if low.endswith(s)]
    return max(hits, key=lambda h: h[0])[1] if hits else None


def for_write(path, format: str | None = None) -> tuple[FormatDescriptor, str]:
    """(format, target) for writing to ``path``: the format named, else the one whose suffix
    the name ends with (the longest); a directory (existing, or a path ending with "/") names
    the format whose models are directories (the target: the directory).  A URL of any scheme
    is a UsageError naming it: writers write local files only."""
    p = os.fspath(path)
    refuse_url(p)
    if format is not None:
        return get(format), p
    f = by_extension(p)
    if f is None and (os.path.isdir(p) or p.endswith(("/", os.sep))):  # a directory: the format of sets
        d = next((x for x in formats() if x.directory), None)
        if d is not None:
            return d, p.rstrip("/" + os.sep) or p
    if f is None:
        raise E.UsageError(f"cannot tell the format of {p!r}: pass format= (known: "
                           f"{', '.join(f.name for f in formats())})")
    return f, p


def head_of(path_or_buffer, n: int = 16) -> bytes:
    if isinstance(path_or_buffer, (str, os.PathLike)):
        from .io.sources import open_regular
        with open_regular(path_or_buffer) as f:
            return f.read(n)
    try:
        return bytes(memoryview(path_or_buffer).cast("B")[:n])
    except TypeError:
        raise E.UsageError(f"expected a path or a bytes-like object, got {type(path_or_buffer).__name__}") from None
