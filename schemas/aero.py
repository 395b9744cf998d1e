"""AERO v0.1 — chunked model-weight container (the AERO v0.1 specification).

Layout::

    offset 0     File Header (96 B)
    96           TOC Header (16 B) + TOC Entry x N (80 B each)
    align 8      String Table (NUL-separated UTF-8, zero-padded to 8)
    align 16     Chunk payloads (WTSH uncompressed and 16-aligned)

All integers little-endian.  Every fact about the layout lives in this module once.
"""
from __future__ import annotations

import enum

import construct as cs

from .dsl import (
    FILE_END, Affine, ElementTypes, AnyValue, Bin, Bound, Checksum, Clear, Disjoint, Eq, Equal, In, Int, Key, Known, KnownFlags,
    Lacks, Has, ListOf, Map, Multiple, NBytes, OneOf, Ordered, Present, Range, RefersTo, Region, RuleId, Str, Text, Unique, Zero,
    Zeros,
    field, record,
)

FORMAT = "AERO"
MAGIC = b"AERO"
VERSION = (0, 1)
EXTENSIONS = (".aero",)

# ------------------------------------------------------------------ limits (aero.md "Limits")
MAX_ENTRY_COUNT = 1_000_000
MAX_STRING_TABLE = 512 * 1024 * 1024
MAX_METADATA_ULEN = 2 * 1024 * 1024 * 1024
#: reader safety limit (not in the spec): a compressed chunk inflates to at most
#: INFLATE_ALLOWANCE + MAX_INFLATE_RATIO x its stored length, from the first byte; real
#: msgpack/JSON indexes compress < 150x, a zstd bomb ~10^4 x (a 200 KB chunk claiming 2 GiB)
MAX_INFLATE_RATIO = 1000
INFLATE_ALLOWANCE = 1024 * 1024
#: decode budget of the TIDX chunk, in objects per stored byte (the engine's default is 2): a
#: tensor index of 1 M small tensors holds ~10 M msgpack objects in ~450 KB of zstd
TIDX_OBJECTS_PER_BYTE = 24
#: ranks above this are refused (no real model has them; it bounds shape products)
MAX_RANK = 64
#: the largest extent an array can have (numpy's intp)
MAX_DIM = 2**63 - 1
U64_MAX = 2**64 - 1

#: alignment of every chunk payload (absolute file offset)
CHUNK_ALIGN = 16
#: alignment of the string table start
STRTAB_ALIGN = 8
#: the writer's alignment of each tensor inside its shard (readers accept any)
TENSOR_ALIGN = 64
#: IHSH payload is zero-padded to this many bytes
IHSH_PAYLOAD_SIZE = 256
DEFAULT_PAGE_SIZE = 4 * 1024 * 1024


# ------------------------------------------------------------------ rule ids
class Rule(RuleId):
    """Every rule an AERO file is checked against; errors, docs and tests name these ids."""
    MAGIC = "AERO-MAGIC", "the file starts with the ASCII bytes AERO"
    VERSION = "AERO-VERSION", "container version is 0.1 (version_major 0, version_minor 1)"
    HEADER_SIZE = "AERO-HEADER-SIZE", "header_size is 96"
    RESERVED = "AERO-RESERVED", "reserved fields and reserved flag bits are zero"
    FILE_FLAGS = "AERO-FILE-FLAGS", "file_flags is 0"
    TRUNCATED = "AERO-TRUNCATED", "the file holds at least the 96-byte header"
    TOC_BOUNDS = "AERO-TOC-BOUNDS", "the TOC lies after the header and inside the file"
    TOC_LENGTH = "AERO-TOC-LENGTH", "toc_length = 16 + 80 x entry_count"
    LIMIT_ENTRY_COUNT = "AERO-LIMIT-ENTRY-COUNT", "entry_count <= MAX_ENTRY_COUNT"
    LIMIT_STRING_TABLE = "AERO-LIMIT-STRING-TABLE", "string_table_length <= MAX_STRING_TABLE"
    LIMIT_METADATA_ULEN = "AERO-LIMIT-METADATA-ULEN", "metadata chunks decompress to <= MAX_METADATA_ULEN"
    LIMIT_INFLATE = "AERO-LIMIT-INFLATE", ("a compressed chunk inflates to at most INFLATE_ALLOWANCE + "
                                           "MAX_INFLATE_RATIO x its stored length (reader safety limit)")
    LIMIT_DECODE = "AERO-LIMIT-DECODE", ("a metadata payload decodes to at most the engine's object budget for "
                                         "the bytes that store it (reader safety limit)")
    STRTAB_BOUNDS = "AERO-STRTAB-BOUNDS", "the string table is 8-aligned, inside the file, clear of header and TOC"
    NAME_BOUNDS = "AERO-NAME-BOUNDS", "every chunk name lies inside the string table"
    NAME_UTF8 = "AERO-NAME-UTF8", "chunk names are UTF-8 without NUL"
    CHUNK_FLAGS = "AERO-CHUNK-FLAGS", "chunk_flags has only ChunkFlags bits"
    CHUNK_BOUNDS = "AERO-CHUNK-BOUNDS", "every chunk payload lies inside the file"
    CHUNK_OVERLAP = "AERO-CHUNK-OVERLAP", "payloads overlap neither each other nor the control region"
    CHUNK_ALIGN = "AERO-CHUNK-ALIGN", "every chunk payload starts at a 16-byte boundary"
    CHUNK_ULEN = "AERO-CHUNK-ULEN", "an uncompressed chunk has chunk_ulen = chunk_length"
    CHUNK_DUPLICATE = "AERO-CHUNK-DUPLICATE", "no two chunks share fourcc and name"
    NEVER_COMPRESSED = "AERO-NEVER-COMPRESSED", "WTSH, IHSH and PHSH are never compressed"
    ZSTD = "AERO-ZSTD", "a compressed payload is one zstd stream of exactly chunk_ulen bytes (checked before inflating)"
    CHUNK_HASH = "AERO-CHUNK-HASH", "blake3_256 is the BLAKE3-256 of the uncompressed payload"
    MISSING_CHUNK = "AERO-MISSING-CHUNK", "the file has a TIDX chunk"
    PAYLOAD = "AERO-PAYLOAD", "msgpack/JSON payloads decode and have their declared shape"
    TIDX_DTYPE = "AERO-TIDX-DTYPE", "every tensor dtype is a DType value"
    TIDX_RANGE = "AERO-TIDX-RANGE", "shard ids, offsets and lengths are unsigned 64-bit; dims are 0..MAX_DIM"
    TIDX_SHARD = "AERO-TIDX-SHARD", "every shard_id names a WTSH chunk weights.shard{N}"
    TIDX_LEN = "AERO-TIDX-LEN", "data_len = product(shape) x element size (PACKED: opaque)"
    TIDX_DUPLICATE = "AERO-TIDX-DUPLICATE", "tensor names are unique"
    TENSOR_BOUNDS = "AERO-TENSOR-BOUNDS", "every tensor's bytes lie inside its shard"
    HASH_B3 = "AERO-HASH-B3", "hash_b3 is 64 hex chars equal to the BLAKE3-256 of the tensor bytes"
    IHSH = "AERO-IHSH", "IHSH digest = BLAKE3 of [0, payloads_start) with every TOC hash zeroed"
    PHSH = "AERO-PHSH", "PHSH lists the BLAKE3 of every page of its shard"
    PADDING = "AERO-PADDING", "string-table padding, gaps between chunks and the tail are zero"
    UNKNOWN_CHUNK = "AERO-UNKNOWN-CHUNK", "(warning) a chunk type this version does not know"
    BOOL = "AERO-BOOL", ("(a warning) every bool element is the byte 0 or 1: another byte reads as True here, "
                         "but formats that require 0 or 1 refuse it (checked by validate --full)")


#: rules whose findings are warnings (codec.engine.severity)
WARNINGS = (Rule.BOOL,)


# ------------------------------------------------------------------ enums
class ChunkFlags(enum.IntFlag):
    COMPRESSED_ZSTD = 0x0001
    CHUNK_IS_MMAP_CRITICAL = 0x0002
    CHUNK_IS_INDEX = 0x0004
    CHUNK_IS_OPTIONAL = 0x0008


class DType(enum.IntEnum):
    F16 = 0
    F32 = 1
    BF16 = 2
    F64 = 3
    I8 = 4
    U8 = 5
    I16 = 6
    U16 = 7
    I32 = 8
    U32 = 9
    I64 = 10
    U64 = 11
    BOOL = 12
    PACKED = 0x8000


#: the element types: the short names used by the spec, manifests and the CLI, the array type, the
#: element size (PACKED is opaque bytes: no array type)
DTYPES = ElementTypes({
    DType.F16: ("f16", "float16", 2), DType.F32: ("f32", "float32", 4), DType.BF16: ("bf16", "bfloat16", 2),
    DType.F64: ("f64", "float64", 8), DType.I8: ("i8", "int8", 1), DType.U8: ("u8", "uint8", 1),
    DType.I16: ("i16", "int16", 2), DType.U16: ("u16", "uint16", 2), DType.I32: ("i32", "int32", 4),
    DType.U32: ("u32", "uint32", 4), DType.I64: ("i64", "int64", 8), DType.U64: ("u64", "uint64", 8),
    DType.BOOL: ("bool", "bool", 1), DType.PACKED: ("packed", "", 1),
})
DTYPE_ITEMSIZE = DTYPES.itemsize
DTYPE_NAMES = DTYPES.names


class FourCC(bytes, enum.Enum):
    IHSH = b"IHSH"
    MJSN = b"MJSN"
    MMSG = b"MMSG"
    PHSH = b"PHSH"
    TIDX = b"TIDX"
    WTSH = b"WTSH"


#: chunk types whose payload must never be compressed
NEVER_COMPRESSED = (FourCC.WTSH, FourCC.IHSH, FourCC.PHSH)
#: chunk types decoded into memory, so bounded by MAX_METADATA_ULEN
METADATA_CHUNKS = (FourCC.MJSN, FourCC.MMSG, FourCC.TIDX, FourCC.IHSH, FourCC.PHSH)


class ChunkName:
    """The writer's chunk names and flags (DECISIONS.md, AERO writer)."""
    IHSH = "control.integrity"
    MJSN = "meta.json"
    MMSG = "manifest"
    TIDX = "tensors"

    @staticmethod
    def shard(n: int) -> str:
        return f"weights.shard{n}"

    @staticmethod
    def phsh(n: int) -> str:
        return f"weights.shard{n}.phsh"


WRITER_FLAGS = {
    FourCC.MJSN: 0,
    FourCC.MMSG: ChunkFlags.COMPRESSED_ZSTD,
    FourCC.TIDX: ChunkFlags.COMPRESSED_ZSTD | ChunkFlags.CHUNK_IS_INDEX,
    FourCC.WTSH: ChunkFlags.CHUNK_IS_MMAP_CRITICAL,
    FourCC.IHSH: ChunkFlags.CHUNK_IS_OPTIONAL,
    FourCC.PHSH: ChunkFlags.CHUNK_IS_OPTIONAL,
}


# ------------------------------------------------------------------ binary records
FileHeader = record(
    "FileHeader",
    field("magic", cs.Bytes(4), 'ASCII "AERO"', Eq(MAGIC, Rule.MAGIC, "magic")),
    field("version_major", cs.Int16ul, "container major version", Eq(0, Rule.VERSION, "version")),
    field("version_minor", cs.Int16ul, "container minor version", Eq(1, Rule.VERSION, "version")),
    field("header_size", cs.Int32ul, "size of this header", Eq(96, Rule.HEADER_SIZE)),
    field("toc_offset", cs.Int64ul, "byte offset of the TOC (after the header)",
          Range(96, None, Rule.TOC_BOUNDS)),
    field("toc_length", cs.Int64ul, "total bytes of the TOC (16 + 80 x entry_count)"),
    field("string_table_offset", cs.Int64ul, "byte offset of the string table",
          Multiple(STRTAB_ALIGN, Rule.STRTAB_BOUNDS)),
    field("string_table_length", cs.Int64ul, "bytes of the string table, padding included",
          Range(0, MAX_STRING_TABLE, Rule.LIMIT_STRING_TABLE, "MAX_STRING_TABLE")),
    field("file_flags", cs.Int64ul, "reserved, must be 0", Eq(0, Rule.FILE_FLAGS)),
    field("uuid", cs.Bytes(16), "file identity"),
    field("reserved", cs.Bytes(28), "must be zeros", Zero(Rule.RESERVED)),
    fmt=FORMAT, size=96, doc="File Header, at offset 0.",
)

TocHeader = record(
    "TocHeader",
    field("entry_count", cs.Int32ul, "number of TOC entries",
          Range(0, MAX_ENTRY_COUNT, Rule.LIMIT_ENTRY_COUNT, "MAX_ENTRY_COUNT")),
    field("reserved0", cs.Int32ul, "must be 0", Zero(Rule.RESERVED)),
    field("reserved1", cs.Int64ul, "must be 0", Zero(Rule.RESERVED)),
    fmt=FORMAT, size=16, doc="TOC Header, at toc_offset.",
)

TocEntry = record(
    "TocEntry",
    field("fourcc", cs.Bytes(4), "chunk type tag (ASCII)"),
    field("chunk_flags", cs.Int32ul, "bitmask of ChunkFlags", KnownFlags(ChunkFlags, Rule.CHUNK_FLAGS)),
    field("chunk_offset", cs.Int64ul, "absolute file offset of the payload",
          Multiple(CHUNK_ALIGN, Rule.CHUNK_ALIGN)),
    field("chunk_length", cs.Int64ul, "stored (possibly compressed) size"),
    field("chunk_ulen", cs.Int64ul, "uncompressed size"),
    field("name_off", cs.Int32ul, "offset into the string table"),
    field("name_len", cs.Int32ul, "length of the name in bytes"),
    field("reserved0", cs.Int64ul, "must be 0", Zero(Rule.RESERVED)),
    field("blake3_256", cs.Bytes(32), "BLAKE3-256 of the uncompressed payload"),
    fmt=FORMAT, size=80, doc="TOC Entry, 80 bytes each, right after the TOC Header.",
)

#: sizes the layout arithmetic uses, derived from the records above
HEADER_SIZE = FileHeader.sizeof()
TOC_HEADER_SIZE = TocHeader.sizeof()
TOC_ENTRY_SIZE = TocEntry.sizeof()

STRING_TABLE_DOC = (
    "String Table: each chunk name as UTF-8 followed by one NUL, names back to back, "
    f"zero-padded to a multiple of {STRTAB_ALIGN}; the padding is counted in string_table_length."
)


# ------------------------------------------------------------------ msgpack payloads
HEX64 = Str(min_len=64, max_len=64, charset="0123456789abcdefABCDEF", pattern_doc="64 hex chars",
            rule=Rule.HASH_B3)
U64 = Int((Range(0, U64_MAX, Rule.TIDX_RANGE),))

TidxEntry = Map(
    "TidxEntry",
    Key("name", Str(min_len=1, rule=Rule.PAYLOAD), doc="tensor name, unique in the file"),
    Key("dtype", Int((OneOf(DType, Rule.TIDX_DTYPE),)), doc="DType value"),
    Key("shape", ListOf(Int((Range(0, MAX_DIM, Rule.TIDX_RANGE, "MAX_DIM"),)), max_len=MAX_RANK, rule=Rule.PAYLOAD),
        doc="dimensions, C order"),
    Key("shard_id", U64, doc="which weights.shard{N} holds the bytes"),
    Key("data_off", U64, doc="byte offset inside the shard"),
    Key("data_len", U64, doc="byte length"),
    Key("flags", U64, required=False, doc="tensor flags (0)"),
    Key("hash_b3", HEX64, required=False, doc="BLAKE3-256 of the tensor bytes, hex"),
    Key("quant_id", Int(), required=False, doc="index into quant_descriptors (PACKED)"),
    Key("quant_params", AnyValue(map_only=True), required=False, doc="codec parameters (PACKED)"),
    rule=Rule.PAYLOAD, doc="One tensor of the TIDX index.",
)
Tidx = Map("Tidx", Key("tensors", ListOf(TidxEntry)), rule=Rule.PAYLOAD, doc="TIDX chunk payload.")

#: the file header's regions, evaluated by the engine once the header is read: the TOC lies inside
#: the file and holds at least its own header; the string table lies inside the file, clear of the
#: file header and of the TOC.  A file that breaks them is not read further.
HEADER_RELATIONS = (
    Region("FileHeader.toc_offset", "FileHeader.toc_length", Rule.TOC_BOUNDS),
    Ordered((TOC_HEADER_SIZE, "FileHeader.toc_length"), Rule.TOC_LENGTH, error="structure"),
    Region("FileHeader.string_table_offset", "FileHeader.string_table_length", Rule.STRTAB_BOUNDS,
           lo="FileHeader.END", lo_is_end=True, clear_of=("FileHeader.toc_offset", "FileHeader.toc_length")),
)

#: the TOC header against the file header, evaluated by the engine once the TOC header is read
#: ("FileHeader" and "TocHeader" as tables of one row); a file that breaks it is not read further
TOC_HEADER_RELATIONS = (
    Equal("FileHeader.toc_length", Affine(TOC_HEADER_SIZE, TOC_ENTRY_SIZE, "TocHeader.entry_count"), Rule.TOC_LENGTH),
)

#: the chunk kinds of the TOC, evaluated by the engine over the TOC entries: the tensor index
#: (Present: when the index is decoded, after MMSG; nothing can be read without it) and chunk
#: types this version does not know (Known: a warning of validate; readers skip them)
CHUNK_RELATIONS = (
    Present("TocEntry.fourcc", FourCC.TIDX.value, Rule.MISSING_CHUNK, at=HEADER_SIZE,
            what="TIDX chunk: the file has no tensor index"),
    Known("TocEntry.fourcc", tuple(f.value for f in FourCC), Rule.UNKNOWN_CHUNK),
)
#: bytes no digest covers are zero (checked by validate): the string table after its last name
#: ("StringTable": one row, its names from its start to the end of the last name's NUL), and
#: whatever lies between the control region, the chunks and the end of the file (every chunk
#: counts, usable or not: its bytes are not padding)
PADDING_RELATIONS = (
    Zeros("FileHeader.string_table_offset", "$string_table_end", Rule.PADDING, offset="StringTable.offset",
          length="StringTable.names_length", tail="string table padding"),
    Zeros("$control_end", FILE_END, Rule.PADDING, offset="TocEntry.chunk_offset", length="TocEntry.chunk_length",
          tail="bytes after the last chunk"),
)

#: the chunk names, as the reader slices them from the string table ("ChunkName.bytes", one row
#: per TOC entry; None for a name outside the string table: NAME-BOUNDS reports it), decoded by
#: the engine into "ChunkName.name"
NAME_RELATIONS = (
    Text("ChunkName.bytes", Rule.NAME_UTF8, name="ChunkName.name"),
)


#: every chunk's digest: where it is stored and what it covers (computed by the reader as the
#: payload is read: metadata chunks at open, every chunk in a full validation)
CHUNK_CHECKSUM = Checksum(record=TocEntry, field="blake3_256", algorithm="blake3-256", start=0,
                          end="chunk_ulen of the chunk's payload, uncompressed", rule=Rule.CHUNK_HASH)

#: the rules between the fields of the TOC entries (and the header), evaluated by the engine over
#: the TOC as a numpy view: a row that breaks one is an unusable chunk ("$control_end": where the
#: header, TOC and string table end; "TocEntry.key": the (fourcc, name) pair, decoded by the reader)
TOC_RELATIONS = (
    Region("TocEntry.name_off", "TocEntry.name_len", Rule.NAME_BOUNDS, hi="FileHeader.string_table_length"),
    Region("TocEntry.chunk_offset", "TocEntry.chunk_length", Rule.CHUNK_BOUNDS, hi=FILE_END,
           lo="$control_end", rule_lo=Rule.CHUNK_OVERLAP, lo_is_end=True, empty_anywhere=True),
    Clear("TocEntry.chunk_flags", ChunkFlags.COMPRESSED_ZSTD, Rule.NEVER_COMPRESSED,
          when=In("TocEntry.fourcc", tuple(f.value for f in NEVER_COMPRESSED))),
    Equal("TocEntry.chunk_ulen", "TocEntry.chunk_length", Rule.CHUNK_ULEN,
          when=Lacks("TocEntry.chunk_flags", ChunkFlags.COMPRESSED_ZSTD)),
    Bound("TocEntry.chunk_ulen", MAX_METADATA_ULEN, Rule.LIMIT_METADATA_ULEN,
          when=In("TocEntry.fourcc", tuple(f.value for f in METADATA_CHUNKS))),
    Bound("TocEntry.chunk_ulen", Affine(INFLATE_ALLOWANCE, MAX_INFLATE_RATIO, "TocEntry.chunk_length"),
          Rule.LIMIT_INFLATE, when=Has("TocEntry.chunk_flags", ChunkFlags.COMPRESSED_ZSTD)),
    Disjoint("TocEntry.chunk_offset", "TocEntry.chunk_length", Rule.CHUNK_OVERLAP),
    Unique("TocEntry.key", Rule.CHUNK_DUPLICATE),
)

#: the rules between the fields of the TIDX entries (and the chunks they name), evaluated by the
#: engine over the entries' columns: names first (as the index opens), the rest before the
#: first tensor is handed out; an index-only file (no WTSH) has no shards to refer to
RELATIONS = (
    Unique("TidxEntry.name", Rule.TIDX_DUPLICATE),
    NBytes("TidxEntry.data_len", "TidxEntry.dtype", "TidxEntry.shape",
           {k: v for k, v in DTYPE_ITEMSIZE.items() if k != DType.PACKED}, Rule.TIDX_LEN, names=DTYPE_NAMES,
           rule_shape=Rule.TIDX_RANGE),
    RefersTo("TidxEntry.shard_id", "WTSH chunk weights.shard", Rule.TIDX_SHARD, length_as="shard_length"),
    Region("TidxEntry.data_off", "TidxEntry.data_len", Rule.TENSOR_BOUNDS, hi="TidxEntry.shard_length"),
)

Mmsg = Map(
    "Mmsg",
    Key("format", Map("MmsgFormat", Key("name", Str()), Key("version", ListOf(Int()))),
        doc='{"name": "AERO", "version": [0, 1]}'),
    Key("model", AnyValue(map_only=True), required=False, doc="name, architecture"),
    Key("chunks", ListOf(AnyValue(map_only=True)), required=False),
    Key("shards", ListOf(AnyValue(map_only=True)), required=False),
    Key("quant_descriptors", ListOf(AnyValue(map_only=True)), required=False),
    rule=Rule.PAYLOAD, doc="MMSG chunk payload (manifest).",
)

Ihsh = Map(
    "Ihsh",
    Key("algo", Str(pattern="blake3-256", rule=Rule.IHSH)),
    Key("covered_ranges", ListOf(ListOf(U64, min_len=2, max_len=2), min_len=1, max_len=1)),
    Key("digest", Bin(32, Rule.IHSH)),
    rule=Rule.IHSH, doc="IHSH (AIP-0001): digest over [0, payloads_start) with TOC hashes zeroed.",
)

Phsh = Map(
    "Phsh",
    Key("shard_name", Str(min_len=1)),
    Key("page_size", Int((Range(1, U64_MAX, Rule.PHSH),))),
    Key("digests", ListOf(Bin(32, Rule.PHSH))),
    rule=Rule.PHSH, doc="PHSH (AIP-0002): per-page BLAKE3-256 of one WTSH shard.",
)

RECORDS = (FileHeader, TocHeader, TocEntry)
PAYLOADS = (Tidx, TidxEntry, Mmsg, Ihsh, Phsh)
