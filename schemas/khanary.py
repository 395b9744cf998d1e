"""KHΛNARY wiring of STB: the 32-bit glyph word (profile KHΛ-2-DENSE-32).

One u32 word, bit 31 = most significant::

    31-28 VER  | 27-20 GLYPH_ID | 19-16 ARITY | 15-12 FLAGS | 11-4 PAYLOAD | 3-1 AUTH_CLASS | 0 PARITY

FLAGS: bit 12 IMM, bit 13 BIN_REF (must be set on the three .stb glyphs), bit 14 SHAPE_DESC,
bit 15 reserved.  PARITY makes the popcount of the whole word even.  G_LOAD_BIN_TENSOR's
payload is bin_file_id (bits 11-8) and shape_id = tensor_id (bits 7-4); G_MMAP_BIN_REGION and
G_PREFETCH_BIN carry an 8-bit bin_file_id.  Encoding a value that does not fit its field is an
error, never a silent mask.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .dsl import Eq, OneOf, Range, RuleId

FORMAT = "KHANARY"
WORD_BITS = 32


class Rule(RuleId):
    """Every rule a glyph word is checked against."""
    PARITY = "KHA-PARITY", "the popcount of the 32-bit word is even"
    VER = "KHA-VER", "VER is 2"
    GLYPH = "KHA-GLYPH", "GLYPH_ID is one of the .stb glyphs (0x30, 0x31, 0x32)"
    BIN_REF = "KHA-BIN-REF", "FLAGS.BIN_REF is set"
    RESERVED = "KHA-RESERVED", "FLAGS bit 15 is zero"
    AUTH = "KHA-AUTH", "AUTH_CLASS is at least 1"
    FIT = "KHA-FIT", "every value fits its field when encoding (no silent masking)"
    BIN_FILE = "KHA-BIN-FILE", "bin_file_id names an entry of the bin file table"
    TENSOR = "KHA-TENSOR", "shape_id names a tensor_id of that .stb file"
    BIN_CHECK = "KHA-BIN-CHECK", "the file matches the table's optional size / alignment / dtype"
    BIN_PATH = "KHA-BIN-PATH", "a bin file table path is relative and stays inside the table's base directory"


class Glyph(enum.IntEnum):
    G_LOAD_BIN_TENSOR = 0x30
    G_MMAP_BIN_REGION = 0x31
    G_PREFETCH_BIN = 0x32


class Flag(enum.IntFlag):
    IMM = 0x1          # word bit 12
    BIN_REF = 0x2      # word bit 13
    SHAPE_DESC = 0x4   # word bit 14


@dataclass(frozen=True)
class BitField:
    name: str
    hi: int
    lo: int
    doc: str
    valid: tuple = ()

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1


VERSION = 2
WORD = (
    BitField("ver", 31, 28, "profile version", (Eq(VERSION, Rule.VER, "version"),)),
    BitField("glyph_id", 27, 20, "glyph", (OneOf(Glyph, Rule.GLYPH),)),
    BitField("arity", 19, 16, "operand count"),
    BitField("flags", 15, 12, "IMM (12), BIN_REF (13), SHAPE_DESC (14), bit 15 reserved"),
    BitField("payload", 11, 4, "glyph operand"),
    BitField("auth_class", 3, 1, "authority class", (Range(1, 7, Rule.AUTH),)),
    BitField("parity", 0, 0, "makes the word's popcount even"),
)

#: G_LOAD_BIN_TENSOR's payload split: bin_file_id in the high nibble, shape_id in the low one
LOAD_PAYLOAD = (
    BitField("bin_file_id", 7, 4, "bin file table index (0-15)"),
    BitField("shape_id", 3, 0, "tensor_id inside that .stb (0-15)"),
)
#: G_MMAP_BIN_REGION / G_PREFETCH_BIN payload
FILE_PAYLOAD = (BitField("bin_file_id", 7, 0, "bin file table index (0-255)"),)
