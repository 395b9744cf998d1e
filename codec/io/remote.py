"""HTTP(S) byte access for remote files (the rules of ``schemas.http``).

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
import socket
import threading
import time
from collections import Counter
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urljoin, urlsplit

import numpy as np
import urllib3
from urllib3.exceptions import HTTPError as _Urllib3Error

from ..schemas.http import DEADLINE_SECONDS, FORMAT, MAX_FILE_BYTES, MAX_RANGE_BYTES, MAX_TENSOR_BYTES, Rule

from .. import errors as E
from ..ui.display import plural

_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,20})-([0-9]{1,20})/([0-9]{1,20}|\*)$", re.ASCII)
CONTENT_RANGE_TOTAL = re.compile(r"bytes (?:[0-9]{1,20}-[0-9]{1,20}|\*)/([0-9]{1,20})$", re.ASCII)  # 206 or 416
_REDIRECTS = (301, 302, 303, 307, 308)


def _length(r) -> int | None:
    """The Content-Length header as a number (None when absent or not a plain number)."""
    n = (r.headers.get("Content-Length") or "").strip()
    return int(n) if n.isascii() and n.isdigit() and len(n) <= 20 else None


#: a body is read in pieces of this size (progress and the stall check run between pieces)
_READ = 1 << 20


#: how urllib3 names a connection in its errors (``<_WatchedHTTPConnection(host='h', port=1)>``, our
#: internal class among them): the error says ``h:1`` instead
_CONNECTION_NAME = re.compile(r"<?\w*HTTPS?Connection\w*\(host='([^']*)', port=(\w+)\)(?: at 0x[0-9a-f]+)?>?")


def _failure_text(e: BaseException) -> str:
    """A failed request's reason for people: the error's kind and message, the connection
    named by its host and port (no internal class name)."""
    return f"{type(e).__name__}: " + _CONNECTION_NAME.sub(lambda m: f"{m.group(1)}:{m.group(2)}", str(e))


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
    #: longest wait for a whole response head (status line, headers, 1xx answers)
    head_timeout: float = 30.0
    #: parallel Range requests
    workers: int = 8
    max_range: int = MAX_RANGE_BYTES
    max_redirects: int = 5
    #: longest time one request may take, all its attempts, backoffs and timeouts included (a
    #: server that accepts connections and never answers fails after this, not after every
    #: attempt's timeouts in turn)
    deadline: float = DEADLINE_SECONDS


def check_url(url: str, what: str = "URL") -> str:
    """Only http:// and https:// URLs with a host [HTTP-URL]."""
    try:
        u = urlsplit(url)
    except ValueError as e:
        raise _fail(url, None, Rule.URL, f"{what} is not a URL: {e}") from None
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800")
        raise _fail(url.encode("utf-8", "replace").decode(), None, Rule.URL, f"{what} is not a usable URL") from None
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise _fail(repr(url), None, Rule.URL, f"{what} contains spaces or control characters")
    if u.scheme.lower() not in ("http", "https") or not u.hostname:
        raise _fail(url, None, Rule.URL, f"{what} must be an http:// or https:// URL")
    return url


def _fail(url: str, at: int | None, rule: str, msg: str, cls=E.RemoteError) -> E.FormatError:
    """A typed error about reading the file at ``url`` (its source), its first byte asked for at
    ``at``: the transport's finding (its rules and its format, ``schemas.http``), whatever the
    file is -- a failure to read a file is no finding about its data; the URL names the file."""
    if rule == Rule.LIMIT:
        cls = E.LimitError
    return cls(FORMAT, at, "", rule, msg, source=url)


def check_tensor_bytes(fmt: str, t, url: str, limit: int = MAX_TENSOR_BYTES) -> None:
    """A tensor read from a remote file is held in memory once read: a LimitError (the format's,
    rule HTTP-TENSOR-LIMIT) when its byte count ``t.nbytes`` is over ``limit``, before any of it
    is fetched."""
    if t.nbytes > limit:
        raise E.LimitError(fmt, t.offset, f"tensor {t.name!r}", Rule.TENSOR_LIMIT,
                           f"is {t.nbytes} bytes, over max_tensor_bytes={limit}",
                           expected=limit, actual=t.nbytes).with_source(url)


class _Watchdog:
    """One daemon thread that shuts down the socket of any connection whose response head
    has not fully arrived by its deadline (a per-read timeout cannot bound a head trickled a
    byte at a time, or an endless stream of 1xx answers)."""

    def __init__(self):
        self._armed: dict[int, tuple[float, object]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def arm(self, conn, seconds: float) -> int:
        with self._lock:
            self._armed[id(conn)] = (time.monotonic() + seconds, conn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="modelcodec-http-watchdog", daemon=True)
                self._thread.start()
        return id(conn)

    def disarm(self, token: int) -> bool:
        """Stop watching; True when the deadline had passed (the socket was shut down)."""
        with self._lock:
            return self._armed.pop(token, None) is None

    def _run(self) -> None:
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            with self._lock:
                late = [c for t, (d, c) in list(self._armed.items()) if d < now and self._armed.pop(t)]
            for conn in late:
                sock = getattr(conn, "sock", None)
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


_WATCHDOG = _Watchdog()


#: per thread: when the request under way must have ended (time.monotonic()), or None
_UNTIL = threading.local()


def _left(default: float) -> float:
    """``default`` seconds, or less when the current request's deadline is nearer."""
    until = getattr(_UNTIL, "at", None)
    return default if until is None else max(0.01, min(default, until - time.monotonic()))


class _WatchedHead:
    """Mixed into urllib3's connection classes: the response head is read under the watchdog."""
    head_timeout = 30.0

    def getresponse(self, *args, **kwargs):
        token = _WATCHDOG.arm(self, _left(self.head_timeout))
        try:
            resp = super().getresponse(*args, **kwargs)
        finally:
            late = _WATCHDOG.disarm(token)
        if late:  # what was parsed is whatever arrived before the shutdown: never a response
            resp.close()
            raise urllib3.exceptions.ProtocolError(f"no complete response head in time ({self.head_timeout} s at most)")
        return resp


#: what a server without Range requests means for the command that met it (every NoRangeError
#: says it: a single file, a file of a model in several, a set)
NO_RANGE_HINT = ("reading parts of the model needs a copy that is here (`modelcodec mirror URL DIR`, or any "
                 "downloader); commands that read all of it (validate --full, load, convert, mirror) download it "
                 "once")


class NoRangeError(E.RemoteError):
    """The server does not answer Range requests (a limitation of the server, not bad data):
    commands that read the whole file download it instead (:meth:`Http.download`); reading
    parts of it needs a copy that is here -- its message says so (NO_RANGE_HINT), whatever the
    file is and whichever reader met it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if NO_RANGE_HINT not in self.message:
            self.message = f"{self.message}; {NO_RANGE_HINT}"


class SizeMismatchError(E.RemoteError):
    """The file on the server is not of the size its reader was told (``expected``: an
    index's; ``actual``: the server's, from a Content-Range): a multi-file model's index and its
    file disagree -- the model's data, which its reader reports under its own rule."""


def size_mismatch(url: str, at: int | None, expected: int, actual: int | None) -> SizeMismatchError:
    """The :class:`SizeMismatchError` of the file at ``url`` (``actual`` bytes, ``expected`` said)."""
    e = _fail(url, at, Rule.RANGE, f"the file is {'*' if actual is None else actual} bytes on the server, the index "
              f"says {expected}", SizeMismatchError)
    e.expected, e.actual = expected, actual
    return e


class NotThereError(E.RemoteError):
    """The store says there is no file at the URL (HTTP 404 or 410; an object store's "no such
    key"): the one failure that means a file is missing.  Every other failure (a 5xx, a refused
    connection, a timeout, a refused credential) says nothing of whether it is there."""


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
            retries=False,  # retries and redirects are ours (below)
            headers={"User-Agent": "modelcodec", "Accept-Encoding": "identity"})
        # every response head (status line, headers, interim 1xx answers) must arrive within
        # head_timeout, however slowly a server trickles it
        conns = {"http": urllib3.connection.HTTPConnection, "https": urllib3.connection.HTTPSConnection}
        self._pool.pool_classes_by_scheme = {
            scheme: type(f"_Watched{cls.__name__}", (cls,), {"ConnectionCls": type(
                f"_Watched{conns[scheme].__name__}", (_WatchedHead, conns[scheme]), {"head_timeout": o.head_timeout})})
            for scheme, cls in (("http", urllib3.HTTPConnectionPool), ("https", urllib3.HTTPSConnectionPool))}
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        #: url -> the strong ETag of its first ranged answer (later reads send it as If-Range)
        self._etags: dict[str, str] = {}
        self.stats: Counter = Counter()

    # ------------------------------------------------------------------ whole files
    def get(self, url: str, limit: int) -> bytes:
        """A whole (small) file, refused before reading when it is over ``limit`` bytes."""
        return self._retrying(url, lambda: self._get_once(url, limit))

    def _retrying(self, url: str, attempt_once: Callable[[], object]):
        """``attempt_once()`` until it does not ask for a retry (or the retries run out)."""
        check_url(url)
        attempt = 0
        with self._deadline():
            while True:
                try:
                    return attempt_once()
                except _Retry as why:
                    attempt = self._backoff(url, 0, attempt, why)

    @contextmanager
    def _deadline(self):
        """The current thread's request must end within ``options.deadline`` seconds."""
        outer = getattr(_UNTIL, "at", None)
        _UNTIL.at = time.monotonic() + self.options.deadline
        try:
            yield
        finally:
            _UNTIL.at = outer

    def _get_once(self, url: str, limit: int) -> bytes:
        data = bytearray()
        self._body(url, limit, data.extend)
        return bytes(data)

    def _body(self, url: str, limit: int, write: Callable[[bytes], object],
              progress: Callable[[int], None] | None = None) -> int:
        """One GET of the whole file, its body handed to ``write`` a piece at a time: refused
        over ``limit`` bytes (before reading, when the server says so), its length checked
        against Content-Length (short: a retry).  Returns the number of bytes."""
        r = self._request(url, 0, None)
        try:
            self._check_status(r, url, 0, ranged=False)
            n = _length(r)
            if n is not None and n > limit:
                raise self._fail(url, None, Rule.LIMIT, f"the server says it is {n} bytes, over {limit}")
            got, t0 = 0, time.monotonic()
            while True:
                piece = self._read(r, min(_READ, limit + 1 - got) or 1, t0, got)
                if not piece:
                    break
                got += len(piece)
                if got > limit:
                    raise self._fail(url, None, Rule.LIMIT, f"more than {limit} bytes")
                write(piece)
                if progress is not None:
                    progress(len(piece))
            if n is not None and n != got:
                raise _Retry(f"body ended after {got} of {n} bytes")
            return got
        except (_Retry, E.FormatError):
            r.close()  # never hand a half-read connection back to the pool
            raise
        finally:
            r.release_conn()

    def _fail(self, url: str, at: int | None, rule: str, msg: str, cls=E.RemoteError) -> E.FormatError:
        return _fail(url, at, rule, msg, cls)

    def download(self, url: str, f, limit: int = MAX_FILE_BYTES, progress: Callable[[int], None] | None = None) -> int:
        """The whole file streamed into the open binary file ``f`` (for a server that does not
        answer Range requests): one GET, read a piece at a time (bounded memory), its length
        checked against Content-Length; a failed attempt starts again from the first byte.
        Returns the number of bytes written."""
        def once() -> int:
            f.seek(0)
            f.truncate()
            return self._body(url, limit, f.write, progress)
        return self._retrying(url, once)

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
        return self._retrying(url, lambda: self._size_once(url))

    def _size_once(self, url: str) -> int:
        r = self._request(url, 0, "bytes=0-0")
        try:
            self._check_status(r, url, 0, ranged=True)
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", "").strip())
            if m is None or m[3] == "*" or (int(m[1]), int(m[2])) != (0, 0):
                raise self._fail(url, 0, Rule.RANGE, f"no usable Content-Range for bytes 0-0 "
                            f"({r.headers.get('Content-Range')!r})")
            if int(m[3]) > MAX_FILE_BYTES:  # before anything is sized from it
                raise self._fail(url, 0, Rule.LIMIT, f"the server says the file is {E.show_int(int(m[3]))} bytes, "
                                 f"over the {E.show_int(MAX_FILE_BYTES)} a remote file may have")
            return int(m[3])
        finally:
            r.close()

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
        try:
            futures = [self._executor.submit(job) for job in jobs]
        except RuntimeError:  # close() ran on another thread
            raise E.UsageError("the client was closed while reading") from None
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
        with self._deadline():
            while got < len(out):
                try:
                    got += self._range_once(url, out[got:], start + got, size, progress)
                except _Retry as why:
                    got += why.got
                    if got < len(out):
                        attempt = self._backoff(url, start + got, attempt, why)

    def _range_once(self, url: str, out: memoryview, start: int, size: int | None, progress) -> int:
        end = start + len(out) - 1
        etag = self._etags.get(url)
        r = self._request(url, start, f"bytes={start}-{end}", if_range=etag)
        got = 0
        try:
            self._check_status(r, url, start, ranged=True, changed=etag is not None, size=size)
            self._check_content_range(r, url, start, end, size)
            self._check_etag(r, url, start)
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
                raise self._fail(url, start, Rule.RANGE, f"the server sent more than the {len(out)} bytes asked for")
            return got
        except _Retry as why:
            r.close()  # never hand a half-read connection back to the pool
            why.got = got  # keep what arrived: the next attempt asks for the rest only
            raise
        finally:
            r.release_conn()

    # ------------------------------------------------------------------ plumbing
    def _request(self, url: str, start: int, range_header: str | None, if_range: str | None = None):
        """Send a GET; redirects are followed here, each target checked (http/https only, never
        from https down to http)."""
        headers = {"Range": range_header} if range_header else None
        if headers and if_range:
            headers["If-Range"] = if_range
        target = url
        o = self.options
        for _ in range(o.max_redirects + 1):
            if getattr(_UNTIL, "at", None) is not None and time.monotonic() >= _UNTIL.at:
                raise self._fail(url, start, Rule.REQUEST, f"no answer within the deadline of {o.deadline} s")
            self._count("requests")
            if range_header:
                self._count("range_requests")
            try:
                r = self._pool.request("GET", target, headers=headers, preload_content=False, decode_content=False,
                                       redirect=False, timeout=urllib3.Timeout(connect=_left(o.connect_timeout),
                                                                               read=_left(o.read_timeout)))
            except urllib3.exceptions.LocationValueError as e:
                raise self._fail(url, start, Rule.URL, f"bad URL {target!r}: {e}") from None
            except (_Urllib3Error, OSError) as e:
                raise _Retry(_failure_text(e)) from None
            except ValueError as e:  # a URL urllib3 cannot take apart
                raise self._fail(url, start, Rule.URL, f"bad URL {target!r}: {e}") from None
            loc = r.headers.get("Location")
            if r.status not in _REDIRECTS or not loc:
                return r
            r.close()
            try:
                nxt = urljoin(target, loc)
            except ValueError as e:
                raise self._fail(url, start, Rule.URL, f"bad redirect target {loc!r}: {e}") from None
            check_url(nxt, "redirect target")
            if urlsplit(target).scheme.lower() == "https" and urlsplit(nxt).scheme.lower() != "https":
                raise self._fail(url, start, Rule.URL, f"redirect from https to {nxt!r} refused")
            target = nxt
        raise self._fail(url, start, Rule.REQUEST, f"more than {self.options.max_redirects} redirects")

    def _read(self, r, n: int, t0: float, got: int) -> bytes:
        """Up to ``n`` bytes of the body, what has arrived; a transfer that has run past
        ``grace`` seconds below ``min_rate`` bytes/s is abandoned (to be retried)."""
        try:
            data = r.read1(n)
        except (_Urllib3Error, OSError) as e:
            raise _Retry(_failure_text(e)) from None
        self._count("bytes", len(data))
        until = getattr(_UNTIL, "at", None)
        if until is not None and time.monotonic() > until:
            raise _Retry(f"the deadline of {self.options.deadline} s passed while reading")
        o, elapsed = self.options, time.monotonic() - t0
        if elapsed > o.grace and (got + len(data)) / elapsed < o.min_rate:
            raise _Retry(f"transfer too slow ({(got + len(data)) / elapsed:.0f} B/s after {elapsed:.1f} s)")
        return data

    def _check_status(self, r, url: str, start: int, *, ranged: bool, changed: bool = False,
                      size: int | None = None) -> None:
        s = r.status
        if s >= 500 or s == 429:
            r.close()
            raise _Retry(f"HTTP {s}")
        enc = r.headers.get("Content-Encoding", "identity").lower()
        if ranged and size is not None and not changed and enc in ("identity", ""):  # (first: of another size?)
            m = CONTENT_RANGE_TOTAL.match(r.headers.get("Content-Range", "").strip())  # (a 200 without bytes: empty)
            total = 0 if s == 200 and _length(r) == 0 else int(m[1]) if s == 416 and m else None
            if total is not None and total != size:
                r.close()
                raise size_mismatch(url, start, size, total)
        if ranged and s == 200:
            r.close()  # do not download the whole file
            if changed:
                raise self._fail(url, start, Rule.RANGE, "the file changed on the server since it was first read "
                                 "(If-Range answered with the whole file)")
            raise self._fail(url, start, Rule.RANGE, "the server answered 200 (the whole file) to a Range request: "
                             "it does not support Range requests", NoRangeError)
        if s != (206 if ranged else 200):
            r.close()
            what = {404: "not found", 410: "gone", 416: "range outside the file"}.get(s, "unexpected status")
            raise self._fail(url, start, Rule.RANGE if s == 416 else Rule.REQUEST, f"HTTP {s} ({what})",
                             NotThereError if s in (404, 410) else E.RemoteError)
        if enc not in ("identity", ""):
            r.close()
            raise self._fail(url, start, Rule.REQUEST, f"the server sent an encoded body ({enc})")

    def _check_content_range(self, r, url: str, start: int, end: int, size: int | None) -> None:
        cr = r.headers.get("Content-Range", "")
        m = _CONTENT_RANGE.match(cr.strip())
        problem = None
        if m is None:
            problem = f"a 206 answer without a valid Content-Range ({cr!r})"
        elif size is not None and m[3] != str(size):  # (first: a range past its end is cut short)
            r.close()
            raise size_mismatch(url, start, size, int(m[3]) if m[3] != "*" else None)
        elif (int(m[1]), int(m[2])) != (start, end):
            problem = f"asked for bytes {start}-{end}, the server sent {m[1]}-{m[2]}"
        elif r.headers.get("Content-Length") is not None and _length(r) != end - start + 1:
            problem = f"Content-Length {r.headers.get('Content-Length')!r} for a range of {end - start + 1} bytes"
        if problem:
            r.close()
            raise self._fail(url, start, Rule.RANGE, problem)

    def _check_etag(self, r, url: str, start: int) -> None:
        """A file's strong ETag must not change between the reads of one client (a resumed or
        later range of a re-published file would splice two versions)."""
        tag = r.headers.get("ETag")
        if not tag or tag.startswith("W/"):
            return
        with self._lock:
            first = self._etags.setdefault(url, tag)
        if first != tag:
            r.close()
            raise self._fail(url, start, Rule.RANGE, f"the file changed on the server while being read (ETag {first} "
                        f"then {tag})")

    def _backoff(self, url: str, at: int, attempt: int, why: Exception) -> int:
        o = self.options
        if attempt >= o.retries:
            raise self._fail(url, at, Rule.REQUEST,
                                f"failed after {plural(attempt + 1, 'attempt')}: {why}") from None
        delay = min(o.max_backoff, o.backoff * 2 ** attempt)
        delay = delay / 2 + random.random() * delay / 2
        until = getattr(_UNTIL, "at", None)
        if until is not None and time.monotonic() + delay >= until:
            raise self._fail(url, at, Rule.REQUEST, f"failed after {plural(attempt + 1, 'attempt')} within the deadline "
                             f"of {o.deadline} s: {why}") from None
        self._count("retries")
        time.sleep(delay)
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

