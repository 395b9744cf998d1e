"""modelcodec: read, write, validate and inspect model-weight containers.

    import codec
    with codec.open("model.aero") as r:          # format detected by magic
        r.format, r.metadata, list(r.tensors)
        w = r.tensor("layer.0.weight")           # read-only zero-copy numpy view
        report = r.validate(full=True)           # .ok, .violations
    codec.write("out.aero", {"w": array}, format="aero", uuid=b"\\0" * 16)

Every error about bad data derives from :class:`codec.FormatError`.
"""
from __future__ import annotations

import os

from . import errors
from .errors import (
    FormatError, IntegrityError, ModelcodecError, NotFoundError, UnsupportedVersionError, UsageError,
)
from .model import Reader, Report, TensorInfo

try:
    from importlib.metadata import PackageNotFoundError, version as _version
    __version__ = _version("modelcodec")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"


def open(path_or_buffer, *, strict: bool = True, format: str | None = None, **options) -> Reader:
    """Open a model file (path, or any bytes-like buffer) and return its reader.  ``options``
    go to the detected format's reader (STB: shape_table; AEROSET, for a directory, index path
    or http(s) URL: remote, base_url, cache, http, max_tensor_bytes); an option that format's
    reader does not take is a UsageError."""
    if _is_set(path_or_buffer, format):
        from .formats.aeroset import AeroSet
        return AeroSet(path_or_buffer, strict=strict, **_options_for(AeroSet, "aeroset", options))
    entry = _entry(path_or_buffer, format)
    return entry.reader(path_or_buffer, strict=strict, **_options_for(entry.reader, entry.name, options))


def _entry(path_or_buffer, format):
    from . import registry
    if format is not None:
        return registry.get(format)
    src = os.fspath(path_or_buffer) if isinstance(path_or_buffer, (str, os.PathLike)) else "<buffer>"
    return registry.detect(registry.head_of(path_or_buffer), src)


def _options_for(reader, name: str, options: dict) -> dict:
    """``options`` if the reader takes every one of them (by its signature), else UsageError."""
    import inspect
    params = inspect.signature(reader).parameters
    taken = {p for p, v in params.items() if v.kind == v.KEYWORD_ONLY and not p.startswith("_")} - {"strict"}
    extra = sorted(set(options) - taken)
    if extra:
        raise UsageError(f"the {name} reader takes no option {', '.join(map(repr, extra))}"
                         + (f" (its options: {', '.join(sorted(taken))})" if taken else " (it has none)"))
    return options


def _is_set(source, format: str | None) -> bool:
    """An AEROSET: its directory, its *.aeroset.json index, or format="aeroset"."""
    if format == "aeroset":
        return True
    if format is not None or not isinstance(source, (str, os.PathLike)):
        return False
    p = os.fspath(source)
    return p.endswith(".aeroset.json") or "://" in p or os.path.isdir(p)


def validate(path_or_buffer, *, full: bool = False, control: bool = False, strict: bool = True,
             format: str | None = None, progress: bool | None = None, **options) -> Report:
    """Check a file and return a :class:`Report` listing every violation (never raises for bad
    data, except when no format recognises the bytes, or a remote index cannot be fetched).
    ``options`` as for :func:`open`."""
    if _is_set(path_or_buffer, format):
        from .formats.aeroset import AeroSet
        return AeroSet.validate_file(path_or_buffer, full=full, strict=strict, progress=progress,
                                     **_options_for(AeroSet, "aeroset", options))
    try:
        entry = _entry(path_or_buffer, format)
    except errors.UnknownFormatError as e:  # not a model at all: a report, not an exception
        src = os.fspath(path_or_buffer) if isinstance(path_or_buffer, (str, os.PathLike)) else "<buffer>"
        return Report("?", src, "full" if full else "structure", [e.with_source(src)])
    reader = getattr(entry.validate, "__self__", None) or entry.reader
    return entry.validate(path_or_buffer, full=full, control=control, strict=strict, progress=progress,
                          **_options_for(reader, entry.name, options))


def write(path, tensors, *, format: str | None = None, **options) -> str:
    """Write ``tensors`` (mapping name -> array) to ``path``; the format comes from ``format``
    or the file extension.  ``options`` are the format writer's (see codec.formats.<fmt>)."""
    from . import registry
    if format == "aeroset" or (format is None and os.fspath(path).endswith(".aeroset.json")):
        from .formats.aeroset import write_aeroset
        return write_aeroset(os.path.dirname(os.path.abspath(path)) if format is None else path, tensors, **options)
    if format is None:
        ext = os.path.splitext(os.fspath(path))[1].lower()
        match = [f for f in registry.formats() if ext in f.extensions]
        if not match:
            raise UsageError(f"cannot tell the format of {os.fspath(path)!r}: pass format=")
        entry = match[0]
    else:
        entry = registry.get(format)
    return entry.writer(path, tensors, **options)


__all__ = ["__version__", "open", "validate", "write", "errors", "FormatError", "IntegrityError", "ModelcodecError", "NotFoundError",
           "UnsupportedVersionError", "UsageError", "Reader", "Report", "TensorInfo"]
