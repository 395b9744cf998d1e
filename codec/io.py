"""Bytes in and bytes out: read-only mapped sources and atomic, fsynced file writes."""
from __future__ import annotations

import mmap
import os
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from typing import BinaryIO, Callable, Iterable, Iterator

import numpy as np

from .errors import UsageError

#: pieces in which big regions are hashed or copied (bounded memory, GIL released in between)
PIECE = 16 * 1024 * 1024


class LazyTensor:
    """A tensor a writer loads only when it writes it: ``load()`` returns the array (of
    ``dtype`` and ``shape``), which is dropped right after — so writing N tensors needs the
    memory of the largest one, not of all of them."""

    def __init__(self, dtype, shape, load):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.load = load

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize

    def materialise(self, name: str = "") -> np.ndarray:
        a = np.asarray(self.load())
        if a.shape != self.shape or a.dtype.newbyteorder("=") != self.dtype.newbyteorder("="):
            raise UsageError(f"{name}: LazyTensor declared {self.dtype}{list(self.shape)}, load() gave "
                             f"{a.dtype}{list(a.shape)}")
        return a


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


def common_metadata(metadata, **shorthands) -> dict:
    """``metadata`` with the non-empty ``shorthands`` (model_name=, architecture=) filled in; the
    same key given both ways with different values is a UsageError, never a silent choice."""
    out = dict(metadata or {})
    for k in out:
        name_bytes(k, "metadata key")
    for k, v in shorthands.items():
        if k not in COMMON_METADATA:
            raise UsageError(f"unknown common metadata key {k!r}")
        if not v:
            continue
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


def frozen_view(buf, dtype, count: int, offset: int) -> np.ndarray:
    """A read-only zero-copy numpy view of ``count`` items of ``buf`` at ``offset`` (no items:
    an empty array wherever the offset is -- an empty tensor may sit at the very end of a file
    whose padding was cut; a fuzzing finding)."""
    if count == 0:
        a = np.empty(0, dtype=dtype)
        a.flags.writeable = False
        return a
    a = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    if a.flags.writeable:
        a.flags.writeable = False
    return a


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def confined(base, rel: str) -> tuple[str | None, str | None]:
    """``rel`` resolved inside the directory ``base``: (full path, None), or (None, why not) when
    it is absolute, a drive path, not a usable file name (NUL, lone surrogate), or leaves
    ``base`` through '..' or a symlink.  Every format's file references go through here."""
    if os.path.isabs(rel) or rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        return None, f"absolute path {rel!r} is not allowed"
    root = os.path.realpath(base)
    try:
        full = os.path.realpath(os.path.join(root, rel))
    except ValueError as e:  # a NUL or a lone surrogate (UnicodeEncodeError): no file has that name
        return None, f"{rel!r} is not a usable file name ({e})"
    if os.path.commonpath([root, full]) != root:
        return None, f"{rel!r} leaves the directory {os.fspath(base)!r}"
    return full, None


def _refuse_kind(name: str, what: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise UsageError(f"{name}: {what} is {kind}, not a regular file")


def open_regular(path, what: str = "file") -> BinaryIO:
    """Open ``path`` for reading, refusing at once anything that is not a regular file.

    The descriptor is opened non-blocking (a FIFO with no writer cannot hang the open) and its
    ``fstat`` -- not the name's -- decides: a symlink to ``/dev/zero`` or to a FIFO is refused
    like the device itself.  Every size check after this must use ``os.fstat(f.fileno())``.
    Failures are :class:`UsageError` naming the path and ``what`` it was meant to be.
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        try:  # a socket cannot be opened at all (ENXIO): name what it is
            _refuse_kind(name, what, os.stat(name).st_mode)
        except OSError:
            pass
        raise UsageError(f"{name}: cannot open {what}: {e.strerror or e}") from None
    try:
        _refuse_kind(name, what, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Source:
    """A read-only byte source: a file mapped with mmap, or a caller's buffer.

    ``buf`` is a memoryview; numpy views made from it are read-only and keep the mapping alive
    even after :meth:`close` (closing only drops this object's reference).
    """

    def __init__(self, path_or_buffer):
        self.path: str | None = None
        self._mm: mmap.mmap | None = None
        self._file = None
        if isinstance(path_or_buffer, (str, os.PathLike)):
            self.path = os.fspath(path_or_buffer)
            self._file = open_regular(self.path)
            size = os.fstat(self._file.fileno()).st_size
            if size:
                self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                self.buf = memoryview(self._mm)
            else:
                self.buf = memoryview(b"")
        else:
            try:
                mv = memoryview(path_or_buffer)
            except TypeError:
                raise UsageError(f"expected a path or a bytes-like object, got {type(path_or_buffer).__name__}") from None
            if not mv.contiguous:
                raise UsageError("buffer must be contiguous")
            self.buf = mv.cast("B") if (mv.format != "B" or mv.ndim != 1) else mv
        self.size = len(self.buf)
        self.readonly = self.buf.readonly

    @property
    def name(self) -> str:
        return self.path or "<buffer>"

    def array(self, dtype, count: int, offset: int) -> np.ndarray:
        """A read-only zero-copy numpy view of ``count`` items at ``offset``."""
        return frozen_view(self.buf, dtype, count, offset)

    def release(self, start: int, length: int) -> None:
        """Drop mapped pages of a range we are done with (keeps RSS flat while hashing)."""
        if self._mm is None or length <= 0:
            return
        page = mmap.PAGESIZE
        a = (start + page - 1) // page * page
        b = (start + length) // page * page
        if b > a:
            try:
                self._mm.madvise(mmap.MADV_DONTNEED, a, b - a)
            except (OSError, ValueError, AttributeError):
                pass

    def advise_willneed(self, start: int, length: int) -> tuple[int, int]:
        """madvise(WILLNEED) over the page-rounded range; returns (start, length) advised."""
        page = mmap.PAGESIZE
        a = start // page * page
        b = min(-(-(start + length) // page) * page, -(-self.size // page) * page)
        if self._mm is not None and b > a:
            self._mm.madvise(mmap.MADV_WILLNEED, a, b - a)
        return a, max(b - a, 0)

    def has(self, start: int, length: int) -> bool:
        """Whether the bytes [start, start+length) are in ``buf`` (always, but for a PartialSource)."""
        return 0 <= start and start + length <= self.size

    @property
    def prefix_end(self) -> int:
        """Where the bytes held from offset 0 on end (the size, but for a PartialSource): a
        reader that parses a variable-length header stops there, not at the file's end."""
        return self.size

    def covered(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) that are in ``buf``."""
        return [(start, end)] if start < end else []

    def close(self) -> None:
        if self._mm is not None:
            mm, self._mm = self._mm, None
            try:
                self.buf.release()
                mm.close()
            except BufferError:
                pass  # numpy views still use the mapping; it is freed with the last of them
        if self._file is not None:
            self._file.close()
            self._file = None


# ------------------------------------------------------------------ writing safely
#: every temporary file or directory a writer makes beside its target is named
#: ``.<target name>.modelcodec-<pid>.<random>``: recognisable, and stale once <pid> is gone
TEMP_MARK = ".modelcodec-"


def caller_umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status), else the
    classic set-and-restore."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    m = os.umask(0o022)
    os.umask(m)
    return m


def give_default_mode(fd_or_path, directory: bool = False) -> None:
    """The mode open()/mkdir() would have given under the caller's umask (0644/0755 under 022);
    mkstemp/mkdtemp make 0600/0700, which a web server cannot serve."""
    mode = (0o777 if directory else 0o666) & ~caller_umask()
    if isinstance(fd_or_path, int):
        os.fchmod(fd_or_path, mode)
    else:
        os.chmod(fd_or_path, mode)


def temp_prefix(path: str) -> str:
    return "." + os.path.basename(path) + TEMP_MARK + str(os.getpid()) + "."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_stale_temps(path: str) -> list[str]:
    """Remove the temporaries of earlier writers of ``path`` that were killed (their pid is gone);
    returns what was removed.  Only names this module makes are touched."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    head = "." + os.path.basename(path) + TEMP_MARK
    removed = []
    try:
        names = os.listdir(d)
    except OSError:
        return removed
    for n in names:
        if not n.startswith(head):
            continue
        pid = n[len(head):].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        full = os.path.join(d, n)
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            removed.append(full)
        except OSError:
            pass
    return removed


def refuse_special_target(path: str) -> None:
    """A writer's target may be missing, a regular file, or a symlink (replaced by the new file,
    never written through); a FIFO, device, socket or directory is refused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(f"{path}: cannot write here: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        raise UsageError(f"{path}: refusing to replace {kind} (writers replace regular files only)")


@contextmanager
def atomic_write(path) -> Iterator[BinaryIO]:
    """Write ``path`` through a temp file in the same directory: fsync, rename, fsync dir.

    On any exception the temp file is removed and ``path`` is untouched.  The file gets the
    caller's umask mode; the target must not be a FIFO/device/socket/directory (a symlink is
    replaced, not followed); temps of killed earlier writers of ``path`` are removed first.
    """
    path = os.fspath(path)
    refuse_special_target(path)
    remove_stale_temps(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=d)
    f = os.fdopen(fd, "w+b", buffering=0)
    try:
        give_default_mode(fd)
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, path)
        fsync_dir(d)
    except BaseException:
        f.close()
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def locked_dir(d: str) -> Iterator[None]:
    """An exclusive flock on the directory ``d`` itself (no lock file left behind): writers that
    install into ``d`` take turns."""
    import fcntl
    fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def exchange(a: str, b: str) -> bool:
    """Swap two directory entries atomically (Linux renameat2 RENAME_EXCHANGE); False when the
    system or the filesystem cannot, so the caller falls back to two renames."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    import errno
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def fsync_dir(d: str) -> None:
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


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
    """For a contiguous array over a read-only file mapping (a reader's zero-copy view), a
    function dropping the mapped pages of ``a``'s bytes [k, k + n) once they have been used, so
    that streaming a whole file through a writer keeps resident memory at a piece, not the
    file (the pages stay in the page cache; touching them again maps them again).  None for
    anything else (dropping the pages of private memory would lose its data)."""
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    mm = base.obj if isinstance(base, memoryview) else base
    if not isinstance(mm, mmap.mmap) or not a.flags.c_contiguous or a.flags.writeable:
        return None
    try:
        start = a.ctypes.data - np.frombuffer(mm, np.uint8, 1).ctypes.data
    except (ValueError, TypeError, BufferError):
        return None
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
    """Starts writeback of what has been written every ``step`` bytes, on a background thread
    (``fdatasync``), so the disk works while the writer is still copying and the final fsync has
    little left to wait for.  Off when ``f`` has no file descriptor."""

    def __init__(self, f, step: int = 128 * 1024 * 1024):
        import threading
        try:
            self._fd = f.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self._step = step
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
            try:
                sync(self._fd)
            except OSError:
                return  # the final fsync reports real errors

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


#: MAP_NORESERVE (Linux): an anonymous mapping the size of a remote file costs only the pages
#: written into it, whatever the file's size
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)
#: smaller files are held in a plain buffer
_SPARSE_FROM = 64 * 1024 * 1024


class PartialSource(Source):
    """Some byte ranges of a file of ``size`` bytes that is not here (a remote file): ``buf``
    holds each range added at its own offset — an anonymous sparse mapping for big files, so
    memory is what was read, never the file's size — and nothing else is readable: ``has``
    and ``covered`` say what is there, and a reader must ask before it reads."""

    def __init__(self, name: str, size: int):
        self.path = name
        self._file = None
        self.size = size
        self.readonly = True
        self.spans: list[tuple[int, int]] = []
        if size >= _SPARSE_FROM:
            self._mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _NORESERVE)
            self._store = self._mm
        else:
            self._mm = None
            self._store = bytearray(size)
        self.buf = memoryview(self._store).toreadonly()

    def add(self, start: int, data) -> None:
        """Hold ``data`` (read from the file at ``start``)."""
        n = len(data)
        if not n:
            return
        if start < 0 or start + n > self.size:
            raise UsageError(f"{self.path}: range [{start}, +{n}) is outside the file ({self.size} bytes)")
        self._store[start:start + n] = data
        spans = sorted(self.spans + [(start, start + n)])
        merged = [list(spans[0])]
        for a, b in spans[1:]:
            if a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.spans = [(a, b) for a, b in merged]

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) not held yet."""
        out, pos = [], start
        for a, b in self.covered(start, end):
            if a > pos:
                out.append((pos, a))
            pos = max(pos, b)
        if pos < end:
            out.append((pos, end))
        return out

    def has(self, start: int, length: int) -> bool:
        if length <= 0:
            return 0 <= start <= self.size
        return any(a <= start and start + length <= b for a, b in self.spans)

    @property
    def prefix_end(self) -> int:
        return self.spans[0][1] if self.spans and self.spans[0][0] == 0 else 0

    def array(self, dtype, count: int, offset: int) -> np.ndarray:
        """A view of bytes that are here; NotFoundError for bytes that were not read (never
        the zeros of the unread parts)."""
        n = count * np.dtype(dtype).itemsize
        if n and not self.has(offset, n):
            from .errors import NotFoundError
            raise NotFoundError(f"{self.path}: bytes [{offset}, +{n}) were not read (a remote file: "
                                "read its tensors through the reader that fetched it)")
        return super().array(dtype, count, offset)

    def covered(self, start: int, end: int) -> list[tuple[int, int]]:
        return [(max(a, start), min(b, end)) for a, b in self.spans if max(a, start) < min(b, end)]

    def close(self) -> None:
        self.buf.release()
        super().close()


_TRIM: list = []


def return_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere).  After a decode that made and dropped many megabyte-sized temporaries, glibc keeps
    them (its mmap threshold rises with the first big buffer freed, so later ones come from the
    heap): 40 MB of a 1 M-entry index's open stayed resident as free heap without this."""
    if not _TRIM:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                fn = ctypes.CDLL(None).malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _TRIM.append(fn)
    if _TRIM[0] is not None:
        _TRIM[0](0)
