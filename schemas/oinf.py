"""OINF — Open Infer Neural Format v1 (the OINF v1 specification).

Layout::

    [FileHeader 69 B + 3 zero pad][SizeVarsTable][MetadataTable][TensorIndexTable][DataBlobs...]

All little-endian; offsets from the file start; every section start and every blob aligned to 8
and padded with zeros.  A String is ``u32 length, bytes[length], zero pad to 8`` (the pad makes
4 + length + pad a multiple of 8), characters ``[A-Za-z0-9._-]``, non-empty.  Table records are
packed (a tensor entry's u64 dims follow three u32s without alignment).
"""
from __future__ import annotations

import enum

import construct as cs

from .dsl import (Aligned, ElementTypes, FILE_END, Chars, DeclaresSize, Eq, Has, In, KnownFlags, Lacks, Multiple, NBytes, OneOf, Ordered,
                  Range, Records, Region, RuleId, Unique, Zero, Zeroed, Zeros, field, record)

FORMAT = "OINF"
MAGIC = b"OINF\x00"
VERSION = 1
EXTENSIONS = (".oinf",)
ALIGN = 8
NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
#: ranks above this are refused (bounds dims arrays before they are read)
MAX_NDIM = 64


class Rule(RuleId):
    """Every rule an OINF file is checked against."""
    MAGIC = "OINF-MAGIC", 'magic is "OINF\\0"'
    VERSION = "OINF-VERSION", "version is 1 (the reference's version 2 is another layout)"
    RESERVED = "OINF-RESERVED", "header flags and reserved are 0"
    ALIGN = "OINF-ALIGN", "section offsets, blob offsets and paddings are 8-aligned"
    PADDING = "OINF-PADDING", "padding bytes are zero"
    OFFSETS = "OINF-OFFSETS", "offset_sizevars (72) <= offset_metadata <= offset_tensors <= offset_data <= file_size"
    FILE_SIZE = "OINF-FILE-SIZE", "file_size equals the real file length"
    TRUNCATED = "OINF-TRUNCATED", "tables and strings lie inside their sections and the file"
    NAME = "OINF-NAME", "names are non-empty, of [A-Za-z0-9._-]"
    DUPLICATE = "OINF-DUPLICATE", "names are unique within a table"
    VALUE_TYPE = "OINF-VALUE-TYPE", "metadata value_type is 1..15"
    VALUE_FLAGS = "OINF-VALUE-FLAGS", "metadata value_flags is 0"
    VALUE_NBYTES = "OINF-VALUE-NBYTES", ("value_nbytes is the scalar size (1/2/4/8, bool 1) or, for STRING, "
                                         "BITSET and NDARRAY, the padded payload size")
    BOOL = "OINF-BOOL", "bool bytes are 0 or 1"
    BLOB_BOUNDS = "OINF-BLOB-BOUNDS", "every blob lies inside [offset_data, file_size)"
    TENSOR_DTYPE = "OINF-TENSOR-DTYPE", "tensor dtype is 1..12 (BITSET, STRING, NDARRAY are metadata only)"
    TENSOR_FLAGS = "OINF-TENSOR-FLAGS", "tensor flags has only HAS_DATA (bit 0)"
    NO_DATA = "OINF-NO-DATA", "a tensor without HAS_DATA has data_offset = data_nbytes = 0"
    NBYTES = "OINF-NBYTES", "data_nbytes = numel x sizeof(dtype)"
    NDIM = "OINF-NDIM", "ndim <= 64"
    DIM = "OINF-DIM", "the shape is one an array can have: extents, and their non-zero product x size, <= 2^63-1"
    BITSET = "OINF-BITSET", "byte_count = ceil(bit_count / 8)"
    NDARRAY = "OINF-NDARRAY", "NDARRAY element_type is numeric or bool (1..12) and its data fits value_nbytes"


class ValueType(enum.IntEnum):
    I8 = 1
    I16 = 2
    I32 = 3
    I64 = 4
    U8 = 5
    U16 = 6
    U32 = 7
    U64 = 8
    F16 = 9
    F32 = 10
    F64 = 11
    BOOL = 12
    BITSET = 13
    STRING = 14
    NDARRAY = 15


#: the value types a tensor (or an NDARRAY element) may have: numeric and bool (1-12)
TensorType = enum.IntEnum("TensorType", {m.name: m.value for m in ValueType if m <= ValueType.BOOL},
                          module=__name__)


class TensorFlags(enum.IntFlag):
    HAS_DATA = 0x1


#: element size of every numeric/bool type; the short names the verifier prints
#: the element types (ValueType 1-12): name, array type, size
DTYPES = ElementTypes({1: ("i8", "int8", 1), 2: ("i16", "int16", 2), 3: ("i32", "int32", 4), 4: ("i64", "int64", 8),
                       5: ("u8", "uint8", 1), 6: ("u16", "uint16", 2), 7: ("u32", "uint32", 4),
                       8: ("u64", "uint64", 8), 9: ("f16", "float16", 2), 10: ("f32", "float32", 4),
                       11: ("f64", "float64", 8), 12: ("bool", "bool", 1)})
TYPE_SIZE = DTYPES.itemsize
TYPE_NAMES = {**DTYPES.names, 13: "bitset", 14: "str", 15: "ndarray"}


def string_fields(name: str, doc: str, min_len: int = 1):
    """The String encoding, expanded into a record as ``<name>_length, <name>, <name>_pad``.
    Names are non-empty (DECISIONS.md); a STRING value may be empty (``min_len=0``)."""
    return (
        field(f"{name}_length", cs.Int32ul, f"bytes of {name}", *([Range(min_len, None, Rule.NAME)] if min_len else [])),
        field(name, cs.Bytes(cs.this[f"{name}_length"]), doc, Chars(NAME_CHARS, Rule.NAME, "[A-Za-z0-9._-]")),
        field(f"{name}_pad", cs.Bytes((8 - (cs.this[f"{name}_length"] + 4) % 8) % 8),
              "zeros to a multiple of 8", Zero(Rule.PADDING)),
    )


FileHeader = record(
    "FileHeader",
    field("magic", cs.Bytes(5), '"OINF\\0"', Eq(MAGIC, Rule.MAGIC, "magic")),
    field("version", cs.Int32ul, "format version", Eq(VERSION, Rule.VERSION, "version")),
    field("flags", cs.Int32ul, "must be 0", Zero(Rule.RESERVED)),
    field("n_sizevars", cs.Int32ul, "size variables"),
    field("n_metadata", cs.Int32ul, "metadata entries"),
    field("n_tensors", cs.Int32ul, "tensor entries"),
    field("reserved", cs.Int32ul, "must be 0", Zero(Rule.RESERVED)),
    field("offset_sizevars", cs.Int64ul, "SizeVarsTable start", Multiple(ALIGN, Rule.ALIGN)),
    field("offset_metadata", cs.Int64ul, "MetadataTable start", Multiple(ALIGN, Rule.ALIGN)),
    field("offset_tensors", cs.Int64ul, "TensorIndexTable start", Multiple(ALIGN, Rule.ALIGN)),
    field("offset_data", cs.Int64ul, "data section start", Multiple(ALIGN, Rule.ALIGN)),
    field("file_size", cs.Int64ul, "exact file length"),
    field("pad", cs.Bytes(3), "zeros to 72", Zero(Rule.PADDING)),
    fmt=FORMAT, size=72, doc="FileHeader: 69 packed bytes, padded to 72.",
)

SizeVar = record(
    "SizeVar",
    *string_fields("name", "size variable name"),
    field("value", cs.Int64ul, "value"),
    fmt=FORMAT, doc="SizeVarsTable entry.",
)

MetadataEntry = record(
    "MetadataEntry",
    *string_fields("key", "metadata key"),
    field("value_type", cs.Int32ul, "ValueType", OneOf(ValueType, Rule.VALUE_TYPE)),
    field("value_flags", cs.Int32ul, "must be 0", Zero(Rule.VALUE_FLAGS)),
    field("value_nbytes", cs.Int64ul, "payload size: unpadded for scalars/bool, padded otherwise"),
    field("value_offset", cs.Int64ul, "absolute offset of the payload blob", Multiple(ALIGN, Rule.ALIGN)),
    fmt=FORMAT, doc="MetadataTable entry.",
)

TensorEntry = record(
    "TensorEntry",
    *string_fields("name", "tensor name"),
    field("dtype", cs.Int32ul, "ValueType 1-12", OneOf(TensorType, Rule.TENSOR_DTYPE)),
    field("ndim", cs.Int32ul, "number of dimensions", Range(0, MAX_NDIM, Rule.NDIM)),
    field("flags", cs.Int32ul, "bit 0 = HAS_DATA", KnownFlags(TensorFlags, Rule.TENSOR_FLAGS)),
    field("dims", cs.Array(cs.this.ndim, cs.Int64ul), "extents, row-major"),
    field("data_nbytes", cs.Int64ul, "numel x sizeof(dtype); 0 without HAS_DATA"),
    field("data_offset", cs.Int64ul, "absolute offset of the data blob; 0 without HAS_DATA",
          Multiple(ALIGN, Rule.ALIGN)),
    fmt=FORMAT, doc="TensorIndexTable entry.",
)

StringPayload = record(
    "StringPayload",
    *string_fields("text", "the string (metadata STRING value)", min_len=0),
    fmt=FORMAT, doc="STRING metadata payload; value_nbytes = 4 + length + pad.",
)

BitsetPayload = record(
    "BitsetPayload",
    field("bit_count", cs.Int32ul, "number of bits"),
    field("byte_count", cs.Int32ul, "ceil(bit_count / 8)"),
    field("bits", cs.Bytes(cs.this.byte_count), "LSB-first within each byte"),
    field("bits_pad", cs.Bytes((8 - (cs.this.byte_count + 8) % 8) % 8), "zeros to a multiple of 8",
          Zero(Rule.PADDING)),
    fmt=FORMAT, doc="BITSET metadata payload; value_nbytes = 8 + byte_count + pad.",
)

NdarrayHeader = record(
    "NdarrayHeader",
    field("element_type", cs.Int32ul, "numeric/bool ValueType", OneOf(TensorType, Rule.NDARRAY)),
    field("ndim", cs.Int32ul, "number of dimensions", Range(0, MAX_NDIM, Rule.NDIM)),
    field("dims", cs.Array(cs.this.ndim, cs.Int64ul), "extents"),
    fmt=FORMAT, doc="NDARRAY metadata payload header; row-major data and zero pad to 8 follow.",
)

RECORDS = (FileHeader, SizeVar, MetadataEntry, TensorEntry, StringPayload, BitsetPayload, NdarrayHeader)

#: where the sections start: right after the header (padded to 8)
HEADER_SIZE = FileHeader.sizeof()

#: the rules between fields, evaluated by the engine in this order
RELATIONS = (
    DeclaresSize("file_size", Rule.FILE_SIZE),
    Ordered((HEADER_SIZE, "FileHeader.offset_sizevars", HEADER_SIZE), Rule.OFFSETS, error="structure", fatal=True),
    Ordered(("FileHeader.offset_sizevars", "FileHeader.offset_metadata", "FileHeader.offset_tensors",
             "FileHeader.offset_data", FILE_END), Rule.OFFSETS, error="structure", fatal=True),
    Records(SizeVar, count="n_sizevars", at="FileHeader.offset_sizevars", path="sizevars",
            end="FileHeader.offset_metadata", rule=Rule.TRUNCATED),
    Zeros("SizeVar.END", "FileHeader.offset_metadata", Rule.PADDING),
    Records(MetadataEntry, count="n_metadata", at="FileHeader.offset_metadata", path="metadata",
            end="FileHeader.offset_tensors", rule=Rule.TRUNCATED),
    Zeros("MetadataEntry.END", "FileHeader.offset_tensors", Rule.PADDING),
    Records(TensorEntry, count="n_tensors", at="FileHeader.offset_tensors", path="tensors",
            end="FileHeader.offset_data", rule=Rule.TRUNCATED),
    Zeros("TensorEntry.END", "FileHeader.offset_data", Rule.PADDING),
    Unique("SizeVar.name", Rule.DUPLICATE),
    Unique("MetadataEntry.key", Rule.DUPLICATE),
    Unique("TensorEntry.name", Rule.DUPLICATE),
)

#: the rules on each metadata blob and tensor entry, evaluated once the tables are read (a
#: row's findings are reported in row order, each row's before its value is decoded)
DATA_RELATIONS = (
    Region("MetadataEntry.value_offset", "MetadataEntry.value_nbytes", Rule.BLOB_BOUNDS, lo="FileHeader.offset_data",
           when=(In("MetadataEntry.value_type", tuple(ValueType)), Aligned("MetadataEntry.value_offset", ALIGN)),
           what="blob"),
    NBytes("TensorEntry.data_nbytes", "TensorEntry.dtype", "TensorEntry.dims", TYPE_SIZE, Rule.NBYTES,
           rule_shape=Rule.DIM, when=Has("TensorEntry.flags", TensorFlags.HAS_DATA), rank="TensorEntry.ndim",
           max_rank=MAX_NDIM, names=TYPE_NAMES),
    Zeroed(("TensorEntry.data_offset", "TensorEntry.data_nbytes"), Rule.NO_DATA,
           when=Lacks("TensorEntry.flags", TensorFlags.HAS_DATA), blame="TensorEntry.data_nbytes"),
    Region("TensorEntry.data_offset", "TensorEntry.data_nbytes", Rule.BLOB_BOUNDS, lo="FileHeader.offset_data",
           when=(Has("TensorEntry.flags", TensorFlags.HAS_DATA), Aligned("TensorEntry.data_offset", ALIGN)),
           what="blob"),
)
