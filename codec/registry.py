"""The one table of formats: detection by magic, reader, writer, schema module.

Later formats plug in by adding one :class:`FormatEntry` here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from . import errors as E


@dataclass(frozen=True)
class FormatEntry:
    name: str                       # "aero"
    magic: bytes                    # what the first bytes must be
    extensions: tuple
    schema: Any                     # the schemas.<fmt> module
    reader: Callable[..., Any]      # reader(path_or_buffer, strict=...) -> Reader
    writer: Callable[..., Any]      # writer(path, tensors, **options)
    validate: Callable[..., Any]    # validate(path_or_buffer, full=, control=, strict=) -> Report

    def detect(self, head: bytes) -> bool:
        return head[:len(self.magic)] == self.magic


def _entries() -> list[FormatEntry]:
    from schemas import aero as aero_schema, mag as mag_schema, oinf as oinf_schema, stb as stb_schema
    from .formats import aero, mag, oinf, stb
    return [
        FormatEntry("aero", aero_schema.MAGIC, aero_schema.EXTENSIONS, aero_schema, aero.AeroReader, aero.write_aero,
                    aero.validate_file),
        FormatEntry("mag", mag_schema.MAGIC, mag_schema.EXTENSIONS, mag_schema, mag.MagReader, mag.write_mag,
                    mag.validate_file),
        FormatEntry("oinf", oinf_schema.MAGIC, oinf_schema.EXTENSIONS, oinf_schema, oinf.OinfReader,
                    oinf.write_oinf_file, oinf.validate_file),
        FormatEntry("stb", stb_schema.MAGIC, stb_schema.EXTENSIONS, stb_schema, stb.StbReader, stb.write_stb,
                    stb.validate_file),
    ]


_REGISTRY: list[FormatEntry] | None = None


def formats() -> list[FormatEntry]:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _entries()
    return _REGISTRY


def get(name: str) -> FormatEntry:
    for f in formats():
        if f.name == name.lower():
            return f
    raise E.UsageError(f"unknown format {name!r} (known: {', '.join(f.name for f in formats())})")


def detect(head: bytes, source: str = "<buffer>") -> FormatEntry:
    for f in formats():
        if f.detect(head):
            return f
    raise E.UnknownFormatError("?", 0, "magic", "DETECT",
                               f"no known format starts with {bytes(head[:8])!r} "
                               f"(known: {', '.join(f.name for f in formats())})", source=source)


def head_of(path_or_buffer, n: int = 16) -> bytes:
    if isinstance(path_or_buffer, (str, os.PathLike)):
        from .io import open_regular
        with open_regular(path_or_buffer) as f:
            return f.read(n)
    try:
        return bytes(memoryview(path_or_buffer).cast("B")[:n])
    except TypeError:
        raise E.UsageError(f"expected a path or a bytes-like object, got {type(path_or_buffer).__name__}") from None
