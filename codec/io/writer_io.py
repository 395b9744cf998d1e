"""What a writer takes in and how it streams bytes out: its arguments checked (names as UTF-8,
common metadata, arrays, lazily loaded tensors), tensors' bytes in bounded little-endian pieces
(pages of mapped sources dropped once written), whole-buffer writes, background writeback."""
from __future__ import annotations

import functools
import mmap
import os
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import numpy as np

from ..errors import UsageError
from ..engine import values
from ..engine.nesting import refuse_nesting
from .integrity import BackgroundFeed
from .sources import PIECE, file_map_of


class LazyTensor:
    """A tensor a writer loads only when it writes it: ``load()`` returns the array (of
    ``dtype`` and ``shape``), which is dropped right after — so writing N tensors needs the
    memory of the largest one, not of all of them."""

    def __init__(self, dtype, shape, load):
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.shape = tuple(map(int, shape))
        self.load = load

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def materialise(self, name: str = "") -> np.ndarray:
        a = np.asarray(self.load())
        if a.shape != self.shape or (a.dtype != self.dtype
                                     and a.dtype.newbyteorder("=") != self.dtype.newbyteorder("=")):
            raise UsageError(f"{name}: LazyTensor declared {self.dtype}{list(self.shape)}, load() gave "
                             f"{a.dtype}{list(a.shape)}")
        return a

    def pieces(self, name: str = "") -> Callable[[], Iterable]:
        """A re-callable source of the tensor's bytes as :func:`array_pieces` gives them: each
        call loads it (:meth:`materialise`) and drops it once its last piece was taken."""
        def gen():
            a = self.materialise(name)
            if a.nbytes < _DROP_MIN and a.flags.c_contiguous and a.dtype.byteorder != ">":
                if a.nbytes:  # (a small one: its bytes at once)
                    yield memoryview(a.reshape(-1).view(np.uint8))
                return
            yield from array_pieces(a)()
        return gen


def name_bytes(name, what: str = "tensor name", *, empty_ok: bool = False) -> bytes:
    """A writer's name as UTF-8: a ``str`` (non-empty unless ``empty_ok``, for formats whose
    names may be empty) without lone surrogates, else UsageError."""
    if not isinstance(name, str) or not (name or empty_ok):
        raise UsageError(f"a {what} must be a non-empty str (got {type(name).__name__} {name!r})")
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UsageError(f"{what} {name!r} is not valid Unicode ({e.reason} at {e.start})") from None


#: the metadata keys every format with model metadata shares; writers that take them as keyword
#: arguments (``model_name=``, ``architecture=``) treat those as shorthands for these keys
COMMON_METADATA = ("model_name", "architecture")


def mapping_arg(value, what: str = "metadata") -> dict:
    """A writer's mapping argument (``metadata=``, ``sizevars=``) as a dict: None is empty, a
    mapping is taken, anything else is a UsageError naming the argument."""
    from collections.abc import Mapping
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"{what} must be a mapping of key -> value (got {type(value).__name__} {_short(value)})")
    return dict(value)


def common_metadata(metadata, **shorthands) -> dict:
    """``metadata`` with the non-empty ``shorthands`` (model_name=, architecture=) filled in; the
    same key given both ways with different values is a UsageError, never a silent choice."""
    # (a reader's metadata of any format: typed values as JSON holds them, their types kept)
    given = metadata if isinstance(metadata, values.Metadata) else mapping_arg(metadata)
    refuse_nesting(given, "metadata")  # (what every reader of a metadata document takes)
    out = values.json_ready(given)
    for k in out:
        name_bytes(k, "metadata key")
    for k, v in shorthands.items():
        if k not in COMMON_METADATA:
            raise UsageError(f"unknown common metadata key {k!r}")
        if not v:
            continue
        if not isinstance(v, str):
            raise UsageError(f"{k} must be text (got {type(v).__name__})")
        if k in out and out[k] != v:
            raise UsageError(f"{k}={v!r} conflicts with metadata[{k!r}]={out[k]!r}: give it once")
        out[k] = v
    return out


def as_array(name: str, value) -> np.ndarray:
    """What a writer stores for ``value``: an ndarray; masked arrays are refused (their mask
    would be silently lost), anything numpy cannot make an array of is a UsageError."""
    if isinstance(value, np.ma.MaskedArray):
        raise UsageError(f"{name}: a masked array; its mask cannot be stored -- pass .filled(value) or .data")
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except Exception as e:  # numpy raises ValueError/TypeError/... for ragged or odd objects
        raise UsageError(f"{name}: cannot make an array of {type(value).__name__}: {e}") from None


def write_all(f, data) -> None:
    """Write a whole buffer to an unbuffered file (raw writes may be partial)."""
    mv = memoryview(data).cast("B")
    while mv:
        n = f.write(mv)
        mv = mv[n:]


def array_pieces(a: np.ndarray) -> Callable[[], Iterable]:
    """A re-callable source of ``a``'s bytes, little-endian C order, in pieces of at most
    PIECE bytes (big-endian or non-contiguous arrays are converted piece by piece)."""
    def gen():
        if a.size == 0:
            return
        if a.dtype.byteorder == ">" or not a.flags.c_contiguous:
            flat_rows = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1)
            step = max(1, PIECE // max(1, flat_rows[0:1].nbytes))
            for k in range(0, flat_rows.shape[0], step):
                blk = np.ascontiguousarray(flat_rows[k:k + step])
                if blk.dtype.byteorder == ">":
                    blk = blk.astype(blk.dtype.newbyteorder("<"))
                yield memoryview(blk.reshape(-1).view(np.uint8))
            return
        mv = memoryview(a.reshape(-1).view(np.uint8))
        drop = _page_dropper(a) if len(mv) >= _DROP_MIN else None
        for k in range(0, len(mv), PIECE):
            yield mv[k:k + PIECE]
            if drop is not None:  # the consumer is done with that piece
                drop(k, min(PIECE, len(mv) - k))
    return gen


#: arrays smaller than this keep their pages (a few pages: not worth a system call)
_DROP_MIN = 64 * 1024


def _page_dropper(a: np.ndarray):
    """For a contiguous array over a file's read-only mapping (a reader's zero-copy view of a
    local file: :func:`codec.io.sources.file_map_of`), a function dropping the mapped pages of
    ``a``'s bytes [k, k + n) once they have been used, so that streaming a whole file through a
    writer keeps resident memory at a piece, not the file (the pages stay in the page cache;
    touching them again maps them again).  None for anything else: dropping the pages of
    anonymous or private memory (a buffer, a remote file's ranges) would lose its data."""
    held = file_map_of(a) if a.flags.c_contiguous else None
    if held is None:
        return None
    mm, start = held
    page = mmap.PAGESIZE

    def drop(k: int, n: int) -> None:
        lo, hi = -(-(start + k) // page) * page, (start + k + n) // page * page
        if hi > lo:
            try:
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError):
                pass
    return drop


def as_le_bytes(p) -> memoryview:
    """One streamed piece as little-endian bytes."""
    if isinstance(p, np.ndarray):
        p = np.ascontiguousarray(p)
        if p.dtype.byteorder == ">":
            p = p.astype(p.dtype.newbyteorder("<"))
        return memoryview(p.reshape(-1).view(np.uint8))
    return memoryview(p).cast("B")


class Writeback:
    """Starts writeback of what has been written every ``step`` bytes, on a background thread,
    so the disk works while the writer is still copying and the final fsync has little left to
    wait for.  Where the system has ``sync_file_range`` (Linux), every :data:`RANGE_STEP` bytes
    at most: it only queues the dirty pages for the disk (no journal commit, no cache flush per
    call, no waiting for the disk), so the disk streams from the first megabytes on; elsewhere
    ``fdatasync``.  Off when ``f`` has no file descriptor."""

    #: with sync_file_range, writeback is started at least this often (measured here against 16,
    #: 8 and 2 MiB: the disk's queue never runs dry, and the final fsync waits for 4 MiB at most)
    RANGE_STEP = 4 * 1024 * 1024

    def __init__(self, f, step: int = 128 * 1024 * 1024):
        import threading
        try:
            self._fd = f.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self._range = _sync_file_range() if self._fd is not None else None
        self._step = min(step, self.RANGE_STEP) if self._range is not None else step
        self._pending = 0
        self._kick = threading.Event()
        self._stop = False
        self._thread = None
        if self._fd is not None:
            self._thread = threading.Thread(target=self._run, name="modelcodec-writeback", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        sync = getattr(os, "fdatasync", os.fsync)
        while True:
            self._kick.wait()
            self._kick.clear()
            if self._stop:
                return
            # (errors are the final fsync's to report: it writes whatever is left)
            if self._range is not None:
                if self._range(self._fd, 0, 0, _SYNC_FILE_RANGE_WRITE) == 0:
                    continue
                self._range = None  # (a file system without it: fdatasync from now on)
            try:
                sync(self._fd)
            except OSError:
                return

    def wrote(self, n: int) -> None:
        self._pending += n
        if self._pending >= self._step and self._thread is not None:
            self._pending = 0
            self._kick.set()

    def __enter__(self) -> "Writeback":
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop = True
            self._kick.set()
            self._thread.join()
            self._thread = None



#: sync_file_range's flag: start writeback of the range's dirty pages, do not wait
_SYNC_FILE_RANGE_WRITE = 2


@functools.lru_cache(maxsize=None)
def _sync_file_range():
    """libc's ``sync_file_range(fd, offset, nbytes, flags)`` (Linux; it releases the GIL), or None."""
    import sys
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError, ImportError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


class HashingWriter:
    """Writes whole buffers to an unbuffered file ``f``, counts them for background writeback
    (``wb``: a :class:`Writeback` or None) and feeds them, in order, to ``hasher`` (hashlib-like,
    e.g. the sha256 an index records for the file; None: no hashing) on a worker thread while
    they are written: the file's digest comes from the buffers that went out, not from reading
    the file back.  A buffer may be reused or dropped only after :meth:`drain`."""

    def __init__(self, f, wb: Writeback | None = None, hasher=None):
        self._f, self._wb, self._h = f, wb, hasher
        self._feed = BackgroundFeed(hasher) if hasher is not None else None

    def write(self, data) -> None:
        if self._feed is not None:
            self._feed.update(data)
        write_all(self._f, data)
        if self._wb is not None:
            self._wb.wrote(len(data))

    def drain(self) -> None:
        if self._feed is not None:
            self._feed.drain()

    def hexdigest(self) -> str | None:
        if self._h is None:
            return None
        self.drain()
        return self._h.hexdigest()

    def __enter__(self) -> "HashingWriter":
        return self

    def __exit__(self, *exc) -> None:
        if self._feed is not None:
            self._feed.__exit__(*exc)


@contextmanager
def new_file(path) -> Iterator:
    """A new file at ``path`` inside a directory its caller installs as a whole (a multi-file model's
    temp directory, renamed into place once complete): created exclusively (the mode open()
    gives under the umask), written, fsynced -- no temp name, no rename, no directory fsync per
    file (the caller fsyncs the directory once).  Removed again on any exception."""
    path = os.fspath(path)
    f = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), "w+b",
                  buffering=0)
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
    except BaseException:
        f.close()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        raise


def writer_options(writer, name: str, options: dict) -> dict:
    """``options`` for the format writer ``writer`` (its keyword-only parameters), checked
    before anything is written: an option it does not take, or a value not of the type its
    annotation declares (``int``, ``bool``, ``str``, ``bytes``, a mapping, a list, None where
    the annotation allows it), is a UsageError naming the option.  Ranges are the writer's to
    check (against the declarations its reader uses)."""
    params, hints = _signature(writer)
    extra = sorted(set(options) - set(params))
    if extra:
        raise UsageError(f"the {name} writer takes no option {', '.join(map(repr, extra))}"
                         + (f" (its options: {', '.join(sorted(params))})" if params else " (it has none)"))
    for k, v in options.items():
        want = hints.get(k)
        if want is not None and not _of_type(v, want):
            raise UsageError(f"{name} writer: {k} must be {_type_doc(want)} (got {type(v).__name__} {_short(v)})")
    return options


@functools.lru_cache(maxsize=None)
def _signature(writer) -> tuple[frozenset, dict]:
    """A writer's options (its keyword-only parameters, but private ones) and their annotations."""
    import inspect
    import typing
    params = frozenset(k for k, p in inspect.signature(writer).parameters.items()
                       if p.kind == p.KEYWORD_ONLY and not k.startswith("_"))
    try:
        hints = typing.get_type_hints(writer)
    except Exception:  # an annotation that does not evaluate: no type to check against
        hints = {}
    return params, hints


def _of_type(v, t) -> bool:
    import collections.abc as abc
    import types
    import typing
    origin = typing.get_origin(t)
    if origin in (typing.Union, types.UnionType):
        return any(_of_type(v, a) for a in typing.get_args(t))
    if t is typing.Any:
        return True
    if t is type(None):
        return v is None
    t = origin or t
    if t is bool:
        return isinstance(v, (bool, np.bool_))
    if t is int:
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
    if t is float:
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if t is bytes:
        return isinstance(v, (bytes, bytearray))
    if t in (dict, abc.Mapping, typing.Mapping):
        return isinstance(v, abc.Mapping)
    if t is list:
        return isinstance(v, (list, tuple))
    return not isinstance(t, type) or isinstance(v, t)


def _type_doc(t) -> str:
    import types
    import typing
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return " or ".join(_type_doc(a) for a in typing.get_args(t))
    t = typing.get_origin(t) or t
    if t is type(None):
        return "None"
    return {dict: "a mapping", list: "a list", str: "text (str)", bool: "a bool", int: "an integer",
            bytes: "bytes"}.get(t, "a mapping" if getattr(t, "__name__", "") == "Mapping" else getattr(t, "__name__", str(t)))


def _short(v) -> str:
    r = repr(v) if not isinstance(v, int) or abs(v).bit_length() <= 128 else f"~2^{abs(v).bit_length() - 1}"
    return r if len(r) <= 40 else r[:37] + "..."


def declared_arg(decl, value, what: str, *, fmt: str, key: str | None = None, encode: Callable | None = None):
    """A writer's argument ``what`` checked against ``decl``, the schema declaration
    (:mod:`schemas.dsl`) its reader checks the written value against (``key``: the declaration
    of that key of the Map ``decl``), and, with ``encode``, that it can be encoded as the file
    stores it (msgpack: integers of 64 bits, text without lone surrogates): what the writer
    accepts, its reader accepts.  A UsageError names the argument with the reader's finding;
    returns ``value``."""
    from ..engine.payload import check
    rule = ""
    if key is not None:
        rule, decl = decl.rule, next(k.type for k in decl.keys if k.name == key)
    bad = check(decl, value, fmt=fmt, offset=None, path=what, rule=rule, limit=1)
    if bad:
        raise UsageError(f"{bad[0].path}: {bad[0].message} (its reader would refuse the file"
                         + (f": {bad[0].rule})" if bad[0].rule else ")"))
    if encode is not None:
        try:
            encode(value)
        except (OverflowError, TypeError, ValueError, UnicodeError, RecursionError) as e:
            raise UsageError(f"{what}: cannot be stored in {fmt} ({e})") from None
    return value


def named_pairs(tensors, what: str = "tensors"):
    """A writer's ``tensors``: a mapping name -> value, or an iterable of (name, value) pairs
    (a generator stays lazy), as (name, value) pairs; anything else, and an item that is not a
    pair, is a UsageError naming it."""
    from collections.abc import Iterable, Mapping
    if isinstance(tensors, Mapping):
        return iter(tensors.items())
    if not isinstance(tensors, Iterable) or isinstance(tensors, (str, bytes, bytearray, memoryview, np.ndarray)):
        raise UsageError(f"{what} must be a mapping of name -> array or (name, array) pairs "
                         f"(got {type(tensors).__name__})")

    def pairs():
        for i, item in enumerate(tensors):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise UsageError(f"{what}[{i}] must be a (name, array) pair (got {type(item).__name__} "
                                 f"{_short(item)})")
            yield item[0], item[1]
    return pairs()
