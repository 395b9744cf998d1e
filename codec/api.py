"""The library's entry points that take a path, URL or buffer: :func:`open`, :func:`validate`
and :func:`write` (re-exported by :mod:`codec`, where users call them)."""
from __future__ import annotations

import functools
import inspect
import os

from . import errors
from .errors import UsageError
from .model import Reader, Report


def open(path_or_buffer, *, strict: bool = True, format: str | None = None, **options) -> Reader:
    """Open a model file (path, http(s) URL, or any bytes-like buffer) and return its reader.
    ``options`` go to the detected format's reader (its keyword arguments, e.g. a multi-file
    model's remote, base_url, cache, http, max_tensor_bytes; a single file's URL: http,
    max_tensor_bytes, see :mod:`codec.remote_file`); an option that reader does not take is a
    UsageError.  ``modelcodec formats`` lists the formats."""
    from . import registry
    from .remote_file import RemoteFile, is_url
    if is_url(path_or_buffer) and registry.claiming(path_or_buffer) is None:  # one file over HTTP
        return RemoteFile(path_or_buffer, strict=strict, format=format,
                          **_options_for(RemoteFile, "remote file", options))
    entry = registry.resolve(path_or_buffer, format)
    return entry.reader(path_or_buffer, strict=strict, **_options_for(entry.reader, entry.name, options))


@functools.lru_cache(maxsize=None)
def _options_of(reader) -> frozenset:
    """The options a reader takes: its keyword-only parameters but ``strict`` and private ones."""
    params = inspect.signature(reader).parameters
    return frozenset(p for p, v in params.items() if v.kind == v.KEYWORD_ONLY and not p.startswith("_")) - {"strict"}


def _options_for(reader, name: str, options: dict) -> dict:
    """``options`` if the reader takes every one of them (by its signature), else UsageError."""
    taken = _options_of(reader)
    extra = sorted(set(options) - taken)
    if extra:
        raise UsageError(f"the {name} reader takes no option {', '.join(map(repr, extra))}"
                         + (f" (its options: {', '.join(sorted(taken))})" if taken else " (it has none)"))
    return options


def validate(path_or_buffer, *, full: bool = False, control: bool = False, strict: bool = True,
             format: str | None = None, progress: bool | None = None, **options) -> Report:
    """Check a file and return a :class:`Report` listing every violation (never raises for bad
    data, except when no format recognises the bytes, or a remote index cannot be fetched).
    ``options`` as for :func:`open`."""
    from . import registry
    from .remote_file import RemoteFile, is_url
    if is_url(path_or_buffer) and registry.claiming(path_or_buffer) is None:  # one file over HTTP
        return RemoteFile.validate_file(path_or_buffer, full=full, control=control, strict=strict, progress=progress,
                                        format=format, **_options_for(RemoteFile, "remote file", options))
    try:
        entry = registry.resolve(path_or_buffer, format)
    except errors.UnknownFormatError as e:  # not a model at all: a report, not an exception
        src = os.fspath(path_or_buffer) if isinstance(path_or_buffer, (str, os.PathLike)) else "<buffer>"
        return Report("?", src, "full" if full else "structure", [e.with_source(src)])
    reader = getattr(entry.validator, "__self__", None) or entry.reader
    return entry.validator(path_or_buffer, full=full, control=control, strict=strict, progress=progress,
                           **_options_for(reader, entry.name, options))


def write(path, tensors, *, format: str | None = None, **options) -> str:
    """Write ``tensors`` (mapping name -> array) to ``path``; the format comes from ``format``
    or the file name (the extensions ``modelcodec formats`` lists; a multi-file model by its
    index's suffix, written in that file's directory).  A quantized tensor is a
    :class:`Packed` (its bytes, logical shape and codec parameters).  ``options`` are the format
    writer's (see codec.formats.<fmt>): an option it does not take, or of another type than it
    declares, is a UsageError naming it.  A URL is not a destination (UsageError)."""
    from . import registry
    from .io.writer_io import writer_options
    argument_order("write(path, tensors)", path, tensors)
    entry, target = registry.for_write(path, format)
    return entry.writer(target, tensors, **writer_options(entry.writer, entry.name, options))


def argument_order(call: str, path, tensors) -> None:
    """UsageError when a write's path and tensors come in each other's place (``codec.save``
    takes the tensors first, ``codec.write`` the path first): named so, not a TypeError."""
    from collections.abc import Mapping
    if not isinstance(path, (str, os.PathLike)) and isinstance(tensors, (str, os.PathLike)) \
            and isinstance(path, (Mapping, list, tuple)):
        raise UsageError(f"{call}: the arguments are swapped -- the path {os.fspath(tensors)!r} came where the "
                         f"tensors go and the tensors ({type(path).__name__}) where the path goes")
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"{call}: the path must be text or a path, not {type(path).__name__}")
