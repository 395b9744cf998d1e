"""Hashes over byte ranges, and the check of a bool tensor's bytes, streamed in bounded pieces
(never a whole shard in memory)."""
from __future__ import annotations

import os
from typing import Callable, Iterable

import blake3 as _b3
import numpy as np

from .sources import PIECE, Source

AUTO = _b3.blake3.AUTO


def blake3_bytes(data) -> bytes:
    h = _b3.blake3(max_threads=AUTO) if len(data) >= (1 << 20) else _b3.blake3()
    h.update(data)
    return h.digest()


#: the name of BLAKE3-256 in the keys of :attr:`Source.digests <codec.io.sources.Source.digests>`
BLAKE3 = "blake3"

#: how much a :class:`WarmDigest` hashes at a time: a piece the CPU's cache holds
WARM_PIECE = 128 * 1024


class WarmDigest:
    """A hashlib object (SHA-256: what the indexes of multi-file models record) fed its input a
    :data:`WARM_PIECE` at a time, each piece read once before it is hashed.  SHA-256 is slow and
    sequential; on bytes that are not in the CPU's cache it runs well below its speed on bytes
    that are (here ~1.2 against ~1.9 GB/s: `benchmarks/bench_aeroset.py`), and the read ahead
    costs a fraction of what it saves.  The digest is the hashlib object's."""

    __slots__ = ("_h",)

    def __init__(self, h):
        self._h = h

    @property
    def name(self) -> str:
        return self._h.name

    @property
    def digest_size(self) -> int:
        return self._h.digest_size

    def update(self, data) -> None:
        mv = memoryview(data)
        if mv.nbytes <= WARM_PIECE or not mv.c_contiguous:  # (hashlib refuses what is not contiguous)
            self._h.update(mv)
            return
        a = np.frombuffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv, np.uint8)
        for i in range(0, len(a), WARM_PIECE):
            piece = a[i:i + WARM_PIECE]
            np.add.reduce(piece, dtype=np.uint8)  # (the read that brings it into the cache)
            self._h.update(piece)

    def digest(self) -> bytes:
        return self._h.digest()

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def copy(self) -> "WarmDigest":
        return WarmDigest(self._h.copy())


def sha256() -> WarmDigest:
    """A new SHA-256 (hashlib's), fed as :class:`WarmDigest` feeds it."""
    import hashlib
    return WarmDigest(hashlib.sha256())


def known_digest(src: Source, algorithm: str, start: int, length: int) -> bytes | None:
    """The digest of ``src.buf[start:start+length]`` computed already over these bytes
    (:attr:`Source.digests <codec.io.sources.Source.digests>`), or None."""
    known = src.digests
    return known.get((algorithm, start, length)) if known else None


def blake3_range(src: Source, start: int, length: int, progress: Callable[[int], None] | None = None,
                 *, keep: bool = False) -> bytes:
    """BLAKE3-256 of ``src.buf[start:start+length]``, streamed; mapped pages are released
    behind the hasher so resident memory stays flat whatever the size -- unless ``keep``
    (the caller is about to read those pages).  A digest the source knows already
    (:func:`known_digest`) is not computed again."""
    got = known_digest(src, BLAKE3, start, length)
    if got is not None:
        if progress:
            progress(length)
        return got
    if length < SMALL and keep:  # (a tensor about to be read: one call, BLAKE3's threads from 1 MiB)
        return blake3_bytes(src.buf[start:start + length])
    h = _b3.blake3(max_threads=AUTO) if length >= SMALL else _b3.blake3()
    end = start + length
    pos = start
    while pos < end:
        n = min(PIECE, end - pos)
        h.update(src.buf[pos:pos + n])
        if not keep:
            src.release(pos, n)
        if progress:
            progress(n)
        pos += n
    return h.digest()


class PageHasher:
    """Feeds a byte stream and cuts it into BLAKE3 digests of fixed-size pages (AIP-0002)."""

    def __init__(self, page_size: int):
        self.page_size = page_size
        self.digests: list[bytes] = []
        self._h = _b3.blake3()
        self._fill = 0

    def update(self, data) -> None:
        mv = memoryview(data).cast("B")
        while mv:
            take = min(self.page_size - self._fill, len(mv))
            self._h.update(mv[:take])
            self._fill += take
            mv = mv[take:]
            if self._fill == self.page_size:
                self.digests.append(self._h.digest())
                self._h = _b3.blake3()
                self._fill = 0

    def finish(self) -> list[bytes]:
        if self._fill:
            self.digests.append(self._h.digest())
            self._h = _b3.blake3()
            self._fill = 0
        return self.digests


def _crc32c(pieces) -> int:
    import google_crc32c
    crc = 0
    for p in pieces:
        crc = google_crc32c.extend(crc, bytes(p) if not isinstance(p, bytes) else p)
    return crc


#: checksum algorithms a schema may name (schemas.dsl.Checksum.algorithm)
CHECKSUMS: dict[str, Callable] = {"crc32c": _crc32c}


def checksum(spec, buf, end: int) -> int:
    """The declared checksum ``spec`` over ``buf[spec.start:end]``, streamed in pieces."""
    fn = CHECKSUMS[spec.algorithm]
    return fn(buf[k:min(k + PIECE, end)] for k in range(spec.start, end, PIECE))


#: a single-threaded BLAKE3 hasher
blake3_hasher = _b3.blake3


def new_hasher(max_threads: int = AUTO):
    """A BLAKE3 hasher (by default with BLAKE3's own threads; ``max_threads=1``: this one)."""
    return _b3.blake3(max_threads=max_threads)


#: below this a range is hashed on one thread: BLAKE3's own threads cost more than they give on
#: small inputs (many small tensors are parallelised across tensors instead, see hash_many)
SMALL = 8 * 1024 * 1024
#: below this BLAKE3 barely releases the GIL: hashing on another thread only adds hand-overs
TINY = 64 * 1024


def hash_many(jobs, progress: Callable[[int], None] | None = None, workers: int | None = None) -> list[str]:
    """Hex BLAKE3-256 of each job, a ``(nbytes, pieces)`` pair where ``pieces()`` yields its bytes.

    Small jobs run on a pool of threads (BLAKE3 releases the GIL), big ones one after the other
    with BLAKE3's own threads; results come back in order.  Only for sources whose ``pieces`` may
    be called from any thread (in-memory arrays).
    """
    def one(job):
        n, pieces = job
        h = _b3.blake3(max_threads=AUTO) if n >= SMALL else _b3.blake3()
        for p in pieces():
            h.update(p)
        return h.hexdigest()

    workers = workers or min(4, os.cpu_count() or 1)
    if workers < 2 or sum(j[0] for j in jobs if TINY <= j[0] < SMALL) < SMALL:
        out = []
        for job in jobs:
            out.append(one(job))
            if progress:
                progress(job[0])
        return out
    from concurrent.futures import ThreadPoolExecutor

    def batch(idx):  # one task per batch of small jobs: a task costs ~10-50 us of hand-over
        return [one(jobs[i]) for i in idx]

    out: list = [None] * len(jobs)
    batches, cur, size = [], [], 0
    for i, j in enumerate(jobs):
        if TINY <= j[0] < SMALL:
            cur.append(i)
            size += j[0]
            if size >= (1 << 20) or len(cur) >= 256:
                batches.append(cur)
                cur, size = [], 0
    if cur:
        batches.append(cur)
    with ThreadPoolExecutor(workers, thread_name_prefix="modelcodec-hash") as ex:
        futs = [(idx, ex.submit(batch, idx)) for idx in batches]
        for i, j in enumerate(jobs):  # big ones (BLAKE3's threads) and tiny ones (GIL-bound) here
            if j[0] >= SMALL or j[0] < TINY:
                out[i] = one(j)
                if progress:
                    progress(j[0])
        for idx, fu in futs:
            for i, hx in zip(idx, fu.result()):
                out[i] = hx
                if progress:
                    progress(jobs[i][0])
    return out


class BackgroundFeed:
    """Feeds pieces to hashers on one worker thread, in order, while the caller writes the same
    pieces (file writes and BLAKE3 both release the GIL, so the two overlap on two cores).  At
    most ``depth`` hand-overs are in flight; a piece must not be modified once fed -- but one
    smaller than :attr:`INLINE` (a header, padding, a bias), which is copied and handed over with
    the small pieces after it, at once: the caller never waits for the hashing of a big piece
    to feed a small one."""

    INLINE = 256 * 1024

    def __init__(self, *hashers, depth: int = 2):
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor
        self._hashers = [h for h in hashers if h is not None]
        self._ex = ThreadPoolExecutor(1, thread_name_prefix="modelcodec-feed")
        self._q: deque = deque()
        self._depth = depth
        self._small: list = []
        self._small_bytes = 0

    def _feed(self, *pieces) -> None:
        for piece in pieces:
            for h in self._hashers:
                h.update(piece)

    def _hand_over(self, *pieces) -> None:
        self._q.append(self._ex.submit(self._feed, *pieces))
        while len(self._q) > self._depth:
            self._q.popleft().result()

    def _hand_over_small(self) -> None:
        if self._small:
            pieces, self._small, self._small_bytes = self._small, [], 0
            self._hand_over(*pieces)

    def update(self, piece) -> None:
        try:
            n = memoryview(piece).nbytes
        except TypeError:  # (a hasher's own kind of piece: its len(); not copied)
            n, copy = len(piece), piece
        else:
            copy = bytes(piece) if n < self.INLINE else None
        if n < self.INLINE:  # (copied: the caller may reuse a small buffer at once)
            self._small.append(copy)
            self._small_bytes += n
            if self._small_bytes >= self.INLINE:
                self._hand_over_small()
            return
        self._hand_over_small()
        self._hand_over(piece)

    def drain(self) -> None:
        """Wait until every piece fed so far is hashed (before a source may reuse its buffer)."""
        self._hand_over_small()
        while self._q:
            self._q.popleft().result()

    def __enter__(self) -> "BackgroundFeed":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self.drain()
        finally:
            self._ex.shutdown(wait=True, cancel_futures=True)


def scan_hashes(src: Source, start: int, length: int, spans: list[tuple[int, int]],
                progress: Callable[[int], None] | None = None) -> tuple[bytes, list[str]]:
    """One pass over ``src.buf[start:start+length]``: its BLAKE3-256, and the hex BLAKE3-256 of
    each ``(offset, nbytes)`` span inside it (spans may overlap or lie partly outside: only the
    bytes inside the range are read here; a span that does not lie whole inside it is hashed
    over what is).  Every byte is read once: the range's hash runs on a worker thread while
    the spans' hashers take the same piece on this one, and each piece's pages are released
    once both are done (resident memory stays flat).  Digests the source knows already
    (:func:`known_digest`: the range's and every span's, each span inside the range) are not
    computed again."""
    end = start + length
    whole = known_digest(src, BLAKE3, start, length)
    if whole is not None and all(start <= a and a + n <= end for a, n in spans):
        spans_known = [known_digest(src, BLAKE3, a, n) for a, n in spans]
        if all(d is not None for d in spans_known):
            if progress:
                progress(length)
                progress(sum(n for _, n in spans))
            return whole, [d.hex() for d in spans_known]
    if not spans:  # only the range's hash: BLAKE3's own threads on both cores
        whole = _b3.blake3(max_threads=AUTO)
        for pos in range(start, end, PIECE):
            n = min(PIECE, end - pos)
            whole.update(src.buf[pos:pos + n])
            src.release(pos, n)
            if progress:
                progress(n)
        return whole.digest(), []
    # one thread each (the range's on the worker, the spans' here): measured on 2 cores, that
    # split hashes at the floor (two BLAKE3 passes with all threads); BLAKE3's own threads on top
    # only contend with each other (1.8x slower)
    whole = _b3.blake3()
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    hashers = [None] * len(spans)
    nxt = 0  # the next span (in offset order) not opened yet
    live: list[int] = []
    pos, behind = start, None  # behind: the piece the worker may still be hashing
    with BackgroundFeed(whole, depth=1) as feed:
        while pos < end:
            n = min(PIECE, end - pos)
            piece = src.buf[pos:pos + n]
            feed.update(piece)  # returns once the worker is done with the piece before
            if behind is not None:  # both hashers are past it: its pages can go
                src.release(*behind)
            while nxt < len(order) and spans[order[nxt]][0] < pos + n:
                live.append(order[nxt])
                nxt += 1
            still = []
            for i in live:
                a, size = spans[i]
                lo, hi = max(a, pos), min(a + size, pos + n)
                h = hashers[i] or _b3.blake3()
                if hi > lo:
                    h.update(piece[lo - pos:hi - pos])
                if a + size > pos + n:
                    hashers[i] = h
                    still.append(i)
                else:  # done: keep the digest, not the hasher (~2 KB each; 10^5 tensors in a shard)
                    hashers[i] = h.hexdigest()
            live = still
            behind = (pos, n)
            if progress:
                progress(n)
            pos += n
        feed.drain()
    if behind is not None:
        src.release(*behind)
    if progress:
        progress(sum(size for _, size in spans))
    return whole.digest(), [h if isinstance(h, str) else (h or _b3.blake3()).hexdigest() for h in hashers]


def range_pieces(src: Source, start: int, length: int):
    """A re-callable source of ``src.buf[start:start+length]`` in PIECE slices; each slice's whole
    pages are released once the consumer asks for the next one (RSS stays flat)."""
    def gen():
        pos, end = start, start + length
        while pos < end:
            n = min(PIECE, end - pos)
            yield src.buf[pos:pos + n]
            src.release(pos, n)
            pos += n
    return gen


def first_odd_bool(pieces: Iterable) -> tuple[int, int] | None:
    """The first byte other than 0 or 1 in the bytes of a bool tensor given as ``pieces``
    (bytes-like, in order; a PIECE at a time keeps memory flat): (its element index, its value),
    or None when every byte is 0 or 1."""
    k = 0
    for p in pieces:
        a = np.frombuffer(p, np.uint8)
        if a.size and int(a.max()) > 1:
            i = int(np.argmax(a > 1))
            return k + i, int(a[i])
        k += a.size
    return None


def odd_bool_message(k: int, byte: int) -> str:
    """What a finding says of bool element ``k`` held as ``byte`` (a format that allows any byte:
    a warning of validate --full; the C++ reader says the same words)."""
    return (f"bool element {k} is the byte {byte} (not 0 or 1): it reads as True, but formats that require 0 or 1 "
            "refuse it")
