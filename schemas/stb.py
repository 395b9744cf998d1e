"""STB — SVG-Tensor Binary Format v0.1 (the STB v0.1 specification).

Layout::

    0               Header (32 B)
    32              Tensor table: tensor_count x 32-byte descriptors (packed: u64 fields at
                    offsets 4 and 12 are not 8-aligned)
    data_offset     Raw data region (64-aligned); every tensor offset is absolute and 64-aligned

All integers little-endian.  Rule ids follow the spec's sections: ``STB-7.1`` ... ``STB-7.4d``
are the numbered rules of section 7; the others come from sections 3/4 and from what real files show.
"""
from __future__ import annotations

import enum

import construct as cs

from .dsl import (ElementTypes, FILE_END, DeclaresSize, Eq, Multiple, NBytes, OneOf, Ordered, Range, Region, RuleId, Table,
                  Unique, Zero, field, record)

FORMAT = "STB"
MAGIC = b"STB0"
VERSION = 1
EXTENSIONS = (".stb",)

ALIGN = 64
MAX_RANK = 8
#: tensor_id is a u8 and ids are unique, so a file holds at most 256 tensors
MAX_TENSORS = 256
#: ranks stored directly in dims[3]; above this dims[0] indexes a caller-supplied shape table
DIRECT_RANK = 3


class Rule(RuleId):
    """Every rule an STB file is checked against."""
    MAGIC = "STB-7.1-MAGIC", 'magic is "STB0"'
    VERSION = "STB-7.1-VERSION", "version is 0x01"
    DATA_OFFSET = "STB-7.2", "32 + 32 x tensor_count <= data_offset <= file_size"
    DATA_ALIGN = "STB-7.3", "data_offset is a multiple of 64"
    TENSOR_BOUNDS = "STB-7.4a", "offset + size_bytes <= file_size (computed without wrap-around)"
    TENSOR_START = "STB-7.4b", "offset >= data_offset"
    TENSOR_ALIGN = "STB-7.4c", "offset is a multiple of 64 (strict=False: a warning; the KHANARY writer packs)"
    DTYPE = "STB-7.4d-DTYPE", "dtype is known (0 float32, 1 float16, 2 int8, 3 int32)"
    LAYOUT = "STB-7.4d-LAYOUT", "layout is known (0 ROW_MAJOR, 1 COL_MAJOR, 2 CHANNELS_LAST)"
    FILE_SIZE = "STB-3-FILE-SIZE", "file_size equals the real file length"
    FLAGS = "STB-3-FLAGS", "header flags are 0"
    RESERVED = "STB-3-RESERVED", "reserved0 and reserved1 are 0"
    TRUNCATED = "STB-TRUNCATED", "the header and the whole tensor table lie inside the file"
    COUNT = "STB-COUNT", "tensor_count <= 256 (unique u8 tensor ids)"
    RANK = "STB-4-RANK", "rank is 0..8"
    TENSOR_ID = "STB-TENSOR-ID", "tensor ids are unique"
    SIZE = "STB-4-SIZE", "size_bytes = product(dims[:rank]) x element size (rank <= 3, or a known shape)"
    SHAPE = "STB-4-SHAPE", "a rank > 3 tensor needs a shape table entry dims[0] of that rank"


#: the rules a lenient reader (strict=False) reports as warnings: the KHANARY reference writer
#: packs tensors back to back and knows more layouts (DECISIONS.md, STB)
RELAXABLE = (Rule.TENSOR_ALIGN, Rule.LAYOUT)


class DType(enum.IntEnum):
    FLOAT32 = 0
    FLOAT16 = 1
    INT8 = 2
    INT32 = 3


class Layout(enum.IntEnum):
    ROW_MAJOR = 0
    COL_MAJOR = 1
    CHANNELS_LAST = 2


#: element types: name, array type, size
DTYPES = ElementTypes({DType.FLOAT32: ("float32", "float32", 4), DType.FLOAT16: ("float16", "float16", 2),
                       DType.INT8: ("int8", "int8", 1), DType.INT32: ("int32", "int32", 4)})
DTYPE_ITEMSIZE = DTYPES.itemsize
DTYPE_NAMES = DTYPES.names

Header = record(
    "Header",
    field("magic", cs.Bytes(4), 'ASCII "STB0"', Eq(MAGIC, Rule.MAGIC, "magic")),
    field("version", cs.Int8ul, "0x01 for this spec", Eq(VERSION, Rule.VERSION, "version")),
    field("flags", cs.Int8ul, "reserved, must be 0", Zero(Rule.FLAGS)),
    field("tensor_count", cs.Int16ul, "number of tensor descriptors", Range(0, MAX_TENSORS, Rule.COUNT, "MAX_TENSORS")),
    field("reserved0", cs.Int32ul, "reserved (0)", Zero(Rule.RESERVED)),
    field("reserved1", cs.Int32ul, "reserved (0)", Zero(Rule.RESERVED)),
    field("data_offset", cs.Int64ul, "start of the raw data region", Multiple(ALIGN, Rule.DATA_ALIGN)),
    field("file_size", cs.Int64ul, "total file size in bytes"),
    fmt=FORMAT, size=32, doc="Header, at offset 0.",
)

Descriptor = record(
    "Descriptor",
    field("tensor_id", cs.Int8ul, "local tensor id (0-255), unique; KHANARY shape_id selects it"),
    field("dtype", cs.Int8ul, "element type", OneOf(DType, Rule.DTYPE)),
    field("rank", cs.Int8ul, "number of dimensions", Range(0, MAX_RANK, Rule.RANK)),
    field("layout", cs.Int8ul, "element order", OneOf(Layout, Rule.LAYOUT)),
    field("offset", cs.Int64ul, "absolute file offset of the data", Multiple(ALIGN, Rule.TENSOR_ALIGN)),
    field("size_bytes", cs.Int64ul, "total size of the data in bytes"),
    field("dims", cs.Array(3, cs.Int32ul), "rank <= 3: the extents; rank > 3: dims[0] indexes a shape table"),
    fmt=FORMAT, size=32, doc="Tensor descriptor, 32 bytes each, from offset 32.",
)

HEADER_SIZE = Header.sizeof()
DESCRIPTOR_SIZE = Descriptor.sizeof()

RECORDS = (Header, Descriptor)

#: the rules between fields, evaluated by the engine in this order
RELATIONS = (
    DeclaresSize("file_size", Rule.FILE_SIZE),
    Table(Descriptor, count="tensor_count", at=HEADER_SIZE, path="tensors", rule=Rule.TRUNCATED),
    Ordered(("Descriptor.END", "Header.data_offset", FILE_END), Rule.DATA_OFFSET),
    Region("Descriptor.offset", "Descriptor.size_bytes", Rule.TENSOR_BOUNDS, lo="Header.data_offset",
           rule_lo=Rule.TENSOR_START),
    Unique("Descriptor.tensor_id", Rule.TENSOR_ID),
    NBytes("Descriptor.size_bytes", "Descriptor.dtype", "Descriptor.dims", DTYPE_ITEMSIZE, Rule.SIZE,
           rank="Descriptor.rank", max_rank=DIRECT_RANK, names=DTYPE_NAMES),
)

from . import khanary as _khanary  # noqa: E402  (the glyph wiring is documented with the format)

RELATED = (_khanary,)
