"""A file being written by a download, read while it is written: which of its bytes are there
yet (:class:`Arrivals`), and digests of ranges of it computed as soon as their bytes are there
(:class:`ArrivingFile`) -- so that the hashes a reader checks afterwards are computed while the
network is still busy, not in a second pass over the copy (format-blind: which ranges to hash
is the caller's business, see :mod:`codec.remote_file`).

A digest made here is a fact about the bytes in the file, never a claim of the data: the reader
opened on the file afterwards is handed it (:attr:`codec.io.sources.Source.digests`) and still
compares it with the hash it trusts.  A byte written twice (a range fetched again) voids every
digest (:attr:`Arrivals.rewritten`): they could describe bytes the file no longer holds.
"""
from __future__ import annotations

import bisect
import mmap
import threading

import blake3 as _b3

from .integrity import BLAKE3, sha256

#: a range is hashed in steps of this size, each as soon as it is there (a streamed download
#: writes pieces of about this size: the hashing keeps up a piece behind it)
_STEP = 4 * 1024 * 1024

#: the hashes a range may be asked for (:attr:`codec.io.sources.Source.digests`' algorithms)
HASHERS = {BLAKE3: lambda threads: _b3.blake3(max_threads=threads), "sha256": lambda threads: sha256()}


class Gone(Exception):
    """The download ended without the bytes waited for (it failed, or was given up)."""


class Arrivals:
    """The ranges of a file of ``size`` bytes written so far (merged), for threads that wait
    for some of them."""

    def __init__(self, size: int):
        self.size = size
        self._cond = threading.Condition()
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._over = self._gave_up = False
        #: whether a byte was written twice (then no digest of the file stands)
        self.rewritten = False

    def wrote(self, at: int, n: int) -> None:
        """The bytes ``[at, at + n)`` are in the file now."""
        if n <= 0:
            return
        end = at + n
        with self._cond:
            starts, ends = self._starts, self._ends
            i = bisect.bisect_right(starts, at)
            if (i and ends[i - 1] > at) or (i < len(starts) and starts[i] < end):
                self.rewritten = True
            lo = i - 1 if i and ends[i - 1] >= at else i  # (the range before it touches it: merged)
            hi = bisect.bisect_right(starts, end)
            if lo < hi:
                at, end = min(at, starts[lo]), max(end, ends[hi - 1])
            starts[lo:hi], ends[lo:hi] = [at], [end]
            self._cond.notify_all()

    def over(self) -> None:
        """No more bytes will come (the download is done, or failed): waiters stop waiting."""
        with self._cond:
            self._over = True
            self._cond.notify_all()

    def give_up(self) -> None:
        """Waiters stop at once, whatever is there (Gone)."""
        with self._cond:
            self._over = self._gave_up = True
            self._cond.notify_all()

    def has(self, at: int, n: int) -> bool:
        i = bisect.bisect_right(self._starts, at) - 1
        return n <= 0 or (i >= 0 and self._ends[i] >= at + n)

    def wait(self, at: int, n: int) -> None:
        """Return once ``[at, at + n)`` is in the file; :class:`Gone` if it never will be."""
        with self._cond:
            while self._gave_up or not self.has(at, n):
                if self._over:
                    raise Gone
                self._cond.wait()

    @property
    def is_over(self) -> bool:
        return self._over


class ArrivingFile:
    """The file at ``path`` (``size`` bytes, its length set already) as a download writes it:
    reads of ranges that wait for their bytes, and digests of ranges computed as they come."""

    def __init__(self, path: str, arrivals: Arrivals):
        self.arrivals = arrivals
        self._f = open(path, "rb")
        try:
            self._mm = mmap.mmap(self._f.fileno(), arrivals.size, access=mmap.ACCESS_READ) if arrivals.size else None
        except BaseException:
            self._f.close()
            raise
        self._buf = memoryview(self._mm) if self._mm is not None else memoryview(b"")
        #: ``(algorithm, start, length) -> digest`` of the ranges hashed so far
        self.digests: dict = {}

    def read(self, spans: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(start, length)`` inside the file, once they are there (a range
        past its end: as much of it as there is, as a store answers)."""
        out = []
        for a, n in spans:
            a, n = max(0, a), max(0, min(n, self.arrivals.size - max(0, a)))
            self.arrivals.wait(a, n)
            out.append(bytes(self._buf[a:a + n]))
        return out

    def hash(self, algorithm: str, start: int, length: int) -> None:
        """Add the digest of ``[start, start + length)`` to :attr:`digests`, hashing each piece
        once it is there (on this thread, one core: the download has the other); the pages it
        mapped are let go behind it (resident memory stays flat: they stay in the page cache
        for the reader that follows)."""
        if algorithm not in HASHERS or start < 0 or length < 0 or start + length > self.arrivals.size:
            return
        h = HASHERS[algorithm](1 if not self.arrivals.is_over else _b3.blake3.AUTO)
        pos, end = start, start + length
        while pos < end:
            n = min(_STEP, end - pos)
            self.arrivals.wait(pos, n)
            h.update(self._buf[pos:pos + n])
            self._release(pos, n)
            pos += n
        self.digests[(algorithm, start, length)] = h.digest()

    def _release(self, at: int, n: int) -> None:
        page = mmap.PAGESIZE
        a, b = at // page * page, min(-(-(at + n) // page) * page, self.arrivals.size)
        if b > a:
            try:
                self._mm.madvise(mmap.MADV_DONTNEED, a, b - a)
            except (OSError, ValueError, AttributeError):
                pass

    def close(self) -> None:
        try:
            self._buf.release()
            if self._mm is not None:
                self._mm.close()
        except BufferError:
            pass  # (a view of it still alive: the mapping goes with the last one)
        finally:
            self._f.close()
