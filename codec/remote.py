"""HTTP(S) byte access for remote AEROSETs (aeroset.md "v0.2", DECISIONS.md "AEROSET").

One :class:`Http` client per set: a urllib3 connection pool (keep-alive, thread-safe), Range
requests of at most ``max_range`` bytes run in parallel on a small thread pool, and every
answer checked before a byte of it is used:

- a Range request must be answered ``206`` with exactly the ``Content-Range`` asked for, of a
  file of the size the index gives; a ``200`` (a server ignoring Range) is an error, never a
  silent whole-file download; an encoded body (``Content-Encoding``) is refused;
- connection errors, timeouts, a transfer slower than ``min_rate`` after ``grace`` seconds and
  5xx/429 answers are retried with exponential backoff and jitter; a body cut short resumes
  from the first byte not yet received;
- other 4xx answers fail at once.

Every failure is a :class:`codec.errors.RemoteError` (or :class:`~codec.errors.LimitError`)
naming the URL and the first byte asked for; nothing else escapes.
"""
from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

import numpy as np
import urllib3
from urllib3.exceptions import HTTPError as _Urllib3Error

from schemas.aeroset import FORMAT, MAX_RANGE_BYTES, Rule

from . import errors as E

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)$")
#: a body is read in pieces of this size (progress and the stall check run between pieces)
_READ = 1 << 20


@dataclass
class HttpOptions:
    """How patient and how parallel the client is (all times in seconds)."""
    connect_timeout: float = 10.0
    #: longest wait for any single socket read
    read_timeout: float = 30.0
    #: attempts after the first, for retryable failures
    retries: int = 4
    #: first backoff; doubles per attempt (with jitter), capped at ``max_backoff``
    backoff: float = 0.25
    max_backoff: float = 8.0
    #: a transfer still under ``min_rate`` bytes/s after ``grace`` seconds is abandoned (and retried)
    min_rate: int = 16 * 1024
    grace: float = 10.0
    #: parallel Range requests
    workers: int = 8
    max_range: int = MAX_RANGE_BYTES
    max_redirects: int = 5


def check_url(url: str, what: str = "URL") -> str:
    """Only http:// and https:// URLs with a host [AEROSET-REMOTE]."""
    try:
        u = urlsplit(url)
    except ValueError as e:
        raise _fail(url, None, Rule.REMOTE, f"{what} is not a URL: {e}") from None
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800")
        raise _fail(url.encode("utf-8", "replace").decode(), None, Rule.REMOTE, f"{what} is not a usable URL") from None
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise _fail(repr(url), None, Rule.REMOTE, f"{what} contains spaces or control characters")
    if u.scheme.lower() not in ("http", "https") or not u.hostname:
        raise _fail(url, None, Rule.REMOTE, f"{what} must be an http:// or https:// URL")
    return url


def _fail(url: str, at: int | None, rule: str, msg: str, cls=E.RemoteError) -> E.FormatError:
    """A typed error about the file at ``url``, its first byte asked for at ``at``."""
    if rule == Rule.LIMIT:
        cls = E.LimitError
    return cls(FORMAT, at, "", rule, msg, source=url)


class _Retry(Exception):
    """A failure worth another attempt; ``got`` bytes of the body had arrived (and are kept)."""

    def __init__(self, why: str, got: int = 0):
        super().__init__(why)
        self.got = got


class Http:
    """A keep-alive HTTP client for whole small files and checked, parallel Range reads.

    ``stats`` counts ``requests`` (every request sent), ``range_requests``, ``retries`` and
    ``bytes`` received; tests and benchmarks read it.
    """

    def __init__(self, options: HttpOptions | None = None):
        self.options = o = options or HttpOptions()
        self._pool = urllib3.PoolManager(
            num_pools=16, maxsize=max(o.workers, 1), block=False,
            timeout=urllib3.Timeout(connect=o.connect_timeout, read=o.read_timeout),
            retries=urllib3.Retry(total=None, connect=0, read=0, status=0, other=0,
                                  redirect=o.max_redirects, raise_on_redirect=True),
            headers={"User-Agent": "modelcodec", "Accept-Encoding": "identity"})
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self.stats: Counter = Counter()

    # ------------------------------------------------------------------ whole files
    def get(self, url: str, limit: int) -> bytes:
        """A whole (small) file, refused before reading when it is over ``limit`` bytes."""
        check_url(url)
        attempt = 0
        while True:
            try:
                return self._get_once(url, limit)
            except _Retry as why:
                attempt = self._backoff(url, 0, attempt, why)

    def _get_once(self, url: str, limit: int) -> bytes:
        r = self._request(url, 0, None)
        try:
            self._check_status(r, url, 0, ranged=False)
            n = r.headers.get("Content-Length")
            if n is not None and n.isdigit() and int(n) > limit:
                raise _fail(url, None, Rule.LIMIT, f"the server says it is {n} bytes, over {limit}")
            data, t0 = bytearray(), time.monotonic()
            while True:
                piece = self._read(r, min(_READ, limit + 1 - len(data)) or 1, t0, len(data))
                if not piece:
                    break
                data += piece
                if len(data) > limit:
                    raise _fail(url, None, Rule.LIMIT, f"more than {limit} bytes")
            if n is not None and n.isdigit() and int(n) != len(data):
                raise _Retry(f"body ended after {len(data)} of {n} bytes")
            return bytes(data)
        finally:
            r.release_conn()

    # ------------------------------------------------------------------ ranges
    def fetch(self, wanted: list[tuple[str, int, int, int | None]], *,
              progress: Callable[[int], None] | None = None) -> list[memoryview]:
        """The bytes of each ``(url, start, length, file size or None)``, read with Range
        requests of at most ``max_range`` bytes, all of them in parallel."""
        bufs = [memoryview(np.empty(n, np.uint8)) for _, _, n, _ in wanted]  # every byte is written below
        step = self.options.max_range
        jobs = []
        for (url, start, n, size), buf in zip(wanted, bufs):
            check_url(url)
            for k in range(0, n, step):
                jobs.append(lambda url=url, mv=buf[k:k + step], at=start + k, size=size:
                            self._range(url, mv, at, size, progress))
        self.run(jobs)
        return bufs

    def size(self, url: str) -> int:
        """A file's size, from the Content-Range of a one-byte Range request."""
        check_url(url)
        attempt = 0
        while True:
            try:
                r = self._request(url, 0, "bytes=0-0")
                try:
                    self._check_status(r, url, 0, ranged=True)
                    m = _CONTENT_RANGE.match(r.headers.get("Content-Range", "").strip())
                    if m is None or m[3] == "*" or (int(m[1]), int(m[2])) != (0, 0):
                        raise _fail(url, 0, Rule.RANGE, "no usable Content-Range for bytes 0-0 "
                                            f"({r.headers.get('Content-Range')!r})")
                    return int(m[3])
                finally:
                    r.close()
            except _Retry as why:
                attempt = self._backoff(url, 0, attempt, why)

    def run(self, jobs: list[Callable[[], None]]) -> None:
        """Run jobs on the client's threads (inline when there is one, or when called from one
        of those threads: a job waiting for jobs queued behind it would deadlock); the first
        failure is raised once every started job has ended."""
        if len(jobs) <= 1 or self.options.workers <= 1 or getattr(self._local, "worker", False):
            for job in jobs:
                job()
            return
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.options.workers, thread_name_prefix="modelcodec-http",
                                                    initializer=self._mark_worker)
        futures = [self._executor.submit(job) for job in jobs]
        first = None
        for f in futures:
            if first is not None:
                f.cancel()
            try:
                f.result()
            except BaseException as e:  # noqa: BLE001 - re-raised below, after the others end
                if first is None:
                    first = e
        if first is not None:
            raise first

    def _mark_worker(self) -> None:
        self._local.worker = True

    def _range(self, url: str, out: memoryview, start: int, size: int | None, progress) -> None:
        """Fill ``out`` with the bytes at ``start``; a body cut short resumes where it stopped."""
        got, attempt = 0, 0
        while got < len(out):
            try:
                got += self._range_once(url, out[got:], start + got, size, progress)
            except _Retry as why:
                got += why.got
                if got < len(out):
                    attempt = self._backoff(url, start + got, attempt, why)

    def _range_once(self, url: str, out: memoryview, start: int, size: int | None, progress) -> int:
        end = start + len(out) - 1
        r = self._request(url, start, f"bytes={start}-{end}")
        got = 0
        try:
            self._check_status(r, url, start, ranged=True)
            self._check_content_range(r, url, start, end, size)
            t0 = time.monotonic()
            while got < len(out):
                piece = self._read(r, min(_READ, len(out) - got), t0, got)
                if not piece:
                    break
                out[got:got + len(piece)] = piece
                got += len(piece)
                if progress is not None:
                    progress(len(piece))
            if got < len(out):
                raise _Retry(f"body ended after {got} of {len(out)} bytes")
            if self._read(r, 1, t0, got):  # a body longer than the range (no Content-Length)
                r.close()
                raise _fail(url, start, Rule.RANGE, f"the server sent more than the {len(out)} bytes asked for")
            return got
        except _Retry as why:
            r.close()  # never hand a half-read connection back to the pool
            why.got = got  # keep what arrived: the next attempt asks for the rest only
            raise
        finally:
            r.release_conn()

    # ------------------------------------------------------------------ plumbing
    def _request(self, url: str, start: int, range_header: str | None):
        headers = {"Range": range_header} if range_header else None
        self._count("requests")
        if range_header:
            self._count("range_requests")
        try:
            return self._pool.request("GET", url, headers=headers, preload_content=False, decode_content=False)
        except urllib3.exceptions.MaxRetryError as e:  # redirects exhausted, or the reason below
            reason = e.reason
            if isinstance(reason, urllib3.exceptions.ResponseError) or reason is None:
                raise _fail(url, start, Rule.HTTP, f"too many redirects: {e}") from None
            raise _Retry(f"{type(reason).__name__}: {reason}") from None
        except urllib3.exceptions.LocationValueError as e:
            raise _fail(url, start, Rule.REMOTE, f"bad URL: {e}") from None
        except (_Urllib3Error, OSError) as e:
            raise _Retry(f"{type(e).__name__}: {e}") from None

    def _read(self, r, n: int, t0: float, got: int) -> bytes:
        """Up to ``n`` bytes of the body, what has arrived; a transfer that has run past
        ``grace`` seconds below ``min_rate`` bytes/s is abandoned (to be retried)."""
        try:
            data = r.read1(n)
        except (_Urllib3Error, OSError) as e:
            raise _Retry(f"{type(e).__name__}: {e}") from None
        self._count("bytes", len(data))
        o, elapsed = self.options, time.monotonic() - t0
        if elapsed > o.grace and (got + len(data)) / elapsed < o.min_rate:
            raise _Retry(f"transfer too slow ({(got + len(data)) / elapsed:.0f} B/s after {elapsed:.1f} s)")
        return data

    def _check_status(self, r, url: str, start: int, *, ranged: bool) -> None:
        s = r.status
        if s >= 500 or s == 429:
            r.close()
            raise _Retry(f"HTTP {s}")
        if ranged and s == 200:
            r.close()  # do not download the whole file
            raise _fail(url, start, Rule.RANGE,
                                "the server answered 200 (the whole file) to a Range request: it does not "
                                "support Range requests")
        if s != (206 if ranged else 200):
            r.close()
            what = "not found" if s == 404 else ("range outside the file" if s == 416 else "unexpected status")
            raise _fail(url, start, Rule.RANGE if s == 416 else Rule.HTTP, f"HTTP {s} ({what})")
        enc = r.headers.get("Content-Encoding", "identity").lower()
        if enc not in ("identity", ""):
            r.close()
            raise _fail(url, start, Rule.HTTP, f"the server sent an encoded body ({enc})")

    def _check_content_range(self, r, url: str, start: int, end: int, size: int | None) -> None:
        cr = r.headers.get("Content-Range", "")
        m = _CONTENT_RANGE.match(cr.strip())
        problem = None
        if m is None:
            problem = f"a 206 answer without a valid Content-Range ({cr!r})"
        elif (int(m[1]), int(m[2])) != (start, end):
            problem = f"asked for bytes {start}-{end}, the server sent {m[1]}-{m[2]}"
        elif size is not None and m[3] != "*" and int(m[3]) != size:
            problem = f"the file is {m[3]} bytes on the server, the index says {size}"
        else:
            n = r.headers.get("Content-Length")
            if n is not None and n.strip() != str(end - start + 1):
                problem = f"Content-Length {n} for a range of {end - start + 1} bytes"
        if problem:
            r.close()
            raise _fail(url, start, Rule.RANGE, problem)

    def _backoff(self, url: str, at: int, attempt: int, why: Exception) -> int:
        o = self.options
        if attempt >= o.retries:
            raise _fail(url, at, Rule.HTTP,
                                f"failed after {attempt + 1} attempts: {why}") from None
        self._count("retries")
        delay = min(o.max_backoff, o.backoff * 2 ** attempt)
        time.sleep(delay / 2 + random.random() * delay / 2)
        return attempt + 1

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.stats[what] += n

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        self._pool.clear()

    def __enter__(self) -> "Http":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

