"""The one public shape every format's reader has.

``codec.open(...)`` returns a :class:`Reader`: a context manager owning its mapping, with
``.format``, ``.metadata``, ``.tensors`` (name -> :class:`TensorInfo`), ``.tensor(name)`` and
``.validate(full=False)`` -> :class:`Report`.
"""
from __future__ import annotations

import contextlib

import functools
import math

from collections.abc import ItemsView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from . import errors as E
from .engine import severity, values
from .engine.payload import gc_paused
from .engine.dtypes import NUMPY_MAX, numpy_can_hold  # noqa: F401  (the readers' shape checks)


#: numpy's limit on an array's dimensions
NUMPY_MAX_DIMS = 64


def numpy_shape(shape: tuple) -> tuple:
    """A shape numpy can give an array of these elements: the shape itself, or past numpy's 64
    dimensions the same without its size-1 axes, or if that is still too many, flat."""
    if len(shape) <= NUMPY_MAX_DIMS:
        return shape
    shape = tuple(d for d in shape if d != 1) or (1,)
    return shape if len(shape) <= NUMPY_MAX_DIMS else (math.prod(shape),)


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    dtype: np.dtype          # numpy dtype of the array tensor() returns (uint8 for opaque data)
    shape: tuple             # logical shape as stored in the file
    offset: int | None       # absolute byte offset of the data in its file (None: not in this file)
    nbytes: int              # stored byte length
    extra: dict = field(default_factory=dict, compare=False)  # format specifics

    @property
    def dtype_name(self) -> str:
        """The format's own name of the dtype (e.g. "i64" or "int64")."""
        return self.extra.get("dtype_name", str(self.dtype))

    @property
    def common_dtype(self) -> str:
        """One vocabulary across formats: numpy's (ml_dtypes') name of the elements ("int64",
        "bfloat16", "bool"); "packed" for opaque quantized bytes."""
        return "packed" if self.extra.get("packed") else self.dtype.name

    @property
    def quant_params(self) -> dict | None:
        """A packed tensor's codec parameters (None: none given, or not packed)."""
        q = self.extra.get("quant_params")
        return dict(q) if isinstance(q, dict) else None


@dataclass(frozen=True)
class Packed:
    """A quantized tensor as formats exchange it: its packed bytes (``data``, uint8), the
    logical ``shape`` of the elements they encode, and the codec's parameters
    (``quant_params``, e.g. ``{"ggml_type": 2}``), which say how to read them."""
    data: np.ndarray
    shape: tuple
    quant_params: dict

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


class LazyTensors(Mapping):
    """name -> TensorInfo, built on access so listing 10^5 tensors costs only the keys."""

    def __init__(self, index: dict[str, int], make: Callable[[int], TensorInfo], fmt: str,
                 key: Callable[[Any], Any] | None = None, cache: dict | None = None):
        self._index = index
        self._make = make
        self._fmt = fmt
        self._cache: dict[str, TensorInfo] = {} if cache is None else cache  # (a reader's: its views share it)
        #: a name as the reader takes it (e.g. an id as an int) to the key it lists it under
        self._key = key or (lambda name: name)

    def __getitem__(self, name: str) -> TensorInfo:
        name = self._key(name)
        t = self._cache.get(name)
        if t is None:
            i = self._index.get(name)
            if i is None:
                raise E.NotFoundError(f"{self._fmt}: no tensor named {name!r}")
            t = self._cache[name] = self._make(i)
        return t

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, name) -> bool:
        try:
            return self._key(name) in self._index
        except TypeError:  # (an unhashable name is no tensor's)
            return False


@dataclass
class Checksum:
    """One checksum a file declares, as data: the ``algorithm`` ("blake3-256", "crc32c",
    "sha256"), what it ``covers``, the digest the file stores (``expected``, hex) and the one
    computed (``actual``, hex; None when this level did not compute it).  Per-item hashes (every
    tensor's hash_b3, every page of a shard) are one aggregate entry: ``count`` items checked,
    ``mismatches`` of them wrong (each one is also a violation with its two digests)."""
    algorithm: str
    covers: str
    expected: str | None = None
    actual: str | None = None
    count: int | None = None
    mismatches: int | None = None

    @property
    def ok(self) -> bool | None:
        """True/False once computed; None when not computed (e.g. ``inspect``, structure level)."""
        if self.count is not None:
            return not self.mismatches
        if self.actual is None or self.expected is None:
            return None
        return self.actual.lower() == self.expected.lower()

    def as_dict(self) -> dict:
        d = {"algorithm": self.algorithm, "covers": self.covers, "expected": self.expected, "actual": self.actual,
             "ok": self.ok}
        if self.count is not None:
            d.update(count=self.count, mismatches=self.mismatches)
        return d


@dataclass
class Report:
    """What ``validate`` found.  ``ok`` is True when there is no error (warnings allowed); which
    findings are warnings the report decides from their rules and ``strict`` (codec.engine.severity)."""
    format: str
    source: str
    level: str                                   # "structure", "full" or "control"
    violations: list = field(default_factory=list)
    checked: list = field(default_factory=list)  # human lines: what was verified
    notes: list = field(default_factory=list)    # human lines: what could not be / was absent
    checksums: list = field(default_factory=list)  # Checksum: every checksum this level computed
    strict: bool = True                          # the reader's mode: lenient readers may relax rules

    @property
    def errors(self) -> list:
        return [v for v in self.violations if self.severity(v) == "error"]

    @property
    def warnings(self) -> list:
        return [v for v in self.violations if self.severity(v) != "error"]

    def _as_dict(self, v: E.FormatError) -> dict:
        d = dict(v.as_dict(), severity=self.severity(v))
        if v.consequences:
            d["consequences"] = [self._as_dict(c) for c in v.consequences]
        return d

    def severity(self, v: E.FormatError) -> str:
        """"error" or "warning": what this finding is, for this report's reader."""
        return severity.of(v.rule, self.strict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, v: E.FormatError | list) -> None:
        if isinstance(v, list):
            self.violations.extend(v)
        else:
            self.violations.append(v)

    def checksum(self, algorithm: str, covers: str, expected=None, actual=None, *, count=None,
                 mismatches=None) -> None:
        """Record a checksum (bytes digests are given as hex)."""
        def hx(v):
            return v.hex() if isinstance(v, (bytes, bytearray)) else v
        self.checksums.append(Checksum(algorithm, covers, hx(expected), hx(actual), count, mismatches))

    def __bool__(self) -> bool:
        """``if report:`` reads as ``if report.ok:`` (a report is truthy exactly when it is ok)."""
        return self.ok

    def __repr__(self) -> str:
        return (f"<Report {self.format} {self.source!r} {self.level}: {'ok' if self.ok else 'NOT ok'}, "
                f"{len(self.errors)} errors, {len(self.warnings)} warnings>")

    def as_dict(self) -> dict:
        return {"format": self.format, "source": self.source, "level": self.level, "ok": self.ok,
                "violations": [self._as_dict(v) for v in self.violations],
                "checksums": [c.as_dict() for c in self.checksums],
                "checked": list(self.checked), "notes": list(self.notes)}


def fold_truncation(rep: Report) -> None:
    """A file that ends early is one finding: every later TruncatedError (another region past
    the end of the data) becomes a consequence of the first, not a finding of its own; its
    message counts them exactly and says how many bytes the data holds of those promised."""
    by_file: dict = {}
    for v in rep.violations:
        if isinstance(v, E.TruncatedError):
            by_file.setdefault(v.source, []).append(v)  # (a set's report holds several files)
    gone: set = set()
    for first, *rest in by_file.values():
        if rest or first.more or first.extent is not None:
            first.absorb(rest)
            gone.update(map(id, rest))
    if gone:
        rep.violations = [v for v in rep.violations if id(v) not in gone]


class StopCheck(Exception):
    """Raised inside a structure check when the data is too broken to go on."""


#: the reader methods that need an open reader
_NEEDS_OPEN = ("tensor", "validate", "read_tensors", "read_tensor_bytes")


def closed_error(reader, method: str, call: bool = True) -> E.UsageError:
    """The error of a data method (``method``; a property: not ``call``) used on a closed reader."""
    return E.UsageError(f"{method}{'()' * call}: the {reader.format} reader of {getattr(reader, 'source', '?')} is closed")


def _open_only(f):
    @functools.wraps(f)
    def method(self, *args, **kwargs):
        if self._closed:
            raise closed_error(self, f.__name__)
        return f(self, *args, **kwargs)
    method._open_only = True
    return method


def checks_open(f):
    """Marks a data method that refuses a closed reader itself (``closed_error``): a hot path
    (``tensor``) spared the wrapper's call."""
    f._open_only = True
    return f


def _marks_closed(f):
    @functools.wraps(f)
    def close(self, *args, **kwargs):
        self._closed = True
        return f(self, *args, **kwargs)
    close._marks_closed = True
    return close


class Reader(Mapping):
    """Base class of every format's reader: a read-only mapping of tensor names to arrays
    (``list(r)``, ``r[name]``, ``r.get``, ``keys``/``values``/``items``, ``==``), the same keys
    as ``r.tensors`` (name -> :class:`TensorInfo`).

    A subclass sets its state, then calls :meth:`_open`, which maps the source, runs
    ``_parse(violations)`` (appending every structure violation; raising StopCheck when it
    cannot go on), builds ``.tensors`` from ``_index``/``_info``, and raises the first error
    unless collecting for :meth:`validate_file`.
    """
    format: str = "?"
    FMT: str = "?"
    #: whether ``inspect`` names element types in the format's own vocabulary (``TensorInfo.dtype_name``:
    #: what its users know them by), not the common one
    NATIVE_DTYPES: bool = False

    _index: dict
    _src: Any
    _closed: bool = False

    def __init_subclass__(cls, **kw):
        """Every reader's data methods refuse to run once it is closed (a UsageError, not an
        error from a released buffer), and every ``close`` marks it closed."""
        super().__init_subclass__(**kw)
        for name in _NEEDS_OPEN:
            f = cls.__dict__.get(name)
            if f is not None and not getattr(f, "_open_only", False):
                setattr(cls, name, _open_only(f))
        f = cls.__dict__.get("close")
        if f is not None and not getattr(f, "_marks_closed", False):
            setattr(cls, "close", _marks_closed(f))

    def _open(self, source, collect: bool) -> None:
        from .engine.records import raise_first
        from .io.sources import Source
        self._src = source if isinstance(source, Source) else Source(source)
        self.source = self._src.name
        try:
            with gc_paused():  # (a header of 10^5 entries makes as many small objects: no collector passes)
                self._structure = self._check()
        except BaseException:
            self._src.close()
            raise
        if collect:  # validate_file: keep going, the report carries the violations
            return
        try:
            raise_first(self._structure, getattr(self, "strict", True))
        except E.FormatError as e:
            self._src.close()
            raise e.with_source(self.source) from None

    def _check(self) -> list:
        v: list = []
        try:
            self._parse(v)
        except StopCheck:
            pass
        except E.FormatError as e:  # a typed error raised deep inside a decode step
            v.append(e)
        return v

    def _parse(self, v: list) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _info(self, i: int) -> TensorInfo:  # pragma: no cover - overridden
        raise NotImplementedError

    def _read_header(self, v: list, rec, truncated_rule: str, *, fatal=None, collect_only: bool = False) -> dict:
        """Parse and check the header record at offset 0.  A file shorter than the header is a
        MagicError when its first bytes already differ from the declared magic, else truncated;
        a wrong magic or version stops the check (``fatal`` error classes).  With
        ``collect_only`` the header's own violations are returned in ``self._header_bad``
        instead of being appended (for formats that must report something else first)."""
        from .schemas.dsl import Eq
        buf, size = self._src.buf, self._src.size
        fatal = fatal or (E.MagicError, E.UnsupportedVersionError)
        if size < rec.size:
            magic = next(((f, c) for f in rec.fields for c in f.valid if isinstance(c, Eq) and c.kind == "magic"), None)
            if magic and size >= len(magic[1].value) and bytes(buf[:len(magic[1].value)]) != magic[1].value:
                f, c = magic
                v.append(E.MagicError(rec.format, f.offset, f"{rec.name}.{f.name}", c.rule,
                                      f"must be {c.value!r} (got {bytes(buf[:len(c.value)])!r})"))
            else:
                v.append(E.TruncatedError(rec.format, 0, rec.name, truncated_rule,
                                          f"file is {size} bytes, the header alone is {rec.size}"))
            raise StopCheck
        h = self.header = rec.parse(buf, 0, rec.name)
        self._header_rec = rec
        bad = rec.check(h, 0, rec.name)
        if any(isinstance(b, fatal) for b in bad):
            v.extend(bad)
            raise StopCheck
        if collect_only:
            self._header_bad = bad
        else:
            v.extend(bad)
        return h

    def _unreadable(self, what: str, offset: int | None, path: str, rule: str) -> E.FormatError:
        """The error of a listed tensor (``what``: how to name it) whose findings make it
        unreadable: they are the report's; this says where to look."""
        return E.StructureError(self.FMT, offset, path, rule,
                                f"tensor {what} is unreadable (see validate)").with_source(self.source)

    def _report(self, level: str) -> Report:
        rep = Report(self.format, self.source, level, strict=getattr(self, "strict", True))
        rep.add(list(self._structure))
        return rep

    def _finish(self, rep: Report) -> Report:
        fold_truncation(rep)
        for v in rep.violations:
            if v.source is None:
                v.with_source(self.source)
        return rep

    @classmethod
    def validate_file(cls, source, *, full: bool = False, control: bool = False, strict: bool = True,
                      progress: bool | None = None, **options) -> Report:
        """Validate without raising: every structural violation is reported, even those that
        make opening fail (the checks that need the broken part are then skipped)."""
        with cls(source, strict=strict, _collect=True, **options) as r:
            return r.validate(full=full, control=control, progress=progress)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    #: (opener, path or URL, options) of a reader :func:`codec.open` opened from a path or URL
    _opened_by: tuple | None = None

    def __reduce__(self):
        """A reader pickles as how it was opened (its path or URL and options): unpickled -- in
        a worker process, on another machine -- it opens that again (a file there, or the same
        URL).  A reader of a buffer, or not opened by :func:`codec.open`, does not pickle."""
        if self._opened_by is None:
            raise E.UsageError(f"the {self.format.upper()} reader of {getattr(self, 'source', '?')} pickles only when "
                               "codec.open opened it from a path or URL (send the URL, open it in the worker)")
        import pickle
        try:
            pickle.dumps(self._opened_by[2])
        except Exception as e:  # noqa: BLE001 - whatever an option's own pickling raises
            raise E.UsageError(f"the {self.format.upper()} reader of {self.source} does not pickle: an option it was "
                               f"opened with does not ({type(e).__name__}: {e}); open the URL in the worker") from None
        return _reopened, self._opened_by

    def digest_spans(self, full: bool = False) -> list[tuple[str, int, int]]:
        """The ranges ``(algorithm, start, length)`` this reader hashes to read every tensor
        (``full``: in ``validate(full=True)``), known from its structure: a download hashes them
        as they arrive (:mod:`codec.remote_file`).  None by default."""
        return []

    def whole(self, progress: bool | None = None):
        """A context giving a reader of this model that has every byte at hand, for work that
        reads all of it (convert, load): this reader itself, but for a file that is not here
        (a remote file), which is then fetched whole once into a temporary file (parallel
        ranges, bounded memory) and read from there -- so that its bytes, once consumed, can
        leave memory as a local file's do."""
        return contextlib.nullcontext(self)

    def files(self) -> list[dict] | None:
        """The files of a model in several (a set, a sharded checkpoint), for copying it whole
        (``codec.mirror``): one dict per file -- ``name`` (its path relative to the model's
        folder), ``source`` (its path or URL), ``size`` and ``sha256`` (what the model's index
        says, or None), ``where`` (the index entry naming it), ``rule`` (the rule a file that
        differs breaks) -- the file naming the others (the index) last.  None: one file."""
        return None

    def close(self) -> None:
        self._closed = True
        self._src.close()
        if self._layout is not None:
            self._layout.detach()

    #: the file's metadata as the reader decoded it (a reader with other ways overrides ``metadata``)
    _meta: dict = {}

    @property
    def raw_metadata(self) -> dict:
        """The file's metadata as the file holds it (an untyped format's kept value types
        under ``modelcodec.value_types`` included): a copy."""
        return dict(self._meta)

    @property
    def metadata(self) -> values.Metadata:
        """The file's metadata: a copy (a mapping of names to values), with the type of each
        value beside it as ``.value_types`` (see :class:`codec.engine.values.Metadata`)."""
        return values.user_view(self.raw_metadata, self._own_types())

    def _own_types(self) -> dict[str, str]:
        """The value types of a format that types its values itself ({}: none)."""
        return {}

    @property
    def value_types(self) -> dict[str, str]:
        """The type of each metadata value in :mod:`codec.engine.values`' vocabulary, for a format
        that types its values exactly or kept their types (conversion keeps them); {} for the others."""
        return self.metadata.value_types

    def tensor(self, name: str) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def validate(self, full: bool = False, *, control: bool = False,
                 progress: bool | None = None) -> Report:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def tensors(self) -> Mapping:
        """name -> :class:`TensorInfo`, each built on first access and kept: a new view each time
        over the reader's own infos, so that nothing the reader holds holds it (no reference
        cycle: a dropped reader frees its mappings at once, not at the collector's next pass)."""
        if self._built_infos is None:
            self._built_infos = {}
        return LazyTensors(self._index, self._info, self.FMT,
                           self._key if type(self)._key is not Reader._key else None, self._built_infos)

    _built_infos: dict | None = None  # (this reader's own, once made)

    def _key(self, name):
        """A tensor's name as the reader takes it to the key ``tensors`` lists it under (the
        name itself; a format keyed by ids also takes the id as an int)."""
        return name

    def keys(self):
        return self.tensors.keys()

    def __iter__(self) -> Iterator[str]:
        """A reader is a read-only mapping of tensor names to arrays: ``for name in reader``."""
        return iter(self.tensors)

    def items(self):
        """(name, array) pairs, each array read (and checked) as it is reached."""
        return ItemsView(self)

    def values(self):
        """The arrays, each read (and checked) as it is reached."""
        return ValuesView(self)

    def get(self, name, default=None):
        """Tensor ``name`` as :meth:`tensor` reads it, or ``default`` when there is none."""
        return self.tensor(name) if name in self else default

    def __eq__(self, other) -> bool:
        """The same tensor names, each tensor of the same dtype, shape and bytes (a reader and
        a dict of arrays, or two readers, of any formats)."""
        if not isinstance(other, Mapping):
            return NotImplemented
        if other is self:
            return True
        try:
            theirs = {self._key(k): k for k in other}  # (an id-keyed format's names: ints too)
        except (TypeError, ValueError):
            return False
        if len(self) != len(other) or set(theirs) != set(self.tensors):
            return False
        for name in self.tensors:
            a, b = self[name], other[theirs[name]]
            b = b if isinstance(b, np.ndarray) else np.asarray(b)
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                return False
        return True

    __hash__ = None  # (equal by content, as a mapping is: not a dict key)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self.tensors)} tensors"
        return f"<{type(self).__name__} {self.format} {getattr(self, 'source', '?')!r}: {state}>"

    def __contains__(self, name) -> bool:
        return name in self.tensors

    def __len__(self) -> int:
        return len(self.tensors)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensor(name)

    #: rule ids of findings that only mean "this tensor's shape cannot be resolved here" (the
    #: tensor is listed, its data is fine; e.g. a tensor whose shape needs a table the reader was not given)
    UNRESOLVED_SHAPE_RULES: tuple = ()

    def inspect_notes(self, t: TensorInfo) -> dict[str, Any]:
        """Format-specific facts about one tensor worth a column in ``inspect`` (a layout, a
        shard, ...): {} by default."""
        return {}

    #: the header record :meth:`_read_header` parsed at offset 0 (None: none yet)
    _header_rec = None

    #: the relations context of the file's declared tables, kept by a reader for :meth:`_regions`
    _layout = None

    def _regions(self) -> list:
        """The regions a format declares beside its header record and its tensors' data (tables,
        string tables, metadata, chunks, sections), as :meth:`regions` gives them: by default
        the tables of the context the reader kept (``_layout``), each from its first row to its end."""
        if self._layout is None:
            return []
        return [("table", t.path, a, b - a, {}) for t in self._layout.tables.values()
                for a, b in [t.span() or (0, 0)] if b > a]

    def regions(self) -> list[tuple[str, str, int, int, dict]]:
        """Where this file's bytes lie, from its declarations: ``(kind, name, offset, length,
        extra)`` for the header record, what the format adds (:meth:`_regions`) and each listed
        tensor's data (kind "tensor", named as in ``tensors``).  Regions may nest (a tensor
        inside a chunk) or overlap in a broken file; bytes no region covers are what no
        declaration explains.  A tensor whose entry cannot be read is left out."""
        out = []
        if self._header_rec is not None:
            out.append(("header", self._header_rec.name, 0, self._header_rec.size, {}))
        out.extend(self._regions())
        for name in self.tensors:
            try:
                t = self.tensors[name]
            except E.FormatError:
                continue
            if t.offset is not None:
                out.append(("tensor", name, t.offset, t.nbytes, {}))
        return out

    def byte_maps(self) -> list[tuple[str, int, list, Any]]:
        """``(file, size, regions, source)`` for each file this model is read from (one for a
        file; a model in several files, each of them); ``source`` has the bytes at hand
        (``has(start, length)``, ``array(dtype, count, offset)``)."""
        return [(self.source, self._src.size, self.regions(), self._src)]

    def describe(self) -> dict[str, Any]:
        """Summary used by ``inspect`` (format-specific readers add to it)."""
        return {"format": self.format, "tensors": len(self.tensors), "metadata": self.metadata, "checksums": []}


def _reopened(opener, source, options: dict):
    """A reader unpickled: ``opener(source, **options)`` (see :meth:`Reader.__reduce__`)."""
    return opener(source, **options)
