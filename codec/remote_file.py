"""Any single model file behind a URL -- http(s), or object storage and any other fsspec
filesystem (``s3://``, ``gs://``, ``memory://`` ...) -- read through a :class:`codec.io.store.Store`
(format-blind).

``codec.open("https://host/model.<ext>")`` (or ``"s3://bucket/model.<ext>"``) opens the file
with the format's own reader over the bytes its structure needs, read with Range requests (``FormatDescriptor.open_ranges``:
each format reads its header and whatever control data it needs, in growing prefixes within a
limit); a tensor's bytes are read when it is asked for (one request per tensor, at most
``max_range`` bytes each, in parallel), through the same client as remote multi-file models
(:class:`codec.io.remote.Http`: checked ``206`` answers and
``Content-Range``, the file pinned by its ETag, retries with backoff, timeouts).

Trust: a single file carries no hash from a source other than itself, so nothing read from it
is trusted beyond the checks its format makes (a tensor is still checked against a hash its
file declares, on first read), and nothing of it is cached on disk -- the disk cache holds only
bytes verified against a hash from a trusted source (a set's index and its chain of hashes).
Whole-file work (``validate(full=True)``, load, convert) downloads the file to a temporary file
first (:meth:`RemoteFile.fetched`: 16 MiB ranges, or, from a store that streams a range, a few
long ranges streamed; bounded memory either way; one streamed GET from a server without Range
requests) and reads it there as a local file.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from .schemas.http import MAX_TENSOR_BYTES

from . import errors as E
from .io.remote import NoRangeError, check_tensor_bytes
from .io.store import MAX_COALESCED, tensor_limit
from .model import Reader, Report, TensorInfo
from .ui.display import plural
from .ui.progress import Progress

#: how many bytes the format is guessed from when the URL's name does not say
_SNIFF = 16
#: a download is fetched in ranges of this size (whole-file work costs about size / 16 MiB
#: requests), as many at a time as fit in _DOWNLOAD_WINDOW (the memory it holds)
_DOWNLOAD_PIECE = MAX_COALESCED
_DOWNLOAD_WINDOW = 2 * MAX_COALESCED
#: ... or, from a store that streams a range (:attr:`codec.io.store.Store.streams`), in as many
#: ranges of at least this size as it reads at once (on moto's server and on s3fs alike, a
#: request costs more than its bytes: fewer, longer ranges are faster)
_STREAM_PIECE = 8 * MAX_COALESCED
#: the hashing beside a download hashes at most _AHEAD_BUDGET x the file's size + _AHEAD_SLACK
#: bytes, each range counting _AHEAD_SPAN_COST more: a file's ranges cover it about once (twice
#: for a full validation: each chunk, and the tensors in it), where a hostile file's overlapping
#: ranges could ask for far more work than reading it -- before the reader fails at its first
#: bad hash
_AHEAD_BUDGET, _AHEAD_SLACK, _AHEAD_SPAN_COST = 2, 256 * 1024 * 1024, 1024
_SAID: set = set()


def _say_once(line: str) -> None:
    """A note on stderr, once per process and line."""
    if line not in _SAID:
        _SAID.add(line)
        print(f"modelcodec: note: {line}", file=sys.stderr)


def _download(store, url: str, size: int, f, progress, arrivals=None) -> None:
    """The bytes [0, size) of ``url`` written to ``f``: ranges of _DOWNLOAD_PIECE, as many in
    flight as fit in _DOWNLOAD_WINDOW (the memory it holds), each written at its offset as
    soon as it arrives and the next one asked for; each piece written told to ``arrivals``
    (a :class:`codec.io.arrivals.Arrivals`), for the hashing that follows the download."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    piece, lanes = _DOWNLOAD_PIECE, _DOWNLOAD_WINDOW // _DOWNLOAD_PIECE
    if store.streams:  # (few long ranges, each streamed: fewer requests, the same memory)
        lanes = max(1, min(store.workers, size // _STREAM_PIECE))
        piece = max(1, -(-size // lanes))
    spans = [(a, min(piece, size - a)) for a in range(0, size, piece)]
    lanes = max(1, min(store.workers, lanes, len(spans)))
    lock = threading.Lock()
    fd = f.fileno()

    def write(at: int, b) -> None:
        n = os.pwrite(fd, b, at)
        if arrivals is not None:
            arrivals.wrote(at, n)
        with lock:
            progress(len(b))

    def one(span):
        store.read_into(url, span[0], span[1], size, write)
    if lanes == 1:
        for span in spans:
            one(span)
        return
    with ThreadPoolExecutor(lanes, thread_name_prefix="modelcodec-download") as pool:
        futures = [pool.submit(one, span) for span in spans]
        first = None
        for fut in futures:
            if first is not None:
                fut.cancel()
                continue
            try:
                fut.result()
            except BaseException as e:  # noqa: BLE001 - re-raised once the others are done
                first = e
    if first is not None:
        raise first


class _HashAhead:
    """While a download writes the file at ``path``: on a worker thread, the file's structure
    opened by its format's remote opener (``FormatDescriptor.open_ranges``) as soon as its bytes
    are there, and every range its reader will hash (:meth:`codec.model.Reader.digest_spans`)
    hashed as soon as its bytes are there -- so the reader opened on the whole file afterwards
    finds those digests computed (:meth:`source`), not a second pass over the bytes.  Nothing the
    opener finds is trusted or reported here: the reader over the whole file checks everything
    again and compares each digest with the hash it trusts; this only guesses which ranges it
    will hash (a wrong guess costs time, never a check)."""

    def __init__(self, url: str, path: str, size: int, format: str | None = None, strict: bool = True,
                 full: bool = False, spans: list | None = None):
        """``spans``: the ranges to hash, when a reader of the file's structure gave them already."""
        import threading
        from .io.arrivals import Arrivals, ArrivingFile
        self.arrivals = Arrivals(size)
        self.file = ArrivingFile(path, self.arrivals)
        self.error: BaseException | None = None
        self._args = (url, size, format, strict, full, spans)
        self._thread = threading.Thread(target=self._run, name="modelcodec-hash-ahead", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self.file.close()
            raise

    @classmethod
    def start(cls, f, url: str, path: str, size: int, **kw) -> "_HashAhead | None":
        """The hashing beside the download into ``f`` (the open file at ``path``, its length
        set to ``size`` here first: the hashing maps it whole), or None where the file cannot
        be mapped (then the reader hashes it after, as it would anyway)."""
        try:
            f.truncate(size)
            return cls(url, path, size, **kw)
        except (OSError, ValueError, RuntimeError):  # (RuntimeError: no thread to be had)
            return None

    def _run(self) -> None:
        from .io.arrivals import Gone
        url, size, format, strict, full, spans = self._args
        try:
            if spans is None:
                d = _format_of(url, format, lambda n: self.file.read([(0, min(n, size))])[0])
                if d.open_ranges is None:
                    return
                with d.open_ranges(url, size, self.file.read, strict=strict) as r:
                    spans = r.digest_spans(full)
            budget = _AHEAD_BUDGET * size + _AHEAD_SLACK
            for algorithm, start, length in sorted(set(spans), key=lambda s: (s[1], s[2], s[0])):
                budget -= length + _AHEAD_SPAN_COST
                if budget < 0:  # (ranges that overlap: what is left, the reader hashes when it reads it)
                    return
                self.file.hash(algorithm, start, length)
        except Gone:
            pass
        except Exception as e:  # noqa: BLE001 - whatever it is, the reader over the whole file finds it
            self.error = e

    def source(self, path: str):
        """Once the download is done: what to open the file as -- its path, or, when digests
        were made, a :class:`codec.io.sources.Source` of it that holds them (none when a byte
        was written twice: they might describe bytes the file no longer holds)."""
        self.arrivals.over()
        self._thread.join()
        if not self.file.digests or self.arrivals.rewritten:
            return path
        from .io.sources import Source
        src = Source(path)
        src.digests = dict(self.file.digests)
        return src

    def close(self) -> None:
        self.arrivals.give_up()
        self._thread.join()
        self.file.close()


def _format_of(url: str, format: str | None, head):
    """The descriptor of the file at ``url``: the format named, else the one its name's suffix
    says, else the one its first bytes (``head(n)``) say."""
    from . import registry
    return registry.get(format) if format is not None else (
        registry.by_extension(urlsplit(url).path) or registry.detect(head(_SNIFF), url))


def _validate_here(descriptor, path, url: str, control: bool, strict: bool, progress) -> Report:
    """Full validation of a downloaded copy (its path, or a source of it), its findings naming the URL."""
    rep = descriptor.validator(path, full=True, control=control, strict=strict, progress=progress)
    rep.source = url
    for v in rep.violations:
        v.source = url
    rep.notes.append("remote: downloaded whole to a temporary file and validated there")
    return rep


from .io.store import is_url  # noqa: E402,F401  (where callers look for it)


def _descriptor(url: str, fmt: str | None, http):
    """(the format of the file at ``url``, its size when it was asked for): the format named,
    else the one its name's suffix says, else the one its first bytes say (one small Range
    request)."""
    from . import registry
    size = None
    if fmt is not None:
        d = registry.get(fmt)
    else:
        d = registry.by_extension(urlsplit(url).path)
        if d is None:
            size = http.size(url)
            head = bytes(http.fetch([(url, 0, min(size, _SNIFF), size)])[0]) if size else b""
            d = registry.detect(head, url)
    if d.open_ranges is None:
        raise E.UsageError(f"{url}: {d.name} files cannot be read over HTTP (formats that can: "
                           f"{', '.join(x.name for x in registry.formats() if x.open_ranges is not None)})")
    return d, size


class RemoteFile(Reader):
    """A model file at a URL (http(s), or any store :func:`codec.io.open_store.store_for` reaches): its format's reader over the ranges read so far; tensors
    fetched when asked for.  The same interface as a local reader."""
    format = "remote"
    FMT = "REMOTE"

    @property
    def tensors(self):
        """Its format's reader's (:attr:`codec.model.Reader.tensors`)."""
        return self.inner.tensors

    def __init__(self, url: str, *, strict: bool = True, format: str | None = None, http=None,
                 storage_options: dict | None = None, max_tensor_bytes: int = MAX_TENSOR_BYTES,
                 _collect: bool = False):
        from .io.remote import Http
        from .io.open_store import store_for
        self.url = self.source = url
        self.strict = strict
        self.max_tensor_bytes = tensor_limit(max_tensor_bytes)
        self._own_http = not isinstance(http, Http)
        #: where the bytes are read (a :class:`codec.io.store.Store`; ``http`` is the same object)
        self.store = self.http = store_for(url, storage_options=storage_options, http=http)
        try:
            self.http.check(url, "the file")
            self.descriptor, size = _descriptor(url, format, self.http)
            self.size = size if size is not None else self.http.size(url)
            self.inner = self.descriptor.open_ranges(url, self.size, self._read, strict=strict, _collect=_collect)
        except BaseException:
            self.close_http()
            raise
        self.format, self.FMT = self.inner.format, self.inner.FMT
        self._index = self.inner._index
        self._structure = list(getattr(self.inner, "_structure", []))

    def _read(self, spans: list[tuple[int, int]]) -> list:
        return self.http.fetch([(self.url, a, n, self.size) for a, n in spans])

    def read_tensors(self, names, *, progress: bool | None = None) -> dict:
        """Many tensors at once: the bytes not read yet fetched with few large ranges
        (neighbouring tensors coalesced by :meth:`codec.io.store.Store.get_ranges`, in
        parallel), then each tensor read as :meth:`tensor` reads it (its hash checked)."""
        names = E.tensor_names(names, "read_tensors(names)")
        src = self.inner._src
        want = []
        for name in names:
            t = self.inner.tensors[name]
            self._check_size(t)
            if t.offset is not None and t.nbytes and not src.has(t.offset, t.nbytes) \
                    and t.offset + t.nbytes <= self.size:
                want.append((t.offset, t.nbytes))
        if want:
            with Progress(sum(n for _, n in want), "fetch", enabled=progress) as bar:
                got = self.http.get_ranges(self.url, want, self.size, progress=bar.update)
            for (a, _), b in zip(want, got):
                src.add(a, b)
        return {name: self.inner.tensor(name) for name in names}

    # ------------------------------------------------------------------ the reader's interface
    @property
    def metadata(self) -> dict:
        return self.inner.metadata

    @property
    def raw_metadata(self) -> dict:
        return self.inner.raw_metadata

    @property
    def value_types(self) -> dict[str, str]:
        return self.inner.value_types

    @property
    def UNRESOLVED_SHAPE_RULES(self) -> tuple:  # noqa: N802 (the readers' class attribute)
        return self.inner.UNRESOLVED_SHAPE_RULES

    def __getattr__(self, name: str) -> Any:
        """Anything else the format's reader offers (``meta_types``, ``header``, ...)."""
        if name.startswith("__") or name in ("inner", "http"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _fetch(self, t: TensorInfo) -> None:
        """Read a tensor's bytes into the reader's source (one request per tensor)."""
        src = self.inner._src
        if t.offset is None or t.nbytes == 0 or src.has(t.offset, t.nbytes):
            return
        self._check_size(t)
        if t.offset + t.nbytes > self.size:
            return  # (past the end: the format's own check says so when the tensor is read)
        src.add(t.offset, self._read([(t.offset, t.nbytes)])[0])

    def _check_size(self, t: TensorInfo) -> None:
        check_tensor_bytes(self.FMT, t, self.url, self.max_tensor_bytes)

    def tensor(self, name: str, **kw) -> np.ndarray:
        self._fetch(self.inner.tensors[name])
        return self.inner.tensor(name, **kw)

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        if not full:
            rep = self.inner.validate(full=False, control=control, progress=progress)
            rep.notes.append(f"remote: {plural(self.http.stats['range_requests'], 'Range request')}; tensor bytes are "
                             "checked by validate(full=True), which downloads the file")
            return rep
        path, cleanup = self.download(progress, full=not control)
        try:
            return _validate_here(self.descriptor, path, self.url, control, self.strict, progress)
        finally:
            cleanup()

    @contextlib.contextmanager
    def whole(self, progress: bool | None = None):
        """The file fetched whole once into a temporary file and opened there with its format's
        reader (errors name the URL): convert and load read every byte, and a local file's
        consumed pages can leave memory, where the ranges held for a remote file cannot."""
        path, cleanup = self.download(progress)
        try:
            with self.descriptor.reader(path, strict=self.strict) as r:
                r.source = self.url
                yield r
        finally:
            cleanup()

    @classmethod
    @contextlib.contextmanager
    def fetched(cls, url: str, *, strict: bool = True, format: str | None = None, http=None,
                storage_options: dict | None = None, max_tensor_bytes: int = MAX_TENSOR_BYTES,
                progress: bool | None = None, _collect: bool = False, _hash: str | None = "read"):
        """For whole-file work: the file fetched whole into a temporary file, without reading
        its structure remotely first -- a size request, then ranges of 16 MiB (two at a time:
        the memory it holds; a store that streams: a few long ranges in parallel, each
        streamed), or, from a server that does not answer Range requests, one
        streamed GET (said once on stderr) -- and (the format's descriptor, the file: its
        path, or a source of it).  The file is then read there by its format's reader, every
        check a local file gets; the ranges that reader hashes to read every tensor (``_hash``
        "read"), or in a full validation ("full"), are hashed as they arrive
        (:class:`_HashAhead`), not read again after (None: nothing hashed ahead)."""
        from .io.open_store import store_for
        from .io.store import HttpStore
        store = store_for(url, storage_options=storage_options, http=http)
        d = tempfile.mkdtemp(prefix="modelcodec-remote-")
        path = local = os.path.join(d, "file")  # never a name taken from the URL
        ahead = None
        try:
            store.check(url, "the file")
            try:
                size = store.size(url)
            except NoRangeError:
                size = None
                _say_once(f"{url}: the server does not support Range requests: downloading the whole file once")
            with open(path, "wb") as f, Progress(size, "download", enabled=progress) as bar:
                if size is None:
                    store.download(url, f, progress=bar.update)
                else:
                    if _hash is not None:
                        ahead = _HashAhead.start(f, url, path, size, format=format, strict=strict,
                                                 full=_hash == "full")
                    _download(store, url, size, f, bar.update, ahead and ahead.arrivals)
            from .registry import head_of
            desc = _format_of(url, format, lambda n: head_of(path, n))
            local = path if ahead is None else ahead.source(path)
            yield desc, local
        finally:
            try:
                if ahead is not None:
                    ahead.close()
                if local is not path:  # (a source holding the digests: closed by its reader, else here)
                    local.close()
                if not isinstance(store, HttpStore) or store.http is not http:  # (not the caller's client)
                    store.close()
            finally:
                shutil.rmtree(d, ignore_errors=True)

    def download(self, progress: bool | None = None, *, full: bool = False):
        """The whole file in a temporary file (bounded memory), the ranges the reader hashes to
        read every tensor (``full``: to validate it all) hashed as they arrive: (the file -- its
        path, or a source of it holding those digests --, cleanup)."""
        d = tempfile.mkdtemp(prefix="modelcodec-remote-")
        path = os.path.join(d, "file")  # never a name taken from the URL
        ahead = None
        try:
            with open(path, "wb") as f, Progress(self.size, "download", enabled=progress) as bar:
                ahead = _HashAhead.start(f, self.url, path, self.size, spans=self.inner.digest_spans(full))
                _download(self.http, self.url, self.size, f, bar.update, ahead and ahead.arrivals)
            local = path if ahead is None else ahead.source(path)
        except BaseException:
            shutil.rmtree(d, ignore_errors=True)
            raise
        finally:
            if ahead is not None:
                ahead.close()
        return local, lambda: shutil.rmtree(d, ignore_errors=True)

    def inspect_notes(self, t: TensorInfo) -> dict:
        return self.inner.inspect_notes(t)

    @property
    def NATIVE_DTYPES(self) -> bool:  # noqa: N802 (the readers' class attribute)
        return self.inner.NATIVE_DTYPES

    def byte_maps(self) -> list:
        return [(self.url, self.size, self.inner.regions(), self.inner._src)]

    def describe(self) -> dict:
        d = self.inner.describe()
        d.update({"url": self.url, "remote": True, "range_requests": self.http.stats["range_requests"]})
        return d

    @classmethod
    def validate_file(cls, source, *, full: bool = False, control: bool = False, strict: bool = True,
                      progress: bool | None = None, **options) -> Report:
        """As :meth:`validate`; ``full`` fetches the file whole first (:meth:`fetched`: also
        from a server without Range requests) and validates it there."""
        if not full:
            with cls(source, strict=strict, _collect=True, **options) as r:
                return r.validate(full=full, control=control, progress=progress)
        options.pop("max_tensor_bytes", None)
        with cls.fetched(source, strict=strict, progress=progress, _hash=None if control else "full",
                         **options) as (desc, path):
            return _validate_here(desc, path, source, control, strict, progress)

    @classmethod
    @contextlib.contextmanager
    def opened_whole(cls, source, *, progress: bool | None = None, strict: bool = True, **options):
        """The file's reader for whole-file work (load, convert), over a temporary copy
        (:meth:`fetched`)."""
        options.pop("max_tensor_bytes", None)
        with cls.fetched(source, strict=strict, progress=progress, **options) as (desc, path):
            with desc.reader(path, strict=strict) as r:
                r.source = source
                yield r

    def close_http(self) -> None:
        if self._own_http and getattr(self, "http", None) is not None:
            self.http.close()

    def close(self) -> None:
        self._closed = True
        inner = self.__dict__.get("inner")
        if inner is not None:
            inner.close()
        self.close_http()
