"""MAG — magnetron storage format v1 (the MAG specification).

Layout::

    offset 0    File Header (24 B)
    24          Metadata Record x num_meta_kv   (variable: key)
                Tensor Record x num_tensors     (variable: shape[rank], key)
                tensor data, each buffer at a 64-aligned absolute offset (padding not checked)

All integers little-endian.  The header checksum is CRC-32C (Castagnoli) over the bytes
[12, end of the last tensor record): magic, version and the checksum field are not covered.
The packed ``aux`` words are little-endian u32 bit fields; their fields fall on byte
boundaries (bits 0-7, 8-15, 16-31), so they are declared as byte-sized fields.
"""
from __future__ import annotations

import enum

import construct as cs

from .dsl import (ElementTypes, Checksum, Disjoint, Eq, Extents, Fits, Multiple, NBytes, OneOf, Range, Records, Region, RuleId, Size,
                  Text, Unique, Zero, field, record)

FORMAT = "MAG"
MAGIC = b"MAG!"
VERSION = 1
#: a newer, different format that reuses the magic (magnetron dev builds)
VERSION_NEWER = 100
EXTENSIONS = (".mag",)

# ------------------------------------------------------------------ limits (mag.md "Limits")
MAX_KEY_LENGTH = 2**16 - 1
MAX_TENSORS = 2**32 - 1
MAX_META_KV = 2**32 - 1
MIN_RANK = 1
MAX_RANK = 255
MAX_DIM = 2**63 - 1
MAX_NUMEL = 2**63 - 1
MAX_NBYTES = 2**63 - 1
TENSOR_ALIGN = 64


class Rule(RuleId):
    """Every rule a MAG file is checked against."""
    MAGIC = "MAG-MAGIC", 'the file starts with "MAG!"'
    VERSION = "MAG-VERSION", "version is 1 (100 is a newer, different format)"
    RESERVED = "MAG-RESERVED", "header aux and the reserved aux bits of every record are zero"
    TRUNCATED = "MAG-TRUNCATED", "the header and every record lie inside the file"
    COUNT = "MAG-COUNT", "num_meta_kv and num_tensors records fit in the bytes that exist"
    CHECKSUM = "MAG-CHECKSUM", "checksum = CRC-32C of [12, end of the last tensor record)"
    META_TYPE = "MAG-META-TYPE", "metadata type is 1 (i64) or 2 (f64)"
    KEY_LENGTH = "MAG-KEY-LENGTH", "keys are at most 65535 bytes"
    KEY_UTF8 = "MAG-KEY-UTF8", "keys are UTF-8"
    DUPLICATE = "MAG-DUPLICATE", "keys are unique among tensors and among metadata (separately)"
    DTYPE = "MAG-DTYPE", "tensor dtype is 0 (f32), 1 (f16), 2 (bool) or 3 (i32)"
    RANK = "MAG-RANK", "tensor rank is 1..255"
    DIM = "MAG-DIM", "every dimension is 1..2^63-1"
    NUMEL = "MAG-NUMEL", "numel = product of the shape, <= 2^63-1"
    ALIGN = "MAG-ALIGN", "every tensor data offset is a multiple of 64"
    BOUNDS = "MAG-BOUNDS", "tensor data lies after the records and inside the file"
    OVERLAP = "MAG-OVERLAP", "tensor data buffers do not overlap"
    BOOL = "MAG-BOOL", ("(a warning) every bool element is the byte 0 or 1: another byte reads as "
                      "True here, but formats that require 0 or 1 refuse it (checked by validate --full)")


#: rules whose findings are warnings (codec.engine.severity)
WARNINGS = (Rule.BOOL,)


class MetaType(enum.IntEnum):
    I64 = 1
    F64 = 2


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BOOL = 2
    I32 = 3


#: element types: name, array type, size
DTYPES = ElementTypes({DType.F32: ("float32", "float32", 4), DType.F16: ("float16", "float16", 2),
                       DType.BOOL: ("bool", "bool", 1), DType.I32: ("int32", "int32", 4)})
DTYPE_ITEMSIZE = DTYPES.itemsize
DTYPE_NAMES = DTYPES.names

FileHeader = record(
    "FileHeader",
    field("magic", cs.Bytes(4), 'ASCII "MAG!"', Eq(MAGIC, Rule.MAGIC, "magic")),
    field("version", cs.Int32ul, "format version", Eq(VERSION, Rule.VERSION, "version")),
    field("checksum", cs.Int32ul, "CRC-32C of [12, end of the last tensor record)"),
    field("num_tensors", cs.Int32ul, "number of tensor records (<= MAX_TENSORS by its width)"),
    field("num_meta_kv", cs.Int32ul, "number of metadata records (<= MAX_META_KV by its width)"),
    field("aux", cs.Int32ul, "reserved, must be 0", Zero(Rule.RESERVED)),
    fmt=FORMAT, size=24, doc="File Header, at offset 0.",
)

MetadataRecord = record(
    "MetadataRecord",
    field("type", cs.Int8ul, "aux bits 0-7: value type", OneOf(MetaType, Rule.META_TYPE)),
    field("aux_reserved", cs.Bytes(3), "aux bits 8-31: reserved", Zero(Rule.RESERVED)),
    field("payload", cs.Int64ul, "value bits: i64 two's complement or f64 IEEE-754"),
    field("key_length", cs.Int32ul, "bytes of the key", Range(0, MAX_KEY_LENGTH, Rule.KEY_LENGTH, "MAX_KEY_LENGTH")),
    field("key", cs.Bytes(cs.this.key_length), "UTF-8, not NUL-terminated"),
    fmt=FORMAT, doc="Metadata Record (variable size: 16 + key_length bytes).",
)

TensorRecord = record(
    "TensorRecord",
    field("dtype", cs.Int8ul, "aux bits 0-7: element type", OneOf(DType, Rule.DTYPE)),
    field("rank", cs.Int8ul, "aux bits 8-15: number of dimensions", Range(MIN_RANK, MAX_RANK, Rule.RANK)),
    field("aux_reserved", cs.Int16ul, "aux bits 16-31: reserved", Zero(Rule.RESERVED)),
    field("numel", cs.Int64ul, "number of elements = product(shape)", Range(0, MAX_NUMEL, Rule.NUMEL)),
    field("offset", cs.Int64ul, "absolute file offset of the data", Range(0, MAX_NBYTES, Rule.BOUNDS),
          Multiple(TENSOR_ALIGN, Rule.ALIGN)),
    field("shape", cs.Array(cs.this.rank, cs.Int64ul), "rank dimensions"),
    field("key_length", cs.Int32ul, "bytes of the key", Range(0, MAX_KEY_LENGTH, Rule.KEY_LENGTH, "MAX_KEY_LENGTH")),
    field("key", cs.Bytes(cs.this.key_length), "UTF-8, not NUL-terminated"),
    fmt=FORMAT, doc="Tensor Record (variable size: 24 + 8 x rank + key_length bytes).",
)

#: the header checksum: where it is stored and what it covers
HEADER_CHECKSUM = Checksum(record=FileHeader, field="checksum", algorithm="crc32c", start=12,
                           end="end of the last tensor record", rule=Rule.CHECKSUM)

RECORDS = (FileHeader, MetadataRecord, TensorRecord)

HEADER_SIZE = FileHeader.sizeof()

#: the rules between fields, evaluated by the engine in this order
RELATIONS = (
    Fits((("num_meta_kv", MetadataRecord), ("num_tensors", TensorRecord)), at=HEADER_SIZE, rule=Rule.COUNT),
    Records(MetadataRecord, count="num_meta_kv", at=HEADER_SIZE, path="meta"),
    Records(TensorRecord, count="num_tensors", at="MetadataRecord.END", path="tensors"),
    Unique("MetadataRecord.key", Rule.DUPLICATE),
    NBytes("TensorRecord.numel", None, "TensorRecord.shape", None, Rule.NUMEL),
    Size("TensorRecord.nbytes", count="TensorRecord.numel", dtype="TensorRecord.dtype", itemsize=DTYPE_ITEMSIZE),
    Region("TensorRecord.offset", "TensorRecord.nbytes", Rule.BOUNDS, lo="TensorRecord.END", empty_anywhere=True),
    Unique("TensorRecord.key", Rule.DUPLICATE),
    Disjoint("TensorRecord.offset", "TensorRecord.nbytes", Rule.OVERLAP),
)

#: the rules on each record's key and shape, evaluated once the records are read (each row's
#: findings are reported with that row's other findings)
RECORD_RELATIONS = (
    Text("MetadataRecord.key", Rule.KEY_UTF8),
    Text("TensorRecord.key", Rule.KEY_UTF8),
    Extents("TensorRecord.shape", 1, MAX_DIM, Rule.DIM),
)
