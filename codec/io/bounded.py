"""A bounded, hashed reader over a stored payload: what a reader inflates is never more than the
bytes it declares, and every byte it hands out is hashed."""
from __future__ import annotations


class BoundedReader:
    """``read(n)`` over ``src`` -- a bytes-like object, or a stream with ``read(n)`` (a zstd
    stream reader) -- that never hands out more than ``limit`` bytes, feeds every byte it hands
    out to ``hasher`` (when given), and turns any error of the stream into ``on_error(exc)``
    (a FormatError).  ``drain()`` reads what is left (at most ``limit + 1`` bytes in all), so
    that ``count``, ``over`` and the hash describe the whole payload.

    ``ahead`` (bytes, streams only): the next piece of that size is read from ``src`` and
    hashed on a worker thread while the caller works on the one before (inflating and hashing
    release the GIL).  What the caller sees is the same: the same bytes, and an error of the
    stream raised by the read that would have met it."""

    def __init__(self, src, limit: int, hasher=None, on_error=None, ahead: int = 0):
        self._mem = None if hasattr(src, "read") else memoryview(src).cast("B")
        self._src = src
        self._pos = 0
        self.limit = limit
        self.count = 0
        self.over = False
        self.hasher = hasher
        self._on_error = on_error
        self._ahead = ahead if self._mem is None else 0
        self._fetched = 0  # bytes read from src (ahead: by the worker)
        self._piece = b""  # (ahead) what the caller has not taken of the last piece
        self._next = None  # (ahead) the worker's read of the next piece
        self._pool = None

    def _read_src(self, n: int) -> bytes:
        """``n`` bytes of the stream; its error as ``on_error`` makes it (when given)."""
        try:
            return self._src.read(n)
        except Exception as e:
            if self._on_error is None:
                raise
            raise self._on_error(e) from None

    def _fetch(self) -> bytes:
        """(worker) The next piece of ``src`` (never past ``limit + 1`` bytes in all), hashed."""
        k = min(self._ahead, self.limit + 1 - self._fetched)
        if k <= 0:
            return b""
        b = self._read_src(k)
        keep = max(0, min(len(b), self.limit - self._fetched))
        self._fetched += len(b)
        if self.hasher is not None and keep:
            self.hasher.update(b if keep == len(b) else b[:keep])
        return b

    def _take(self, n: int) -> bytes:
        """``n`` bytes (fewer only at the stream's end), from the pieces the worker read."""
        parts, need = [], n
        while need:
            if not self._piece and not self._next_piece():
                break
            b = self._piece
            if len(b) > need:
                b, self._piece = b[:need], b[need:]
            else:
                self._piece = b""
            parts.append(b)
            need -= len(b)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _next_piece(self) -> bool:
        """The worker's next piece as ``_piece`` (and the one after it asked for); False at the end."""
        if self._next is None:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="modelcodec-inflate")
            self._next = self._pool.submit(self._fetch)
        fut, self._next = self._next, None
        self._piece = fut.result()  # (the stream's error, where the caller meets it)
        if not self._piece:
            self._close()
            return False
        if self._fetched <= self.limit:  # read on while the caller works
            self._next = self._pool.submit(self._fetch)
        else:
            self._close()
        return True

    def _close(self) -> None:
        if self._pool is not None and self._next is None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def read(self, n: int = -1) -> bytes:
        room = self.limit + 1 - self.count  # one byte more than allowed shows an overrun
        n = room if n is None or n < 0 else min(n, room)
        if n <= 0:
            return b""
        if self._mem is not None:
            b = bytes(self._mem[self._pos:self._pos + n])
            self._pos += len(b)
        elif self._ahead:
            b = self._take(n)  # (hashed by the worker)
        else:
            b = self._read_src(n)
        self.count += len(b)
        if self.count > self.limit:
            self.over = True
            b = b[:len(b) - (self.count - self.limit)]
        if self.hasher is not None and b and not self._ahead:
            self.hasher.update(b)
        return b

    def drain(self) -> None:
        while not self.over and self.read(1 << 20):
            pass
