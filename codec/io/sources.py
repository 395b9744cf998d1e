"""Reading bytes safely: files opened only when they are regular files, references confined to
their directory, and the read-only byte sources readers parse (a file mapped with mmap, a
caller's buffer, or the ranges of a remote file that were fetched)."""
from __future__ import annotations

import mmap
import os
import stat
import sys
import weakref
from typing import BinaryIO

import numpy as np

from ..schemas.http import FORMAT as _HTTP, MAX_FILE_BYTES, Rule as _HttpRule

from ..errors import LimitError, UsageError


#: pieces in which big regions are hashed or copied (bounded memory, GIL released in between)
PIECE = 16 * 1024 * 1024


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
    if any("\ud800" <= c <= "\udfff" for c in rel):  # (JSON's "\udc80" would name the byte 0x80 here)
        return None, f"{rel!r} is not a usable file name (a lone surrogate)"
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


def open_regular(path, what: str = "file", *, dir_fd: int | None = None, shown: str | None = None,
                 nofollow: bool = False) -> BinaryIO:
    """Open ``path`` for reading, refusing at once anything that is not a regular file.

    The descriptor is opened non-blocking (a FIFO with no writer cannot hang the open) and its
    ``fstat`` -- not the name's -- decides: a symlink to ``/dev/zero`` or to a FIFO is refused
    like the device itself.  Every size check after this must use ``os.fstat(f.fileno())``.
    Failures are :class:`UsageError` naming the path (``shown``, when given) and ``what`` it was
    meant to be.  With ``dir_fd``, ``path`` is relative to that open directory; ``nofollow``
    refuses a symlink.
    """
    name = os.fspath(path)
    shown = name if shown is None else shown
    if not name:  # (an empty argument: not "': cannot open file'")
        raise UsageError(f"an empty path names no {what} to open")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
                     | (getattr(os, "O_NOFOLLOW", 0) if nofollow else 0), dir_fd=dir_fd)
    except OSError as e:
        try:  # a socket cannot be opened at all (ENXIO): name what it is
            _refuse_kind(shown, what, os.stat(name, dir_fd=dir_fd).st_mode)
        except OSError:
            pass
        raise UsageError(f"{shown}: cannot open {what}: {e.strerror or e}") from None
    try:
        _refuse_kind(shown, what, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class FileMap:
    """A read-only shared mapping of a whole regular file, made by a :class:`Source` (or a reader
    holding the files of a model in several): its bytes are the read-only uint8 array
    :meth:`array` gives.  It holds no file descriptor once made -- the kernel keeps a mapped
    file's pages reachable through the mapping alone, even after the file is removed -- so a
    model in thousands of files needs no more descriptors than a model in one (Python's own
    ``mmap`` before 3.13 keeps a duplicate descriptor for every mapping: it is used only where
    the C library cannot be reached).  The mapping is unmapped when the last array viewing it
    is gone; nothing unmaps it under a view.

    Only such a mapping may have its pages dropped (``MADV_DONTNEED``) once they have been read:
    its bytes come back from the file when touched again.  Dropping pages of any other mapping
    -- an anonymous one (a remote file's ranges), a private copy, a caller's own -- would
    replace its data by zeros under every array that views it."""

    def __init__(self, fd: int, size: int):
        """The first ``size`` bytes of the open file ``fd`` (which the caller closes when it
        likes: the mapping does not need it; no bytes: nothing is mapped); OSError when it
        cannot be mapped."""
        self.size = size
        self.address = 0
        libc = _libc()
        if not size:
            return
        if libc is None:  # (Python's mmap, with its duplicate descriptor)
            self._mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            self.size = len(self._mm)
            self.address = np.frombuffer(self._mm, np.uint8, 1).__array_interface__["data"][0]
            self._madvise = self._mm.madvise
            return
        import ctypes
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self.address = addr
        weakref.finalize(self, libc.munmap, addr, size).atexit = False

        def advise(advice: int, start: int, length: int) -> None:
            if libc.madvise(addr + start, length, advice) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
        self._madvise = advise

    @property
    def __array_interface__(self) -> dict:
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.address, True), "version": 3}

    def array(self) -> np.ndarray:
        """All the bytes, a read-only uint8 array (it keeps the mapping alive)."""
        return np.asarray(self) if self.size else frozen_view(b"", np.uint8, 0, 0)

    def madvise(self, advice: int, start: int, length: int) -> None:
        """``madvise`` over [start, start + length) (start page-aligned; the length is cut at the
        end of the mapping), as ``mmap.madvise`` does."""
        if not 0 <= start < self.size or length < 0:
            raise ValueError(f"madvise range [{start}, +{length}) outside the mapping of {self.size} bytes")
        self._madvise(advice, start, min(length, self.size - start))


_LIBC: list = []


def _libc():
    """The C library's mmap, munmap and madvise (None where they cannot be called: Windows)."""
    if not _LIBC:
        try:
            import ctypes
            lib = ctypes.CDLL(None, use_errno=True)
            lib.mmap.restype = ctypes.c_void_p
            lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_long]
            lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            if not hasattr(mmap, "MAP_SHARED"):
                raise OSError("no POSIX mmap")
        except (ImportError, OSError, AttributeError, TypeError):
            lib = None
        _LIBC.append(lib)
    return _LIBC[0]


def file_map_of(a) -> tuple["FileMap", int] | None:
    """(the :class:`FileMap` a read-only numpy array views, the array's offset in it), or None
    when the array views anything else: the one test before a page of it is dropped."""
    base = a
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    if not isinstance(base, FileMap) or a.flags.writeable:
        return None
    return base, a.__array_interface__["data"][0] - base.address


class Source:
    """A read-only byte source: a file mapped (a :class:`FileMap`: no descriptor is held), or a
    caller's buffer.

    ``buf`` is a memoryview; numpy views made from it are read-only and keep the mapping alive
    even after :meth:`close` (closing only drops this object's reference).
    """

    def __init__(self, path_or_buffer, *, file: BinaryIO | None = None, mapped: FileMap | None = None):
        """``file``: the regular file ``path_or_buffer`` names, already open (this source
        closes it once mapped); ``mapped``: that file's mapping, already made (shared: this
        source only drops its reference to it)."""
        self.path: str | None = None
        self._mm: FileMap | mmap.mmap | None = None
        if isinstance(path_or_buffer, (str, os.PathLike)):
            self.path = os.fspath(path_or_buffer)
            if mapped is None:
                with open_regular(self.path) if file is None else file as f:
                    try:
                        mapped = FileMap(f.fileno(), os.fstat(f.fileno()).st_size)
                    except (OSError, ValueError) as e:  # (no address space left, too many mappings)
                        why = getattr(e, "strerror", None) or e
                        raise UsageError(f"{self.path}: cannot map the file: {why}") from None
            self._mm = mapped
            self._u8 = mapped.array()
            self.buf = memoryview(self._u8)
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

    #: the whole buffer as one read-only uint8 array (made on the first :meth:`view`)
    _u8: np.ndarray | None = None
    #: digests of ranges of these very bytes computed already -- by the download that wrote
    #: the file, as each range arrived (:mod:`codec.remote_file`) --: ``(algorithm, start,
    #: length) -> digest``; a hash over such a range is looked up here rather than computed
    #: again (:func:`codec.io.integrity.known_digest`).  Never a value the data claims: the
    #: reader still compares it with the hash it trusts.
    digests: dict | None = None

    def view(self, dtype: np.dtype, shape: tuple, offset: int, nbytes: int) -> np.ndarray:
        """A read-only zero-copy array of ``shape`` at ``offset`` (``nbytes`` > 0 bytes, known to
        be in the source): the cheapest view there is (one constructor call over one uint8
        array of the whole buffer), for a reader's per-tensor path."""
        u8 = self._u8
        if u8 is None:
            u8 = self._u8 = frozen_view(self.buf, np.uint8, self.size, 0)
        return np.ndarray(shape, dtype, u8, offset)

    def release(self, start: int, length: int) -> None:
        """Drop mapped pages of a range we are done with (keeps RSS flat while hashing) -- of a
        file's mapping only: other bytes (a buffer, a remote file's ranges) have nowhere to come
        back from, and arrays handed out may view them."""
        if not isinstance(self._mm, FileMap) or length <= 0:
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
        self._u8 = None
        if self._mm is not None:
            mm, self._mm = self._mm, None
            try:
                self.buf.release()
                if not isinstance(mm, FileMap):
                    mm.close()
            except BufferError:
                pass  # numpy views still use the mapping; it is freed with the last of them


#: MAP_NORESERVE (Linux): an anonymous mapping the size of a remote file costs only the pages
#: written into it, whatever the file's size
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)
#: smaller files are held in a plain buffer (one is zeroed whole as it is made, holding the GIL:
#: about 14 ms for 32 MiB, where the sparse mapping costs the same few microseconds at any size)
_SPARSE_FROM = 1024 * 1024


class PartialSource(Source):
    """Some byte ranges of a file of ``size`` bytes that is not here (a remote file): ``buf``
    holds each range added at its own offset — an anonymous sparse mapping for big files, so
    memory is what was read, never the file's size — and nothing else is readable: ``has``
    and ``covered`` say what is there, and a reader must ask before it reads."""

    def __init__(self, name: str, size: int):
        self.path = name
        self.size = size
        self.readonly = True
        self.spans: list[tuple[int, int]] = []
        if size > MAX_FILE_BYTES:
            raise LimitError(_HTTP, None, "", _HttpRule.LIMIT, f"a file of {size} bytes is over the {MAX_FILE_BYTES} "
                             "a remote file may have", source=name)
        try:
            if size >= _SPARSE_FROM:
                self._mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _NORESERVE)
                self._store = self._mm
            else:
                self._mm = None
                self._store = bytearray(size)
        except (OSError, MemoryError, OverflowError) as e:  # no address space for it (RLIMIT_AS)
            raise LimitError(_HTTP, None, "", _HttpRule.LIMIT, f"cannot reserve the address space to hold ranges of a "
                             f"file of {size} bytes ({e})", source=name) from None
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
        """A view of bytes that are here; NotLocalError for bytes that were not read (never
        the zeros of the unread parts)."""
        n = count * np.dtype(dtype).itemsize
        if n and not self.has(offset, n):
            from ..errors import NotLocalError
            raise NotLocalError(f"{self.path}: bytes [{offset}, +{n}) were not read (a remote file: "
                                "read its tensors through the reader that fetched it)")
        return super().array(dtype, count, offset)

    def view(self, dtype: np.dtype, shape: tuple, offset: int, nbytes: int) -> np.ndarray:
        if not self.has(offset, nbytes):
            return self.array(np.uint8, nbytes, offset)  # (the NotLocalError)
        return super().view(dtype, shape, offset, nbytes)

    def covered(self, start: int, end: int) -> list[tuple[int, int]]:
        return [(max(a, start), min(b, end)) for a, b in self.spans if max(a, start) < min(b, end)]

    def close(self) -> None:
        self._u8 = None
        self.buf.release()
        super().close()
        # (the ranges' memory goes with the last array viewing it -- at once if none does -- even
        # while this closed source is still held)
        self._store = None


def read_head(name: str, size: int, read, first: int, need, too_big=None, *, exact: bool = False) -> PartialSource:
    """The control region of a file that is not here (a remote file), read with ``read([(start,
    length)]) -> [bytes]``: its first ``first`` bytes, then more (at least doubling, unless
    ``need`` is ``exact``) while
    ``need(src)`` -- how many bytes from 0 the control region takes, judged from what was read
    (None: no more can be told) -- says it goes on past them; never past the file, and never
    past what ``too_big(n)`` accepts (it returns the error that refuses ``n`` bytes, or None).
    The reader opened on the result reports whatever is still missing."""
    src = PartialSource(name, size)
    want = min(size, first)
    while True:
        for a, b in src.missing(0, want):
            src.add(a, read([(a, b - a)])[0])
        n = need(src)
        if n is None or want >= size or n > size or n <= want:
            return src
        err = too_big(n) if too_big is not None else None
        if err is not None:
            raise err.with_source(name)
        want = min(size, n if exact else max(n, 2 * want))
