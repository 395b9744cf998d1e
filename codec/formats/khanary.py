"""KHΛNARY glyph wiring for STB: encode / decode / validate glyph words, the bin file table,
and the three glyphs' runtime effect (LOAD -> tensor view, MMAP -> the mapped file, PREFETCH ->
madvise WILLNEED on the page-rounded data region).

The word layout is declared in :mod:`schemas.khanary`; nothing here repeats a bit position.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..schemas import khanary as K
from ..schemas.khanary import Flag, Glyph, Rule

from .. import errors as E
from ..engine.records import holds, violation
from ..io.sources import confined
from .stb import StbReader

FMT = K.FORMAT
FIELDS = {f.name: f for f in K.WORD}


class GlyphError(E.FormatError):
    """A glyph word that is malformed, or that asks for something the bin file table lacks."""


class GlyphFitError(GlyphError, E.UsageError):
    """encode() was given a value that does not fit its field."""


def _gerr(rule, path, msg, cls=GlyphError) -> E.FormatError:
    return cls(FMT, None, path, rule, msg)


def _get(word: int, f: K.BitField) -> int:
    return (word >> f.lo) & ((1 << f.width) - 1)


def _put(value: int, f: K.BitField, path: str) -> int:
    if not isinstance(value, (int, np.integer)) or not 0 <= int(value) < (1 << f.width):
        raise _gerr(Rule.FIT, path, f"{value!r} does not fit the {f.width}-bit field {f.name} "
                                    f"(bits {f.hi}-{f.lo}); refusing to mask it", GlyphFitError)
    return int(value) << f.lo


@dataclass(frozen=True)
class GlyphWord:
    word: int
    ver: int
    glyph_id: int
    arity: int
    flags: int
    payload: int
    auth_class: int
    parity: int
    bin_file_id: int
    shape_id: int | None = None

    @property
    def glyph(self) -> Glyph:
        return Glyph(self.glyph_id)


def decode(word: int) -> GlyphWord:
    """Decode and validate one word: parity first (any single flipped bit is caught there),
    then VER, GLYPH_ID, BIN_REF, reserved flag bit, AUTH_CLASS."""
    if not isinstance(word, (int, np.integer)) or not 0 <= int(word) < (1 << K.WORD_BITS):
        raise _gerr(Rule.FIT, "word", f"{word!r} is not a 32-bit word")
    word = int(word)
    if bin(word).count("1") % 2:
        raise _gerr(Rule.PARITY, "word.parity", f"0x{word:08X}: odd popcount ({bin(word).count('1')})")
    vals = {f.name: _get(word, f) for f in K.WORD}
    for f in K.WORD:
        for c in f.valid:
            if not holds(c, vals[f.name]):
                e = violation(FMT, c, vals[f.name], None, f"word.{f.name}")
                raise GlyphError(FMT, None, e.path, e.rule, f"0x{word:08X}: {e.message}")
    if not vals["flags"] & Flag.BIN_REF:
        raise _gerr(Rule.BIN_REF, "word.flags", f"0x{word:08X}: {Glyph(vals['glyph_id']).name} requires FLAGS.BIN_REF")
    if vals["flags"] & 0x8:
        raise _gerr(Rule.RESERVED, "word.flags", f"0x{word:08X}: FLAGS bit 15 is reserved")
    payload = K.LOAD_PAYLOAD if vals["glyph_id"] == Glyph.G_LOAD_BIN_TENSOR else K.FILE_PAYLOAD
    p = {f.name: _get(vals["payload"], f) for f in payload}
    return GlyphWord(word, **vals, bin_file_id=p["bin_file_id"], shape_id=p.get("shape_id"))


def encode(glyph: Glyph | int, bin_file_id: int, shape_id: int | None = None, *, auth_class: int = 1,
           arity: int = 0, flags: int = Flag.BIN_REF) -> int:
    """Build a word; every value must fit its field (a tensor_id of 16 is an error, not 0)."""
    glyph = Glyph(glyph)
    if glyph == Glyph.G_LOAD_BIN_TENSOR:
        if shape_id is None:
            raise _gerr(Rule.FIT, "shape_id", "G_LOAD_BIN_TENSOR needs a shape_id (tensor_id)", GlyphFitError)
        payload = _put(bin_file_id, K.LOAD_PAYLOAD[0], "bin_file_id") | _put(shape_id, K.LOAD_PAYLOAD[1], "shape_id")
    else:
        if shape_id is not None:
            raise _gerr(Rule.FIT, "shape_id", f"{glyph.name} takes no shape_id", GlyphFitError)
        payload = _put(bin_file_id, K.FILE_PAYLOAD[0], "bin_file_id")
    w = (_put(K.VERSION, FIELDS["ver"], "ver") | _put(int(glyph), FIELDS["glyph_id"], "glyph_id")
         | _put(arity, FIELDS["arity"], "arity") | _put(int(flags), FIELDS["flags"], "flags")
         | _put(payload, FIELDS["payload"], "payload") | _put(auth_class, FIELDS["auth_class"], "auth_class"))
    w |= bin(w).count("1") % 2  # parity bit 0 makes the popcount even
    decode(w)  # the result obeys every rule (BIN_REF, AUTH_CLASS, ...)
    return w


@dataclass
class BinFile:
    path: str
    mmap_required: bool = True
    size: int | None = None
    alignment: int | None = None
    dtype: str | None = None


@dataclass
class MappedBin:
    bin_file_id: int
    path: str
    buf: memoryview          # the whole file, read-only
    data_offset: int
    file_size: int


class BinFileTable:
    """bin_file_id -> .stb file.  Each file is opened (and mapped) once, on first use."""

    def __init__(self, table: Mapping[Any, Any], base_dir: str | os.PathLike = ".", *, strict: bool = True,
                 shape_tables: Mapping[int, Any] | None = None):
        self.base_dir = os.fspath(base_dir)
        self.strict = strict
        self.shape_tables = dict(shape_tables or {})
        self.entries: dict[int, BinFile] = {}
        for k, v in table.items():
            entry = v if isinstance(v, BinFile) else BinFile(**v) if isinstance(v, Mapping) else BinFile(str(v))
            k = int(k)
            if not 0 <= k <= 255:
                raise E.UsageError(f"bin_file_id {k} is out of 0..255")
            self.entries[k] = entry
        self._open: dict[int, StbReader] = {}

    def reader(self, bin_file_id: int) -> StbReader:
        r = self._open.get(bin_file_id)
        if r is not None:
            return r
        entry = self.entries.get(bin_file_id)
        if entry is None:
            raise _gerr(Rule.BIN_FILE, "payload.bin_file_id",
                        f"bin_file_id {bin_file_id} is not in the bin file table ({sorted(self.entries)})")
        path, why = confined(self.base_dir, entry.path)
        if why is not None:
            raise _gerr(Rule.BIN_PATH, f"bin_file_table[{bin_file_id}].path", why)
        r = StbReader(path, strict=self.strict, shape_table=self.shape_tables.get(bin_file_id))
        try:
            self._check_entry(bin_file_id, entry, r)
        except BaseException:
            r.close()
            raise
        self._open[bin_file_id] = r
        return r

    def _check_entry(self, bid: int, entry: BinFile, r: StbReader) -> None:
        if entry.size is not None and r.header["file_size"] != entry.size:
            raise _gerr(Rule.BIN_CHECK, f"bin_file_table[{bid}].size",
                        f"{entry.path} is {r.header['file_size']} bytes, the table says {entry.size}")
        for name in r.tensors:
            t = r.tensors[name]
            if entry.alignment and t.offset % entry.alignment:
                raise _gerr(Rule.BIN_CHECK, f"bin_file_table[{bid}].alignment",
                            f"{entry.path} tensor {name} at {t.offset} is not {entry.alignment}-aligned")
            if entry.dtype and t.dtype_name != entry.dtype:
                raise _gerr(Rule.BIN_CHECK, f"bin_file_table[{bid}].dtype",
                            f"{entry.path} tensor {name} is {t.dtype_name}, the table says {entry.dtype}")

    def run(self, word: int | GlyphWord):
        """Execute a word: LOAD -> numpy view, MMAP -> MappedBin, PREFETCH -> (start, length)."""
        g = word if isinstance(word, GlyphWord) else decode(word)
        r = self.reader(g.bin_file_id)
        if g.glyph == Glyph.G_LOAD_BIN_TENSOR:
            if g.shape_id not in r:
                raise _gerr(Rule.TENSOR, "payload.shape_id",
                            f"{self.entries[g.bin_file_id].path} has no tensor_id {g.shape_id}")
            return r.tensor(g.shape_id)
        h = r.header
        if g.glyph == Glyph.G_MMAP_BIN_REGION:
            return MappedBin(g.bin_file_id, r.source, r._src.buf, h["data_offset"], h["file_size"])
        return r._src.advise_willneed(h["data_offset"], h["file_size"] - h["data_offset"])

    def close(self) -> None:
        for r in self._open.values():
            r.close()
        self._open.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
