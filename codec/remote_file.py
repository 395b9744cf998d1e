"""Any single model file behind an http(s) URL (format-blind).

``codec.open("https://host/model.<ext>")`` opens the file with the format's own reader
over the bytes its structure needs, read with Range requests (``FormatDescriptor.open_ranges``:
each format reads its header and whatever control data it needs, in growing prefixes within a
limit); a tensor's bytes are read when it is asked for (one request per tensor, at most
``max_range`` bytes each, in parallel), through the same client as remote multi-file models
(:class:`codec.io.remote.Http`: checked ``206`` answers and
``Content-Range``, the file pinned by its ETag, retries with backoff, timeouts).

Trust: a single file carries no hash from a source other than itself, so nothing read from it
is trusted beyond the checks its format makes (a tensor is still checked against a hash its
file declares, on first read), and nothing of it is cached on disk -- the disk cache holds only
bytes verified against a hash from a trusted source (a set's index and its chain of hashes).
``validate(full=True)`` downloads the file to a temporary file (bounded memory) and validates it
as a local file.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from .schemas.http import MAX_TENSOR_BYTES, Rule

from . import errors as E
from .model import Reader, Report, TensorInfo
from .ui.display import plural
from .ui.progress import Progress

#: how many bytes the format is guessed from when the URL's name does not say
_SNIFF = 16
#: a download is fetched in ranges of this size, ``workers`` of them at a time (the memory it holds)
_DOWNLOAD_PIECE = 4 * 1024 * 1024


def is_url(source) -> bool:
    return isinstance(source, str) and source.split("://", 1)[0].lower() in ("http", "https") and "://" in source


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
    """A model file at an http(s) URL: its format's reader over the ranges read so far; tensors
    fetched when asked for.  The same interface as a local reader."""
    format = "remote"
    FMT = "REMOTE"

    def __init__(self, url: str, *, strict: bool = True, format: str | None = None, http=None,
                 max_tensor_bytes: int = MAX_TENSOR_BYTES, _collect: bool = False):
        from .io.remote import Http, HttpOptions, check_url
        check_url(url, "the file")
        self.url = self.source = url
        self.strict = strict
        self.max_tensor_bytes = max_tensor_bytes
        self._own_http = not isinstance(http, Http)
        if http is not None and not isinstance(http, (Http, HttpOptions)):
            raise E.UsageError(f"http= takes an HttpOptions or an Http client, not {type(http).__name__}")
        self.http = http if isinstance(http, Http) else Http(http)
        try:
            self.descriptor, size = _descriptor(url, format, self.http)
            self.http.fmt = self.descriptor.schema.FORMAT
            self.size = size if size is not None else self.http.size(url)
            self.inner = self.descriptor.open_ranges(url, self.size, self._read, strict=strict, _collect=_collect)
        except BaseException:
            self.close_http()
            raise
        self.format, self.FMT = self.inner.format, self.inner.FMT
        self.tensors = self.inner.tensors
        self._index = self.inner._index
        self._structure = list(getattr(self.inner, "_structure", []))

    def _read(self, spans: list[tuple[int, int]]) -> list:
        return self.http.fetch([(self.url, a, n, self.size) for a, n in spans])

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
        if t.nbytes > self.max_tensor_bytes:
            raise E.LimitError(self.FMT, t.offset, f"tensor {t.name!r}", Rule.TENSOR_LIMIT,
                               f"is {t.nbytes} bytes, over max_tensor_bytes={self.max_tensor_bytes}",
                               expected=self.max_tensor_bytes, actual=t.nbytes).with_source(self.url)
        if t.offset + t.nbytes > self.size:
            return  # (past the end: the format's own check says so when the tensor is read)
        src.add(t.offset, self._read([(t.offset, t.nbytes)])[0])

    def tensor(self, name: str, **kw) -> np.ndarray:
        self._fetch(self.inner.tensors[name])
        return self.inner.tensor(name, **kw)

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        if not full:
            rep = self.inner.validate(full=False, control=control, progress=progress)
            rep.notes.append(f"remote: {plural(self.http.stats['range_requests'], 'Range request')}; tensor bytes are "
                             "checked by validate(full=True), which downloads the file")
            return rep
        path, cleanup = self.download(progress)
        try:
            rep = self.descriptor.validator(path, full=True, control=control, strict=self.strict, progress=progress)
        finally:
            cleanup()
        rep.source = self.url
        for v in rep.violations:
            v.source = self.url
        rep.notes.append("remote: downloaded whole to a temporary file and validated there")
        return rep

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

    def download(self, progress: bool | None = None):
        """The whole file in a temporary file (bounded memory): (path, cleanup)."""
        d = tempfile.mkdtemp(prefix="modelcodec-remote-")
        path = os.path.join(d, "file")  # never a name taken from the URL
        try:
            with open(path, "wb") as f, Progress(self.size, "download", enabled=progress) as bar:
                window = _DOWNLOAD_PIECE * max(self.http.options.workers, 1)
                for w in range(0, self.size, window):
                    spans = [(a, min(_DOWNLOAD_PIECE, self.size - a))
                             for a in range(w, min(w + window, self.size), _DOWNLOAD_PIECE)]
                    for b in self._read(spans):
                        f.write(b)
                        bar.update(len(b))
        except BaseException:
            shutil.rmtree(d, ignore_errors=True)
            raise
        return path, lambda: shutil.rmtree(d, ignore_errors=True)

    def inspect_notes(self, t: TensorInfo) -> dict:
        return self.inner.inspect_notes(t)

    @property
    def NATIVE_DTYPES(self) -> bool:  # noqa: N802 (the readers' class attribute)
        return self.inner.NATIVE_DTYPES

    def describe(self) -> dict:
        d = self.inner.describe()
        d.update({"url": self.url, "remote": True, "range_requests": self.http.stats["range_requests"]})
        return d

    @classmethod
    def validate_file(cls, source, *, full: bool = False, control: bool = False, strict: bool = True,
                      progress: bool | None = None, **options) -> Report:
        with cls(source, strict=strict, _collect=True, **options) as r:
            return r.validate(full=full, control=control, progress=progress)

    def close_http(self) -> None:
        if self._own_http and getattr(self, "http", None) is not None:
            self.http.close()

    def close(self) -> None:
        self._closed = True
        inner = self.__dict__.get("inner")
        if inner is not None:
            inner.close()
        self.close_http()
