"""The disk cache of byte ranges read from remote files (DECISIONS.md, remote sets).

- Where: ``$MODELCODEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/modelcodec`` or ``~/.cache/modelcodec``;
  entries under ``ranges/<2 hex>/<64 hex>``.
- Key: SHA-256 of (URL, start, length, tag), the tag being the part's sha256 when the index
  gives one, so a changed part never returns stale bytes.
- Entry: the bytes, then their BLAKE3-256 (32 bytes).  A read checks the length and the digest;
  a corrupt or torn entry is deleted and reported as a miss, so the caller fetches it again.
  (Because every read is checked, a write needs no fsync: a crash leaves at worst an entry
  that fails its check.)
- Writes go to a unique temporary name in the entry's directory, then ``os.replace`` —
  several processes can share one cache: a reader sees a whole entry or none.
- LRU by last use (a hit touches the entry's mtime); when the total goes over ``max_bytes``
  (``$MODELCODEC_CACHE_MAX_BYTES``, 2 GiB by default) the least recently used entries are
  deleted, under an advisory lock so two processes do not evict at once.  Each process
  re-measures the total on disk at least every 2 s and whenever its own count goes over the
  cap, so with several processes writing at once the cap can be passed by what the others
  wrote since (until the next measurement).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from collections import Counter

import numpy as np

from .. import errors as E
from .integrity import blake3_bytes
from .sources import open_regular

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: eviction runs without the lock
    fcntl = None

DEFAULT_MAX_BYTES = 2 * 1024**3
DIGEST = 32
#: the total is re-measured on disk at least this often (other processes add entries too)
_RESCAN_SECONDS = 2.0
#: temporary files older than this are left-overs of a killed writer
_STALE_TMP_SECONDS = 3600
_TMP = ".tmp-"


def default_dir() -> str:
    d = os.environ.get("MODELCODEC_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "modelcodec")


def default_max_bytes() -> int:
    v = os.environ.get("MODELCODEC_CACHE_MAX_BYTES")
    if v is None or v == "":
        return DEFAULT_MAX_BYTES
    try:
        n = int(v)
        if n < 0:
            raise ValueError
    except ValueError:
        raise E.UsageError(f"MODELCODEC_CACHE_MAX_BYTES must be a number of bytes (got {v!r})") from None
    return n


def _touch(path: str) -> None:
    """Mark an entry used now, to the nanosecond (file times set by writes are coarser: entries
    written in the same few milliseconds would tie in the LRU order)."""
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except OSError:
        pass


class RangeCache:
    """``get(key, length)`` / ``put(key, data)`` over checked entry files (see the module doc).
    ``stats`` counts hits, misses, corrupt entries, writes and evictions."""

    def __init__(self, root: str | os.PathLike | None = None, max_bytes: int | None = None):
        self.root = os.path.abspath(os.fspath(root) if root is not None else default_dir())
        self.max_bytes = default_max_bytes() if max_bytes is None else int(max_bytes)
        self._dir = os.path.join(self.root, "ranges")
        self._lock = threading.Lock()
        self._total: int | None = None
        self._scanned = 0.0
        self.stats: Counter = Counter()

    @staticmethod
    def key(url: str, start: int, length: int, tag: str = "") -> str:
        return hashlib.sha256(json.dumps([url, start, length, tag]).encode()).hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self._dir, key[:2], key)

    def get(self, key: str, length: int, expect: bytes | None = None) -> memoryview | None:
        """The entry's bytes, or None (missing, or corrupt and now deleted).  ``expect``: the
        BLAKE3-256 the bytes must have (a tensor's hash_b3) — an entry hashing to anything
        else, whatever its own trailer says, is deleted."""
        path = self._path(key)
        try:
            with open_regular(path, "cache entry") as f:  # a FIFO planted in the cache cannot block
                if os.fstat(f.fileno()).st_size != length + DIGEST:
                    raise ValueError("wrong size")
                buf = memoryview(np.empty(length + DIGEST, np.uint8))
                if f.readinto(buf) != len(buf):
                    raise ValueError("short read")
        except E.UsageError:
            if not os.path.lexists(path):
                self._count("misses")
                return None
            self._drop(path)
            return None
        except (OSError, ValueError):
            self._drop(path)
            return None
        data = buf[:length]
        digest = blake3_bytes(data)
        if digest != bytes(buf[length:]) or (expect is not None and digest != expect):
            self._drop(path)
            return None
        _touch(path)
        self._count("hits")
        return data

    def drop(self, key: str) -> None:
        """Delete an entry its user found wrong (counted as corrupt)."""
        self._drop(self._path(key))

    def _drop(self, path: str) -> None:
        self._count("corrupt")
        try:
            os.unlink(path)
        except OSError:
            pass

    def put(self, key: str, data, digest: bytes | None = None) -> bool:
        """Store ``data`` (skipped when it alone would take over half the cache).  ``digest``:
        its BLAKE3-256 when the caller has just computed it (a verified hash_b3)."""
        n = len(data)
        if self.max_bytes <= 0 or n + DIGEST > self.max_bytes // 2:
            return False
        path = self._path(key)
        d = os.path.dirname(path)
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP, dir=d)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.write(digest if digest is not None else blake3_bytes(data))
                os.replace(tmp, path)
                _touch(path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:  # a full or read-only disk costs the cache, never the read
            self._count("write_errors")
            return False
        self._count("writes")
        with self._lock:
            if self._total is not None:
                self._total += n + DIGEST
        self._maybe_evict()
        return True

    # ------------------------------------------------------------------ size cap
    def _entries(self) -> list[tuple[float, int, str]]:
        """(mtime, size, path) of every entry; stale temporary files are removed."""
        out, now = [], time.time()
        try:
            subdirs = list(os.scandir(self._dir))
        except FileNotFoundError:
            return out
        for sd in subdirs:
            if not sd.is_dir(follow_symlinks=False):
                continue
            try:
                files = list(os.scandir(sd.path))
            except OSError:
                continue
            for f in files:
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                if f.name.startswith(_TMP):
                    if now - st.st_mtime > _STALE_TMP_SECONDS:
                        try:
                            os.unlink(f.path)
                        except OSError:
                            pass
                    continue
                out.append((st.st_mtime_ns, st.st_size, f.path))
        return out

    def size(self) -> int:
        """Bytes the entries take now (measured on disk)."""
        return sum(s for _, s, _ in self._entries())

    def _maybe_evict(self) -> None:
        with self._lock:
            due = self._total is None or self._total > self.max_bytes or \
                time.monotonic() - self._scanned > _RESCAN_SECONDS
        if due:
            self.evict()

    def evict(self, max_bytes: int | None = None) -> int:
        """Delete least recently used entries until the total is at most ``max_bytes``; returns
        the bytes now in the cache.  Processes sharing the cache take turns (advisory lock)."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        os.makedirs(self.root, exist_ok=True)
        with open(os.path.join(self.root, ".lock"), "a+b") as lock:
            if fcntl is not None:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            entries = self._entries()
            total = sum(s for _, s, _ in entries)
            if total > limit:
                for _, s, path in sorted(entries):
                    try:
                        os.unlink(path)
                    except OSError:
                        continue
                    total -= s
                    self._count("evictions")
                    if total <= limit:
                        break
        with self._lock:
            self._total, self._scanned = total, time.monotonic()
        return total

    def clear(self) -> None:
        self.evict(0)

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1
