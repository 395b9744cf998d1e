"""GGUF — llama.cpp's model container (versions 2 and 3).

Layout::

    0      Header: magic "GGUF", version, tensor_count, metadata_kv_count
    24     metadata_kv_count key/value pairs: key (string), value_type (u32), value
           tensor_count tensor infos: name (string), n_dims (u32), dims (u64 x n_dims), type
           (u32, a ggml type), offset (u64, from the start of the data)
           padding to ``general.alignment`` (default 32)
           the data: every tensor at an aligned offset

A string is a u64 length and that many UTF-8 bytes; an array is an element type (u32), a count
(u64) and the elements (arrays may nest).  All little-endian.  ``dims`` lists the fastest-
varying extent first (numpy's shape is the reverse).  Quantized ggml types store blocks of
``block`` elements in ``size`` bytes each (the first extent is a multiple of the block).

A model may be split as llama.cpp's gguf-split writes it: ``NAME-00001-of-00003.gguf`` ..., each
a GGUF file holding some of the tensors and the keys ``split.no`` (u16, from 0), ``split.count``
(u16) and ``split.tensors.count`` (i32, the tensors of every split together); the first split
holds the model's metadata.
"""
from __future__ import annotations

import enum

import construct as cs

from .dsl import Aligned, Disjoint, Eq, Linked, Member, OneOf, Range, Records, Region, RuleId, Text, Unique, field, record

FORMAT = "GGUF"
MAGIC = b"GGUF"
VERSIONS = (2, 3)
EXTENSIONS = (".gguf",)

DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
#: the keys holding what every format calls a model's architecture and name (conversion carries
#: them between formats under each one's own key)
COMMON_KEYS = (("architecture", "general.architecture"), ("model_name", "general.name"))
#: ggml's limit on dimensions
MAX_DIMS = 4
#: arrays of arrays nest at most this deep (an array of numbers is 1 deep): the reader refuses a
#: deeper value, the writer refuses to write one
MAX_ARRAY_DEPTH = 8
#: the key/values' decode budget: the arrays of arrays in them hold at most the engine's allowance
#: (codec.engine.payload.DECODE_OBJECTS_ALLOWANCE) plus one inner array per this many bytes of the file
#: -- refused before they are built (an empty array takes 12 bytes; real files hold a few)
BYTES_PER_INNER_ARRAY = 64
#: a file read over HTTP: the most its key/values and tensor infos may take (read in growing
#: prefixes, the first REMOTE_FIRST_READ bytes)
REMOTE_HEADER_LIMIT = 64 * 1024 * 1024
REMOTE_FIRST_READ = 1024 * 1024

#: a split model (llama.cpp's gguf-split): the keys every split holds, and the name of split
#: ``no`` (from 1) of ``count`` of a model named ``stem``
SPLIT_NO_KEY, SPLIT_COUNT_KEY, SPLIT_TENSORS_KEY = "split.no", "split.count", "split.tensors.count"
SPLIT_NAME = "{stem}-{no:05d}-of-{count:05d}.gguf"
#: a file name of that form (the first split's names the model)
SPLIT_PATTERN = r"(?P<stem>.*)-(?P<no>[0-9]{5})-of-(?P<count>[0-9]{5})\.gguf"


class Rule(RuleId):
    """Every rule a GGUF file is checked against."""
    MAGIC = "GGUF-MAGIC", 'the file starts with "GGUF"'
    VERSION = "GGUF-VERSION", "version is 2 or 3"
    TRUNCATED = "GGUF-TRUNCATED", "counts, strings, arrays and tensor infos lie inside the file (checked before reading)"
    STRING = "GGUF-STRING", "strings (keys, names, values) are UTF-8"
    KEY = "GGUF-KEY", "metadata keys are unique"
    VALUE_TYPE = "GGUF-VALUE-TYPE", ("a value type is one of the 13 GGUF types; arrays nest at most MAX_ARRAY_DEPTH "
                                          "deep, within the decode budget (BYTES_PER_INNER_ARRAY)")
    ALIGNMENT = "GGUF-ALIGNMENT", "general.alignment, when present, is a u32 power of two"
    TENSOR_TYPE = "GGUF-TENSOR-TYPE", "a tensor's type is a known ggml type"
    DIMS = "GGUF-DIMS", ("n_dims is 1..4, extents >= 0, the first a multiple of the type's block, and the shape one "
                         "an array can have")
    DUPLICATE = "GGUF-DUPLICATE", "tensor names are unique"
    DATA_ALIGN = "GGUF-DATA-ALIGN", "every tensor's offset is a multiple of the alignment"
    BOUNDS = "GGUF-BOUNDS", "every tensor's bytes lie inside the data"
    OVERLAP = "GGUF-OVERLAP", "tensors' bytes do not overlap"
    HEADER_LIMIT = "GGUF-HEADER-LIMIT", ("read over HTTP, the key/values and tensor infos take at most "
                                         "REMOTE_HEADER_LIMIT bytes")
    SPLIT = "GGUF-SPLIT", ("the splits of a model agree: split i (from 0) has split.no = i (u16), split.count (u16) "
                           "is the number of splits, split.tensors.count (i32) the tensors of every split together, "
                           "and no tensor is in two splits")
    SPLIT_MISSING = "GGUF-SPLIT-MISSING", "every split of a split model (NAME-0000i-of-0000N.gguf) exists"


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


#: the numpy type of each fixed-size value type
VALUE_NUMPY = {ValueType.UINT8: "u1", ValueType.INT8: "i1", ValueType.UINT16: "<u2", ValueType.INT16: "<i2",
               ValueType.UINT32: "<u4", ValueType.INT32: "<i4", ValueType.FLOAT32: "<f4", ValueType.BOOL: "?",
               ValueType.UINT64: "<u8", ValueType.INT64: "<i8", ValueType.FLOAT64: "<f8"}

#: ggml tensor types: code -> (name, elements per block, bytes per block, numpy type or None: packed)
GGML_TYPES = {
    0: ("F32", 1, 4, "float32"), 1: ("F16", 1, 2, "float16"), 2: ("Q4_0", 32, 18, None), 3: ("Q4_1", 32, 20, None),
    6: ("Q5_0", 32, 22, None), 7: ("Q5_1", 32, 24, None), 8: ("Q8_0", 32, 34, None), 9: ("Q8_1", 32, 40, None),
    10: ("Q2_K", 256, 84, None), 11: ("Q3_K", 256, 110, None), 12: ("Q4_K", 256, 144, None),
    13: ("Q5_K", 256, 176, None), 14: ("Q6_K", 256, 210, None), 15: ("Q8_K", 256, 292, None),
    16: ("IQ2_XXS", 256, 66, None), 17: ("IQ2_XS", 256, 74, None), 18: ("IQ3_XXS", 256, 98, None),
    19: ("IQ1_S", 256, 50, None), 20: ("IQ4_NL", 32, 18, None), 21: ("IQ3_S", 256, 110, None),
    22: ("IQ2_S", 256, 82, None), 23: ("IQ4_XS", 256, 136, None), 24: ("I8", 1, 1, "int8"), 25: ("I16", 1, 2, "int16"),
    26: ("I32", 1, 4, "int32"), 27: ("I64", 1, 8, "int64"), 28: ("F64", 1, 8, "float64"), 29: ("IQ1_M", 256, 56, None),
    30: ("BF16", 1, 2, "bfloat16"), 34: ("TQ1_0", 256, 54, None), 35: ("TQ2_0", 256, 66, None),
    39: ("MXFP4", 32, 17, None), 40: ("NVFP4", 64, 36, None), 41: ("Q1_0", 128, 18, None),
}

#: a quantized tensor carried by another format (AERO's PACKED dtype) names its ggml type in its
#: codec parameters under this key: {"ggml_type": 2} is Q4_0 (the AERO spec's own example)
QUANT_TYPE_KEY = "ggml_type"
#: llama.cpp refuses tensor names of GGML_MAX_NAME (64) bytes or more
MAX_NAME_BYTES = 63

Header = record(
    "Header",
    field("magic", cs.Bytes(4), 'ASCII "GGUF"', Eq(MAGIC, Rule.MAGIC, "magic")),
    field("version", cs.Int32ul, "2 or 3", OneOf(VERSIONS, Rule.VERSION)),
    field("tensor_count", cs.Int64ul, "number of tensor infos"),
    field("kv_count", cs.Int64ul, "number of metadata key/value pairs"),
    fmt=FORMAT, size=24, doc="Header, at offset 0.",
)


def _string(name: str, doc: str) -> tuple:
    """A GGUF string as two fields: ``<name>_length`` (u64) and that many bytes."""
    return (field(f"{name}_length", cs.Int64ul, f"bytes of the {name}"),
            field(name, cs.Bytes(cs.this[f"{name}_length"]), doc))


String = record(
    "String",
    *_string("text", "UTF-8"),
    fmt=FORMAT, doc="A string value, and each string of an array of strings (variable size: 8 + text_length bytes).",
)

KeyValue = record(
    "KeyValue",
    *_string("key", "UTF-8, unique"),
    field("value_type", cs.Int32ul, "the value's type; the value follows", OneOf(ValueType, Rule.VALUE_TYPE)),
    fmt=FORMAT, doc="A key/value pair's key and type (variable size: 12 + key_length bytes), then the value: "
                    "a number of the type's size, a String or an ArrayHead and its elements. kv_count of them "
                    "right after the header.",
)

ArrayHead = record(
    "ArrayHead",
    field("type", cs.Int32ul, "the elements' type (arrays may nest)", OneOf(ValueType, Rule.VALUE_TYPE)),
    field("count", cs.Int64ul, "number of elements"),
    fmt=FORMAT, size=12, doc="The head of an array value; its elements follow back to back.",
)

TensorInfo = record(
    "TensorInfo",
    *_string("name", "UTF-8"),
    field("n_dims", cs.Int32ul, "number of extents", Range(1, MAX_DIMS, Rule.DIMS, "MAX_DIMS")),
    field("dims", cs.Array(cs.this.n_dims, cs.Int64ul), "extents, the fastest-varying first"),
    field("type", cs.Int32ul, "a ggml type (GGML_TYPES)"),
    field("offset", cs.Int64ul, "where the tensor's bytes start, from the start of the data"),
    fmt=FORMAT, doc="Tensor info (variable size: 24 + name_length + 8 x n_dims bytes), tensor_count of them "
                    "right after the key/values.",
)

RECORDS = (Header, KeyValue, String, ArrayHead, TensorInfo)

# ----------------------------------------------------------------------------- ggml blocks
#: QK_K: the elements of a block of the "K" types (and of the IQ4_XS, TQ types)
QK_K = 256


def _block(code: int, doc: str, *fields) -> cs.Struct:
    """The block of ggml type ``code``: its fields in order, its size asserted to be the type's
    bytes per block in GGML_TYPES (one source of truth)."""
    name, elements, size, _ = GGML_TYPES[code]
    return record(f"Block{name}", *fields, fmt=FORMAT, size=size, doc=f"{doc} ({elements} elements)")


_d = field("d", cs.Float16l, "scale (IEEE half)")
_dm = (field("d", cs.Float16l, "scale of the sub-block scales (IEEE half)"),
       field("dmin", cs.Float16l, "scale of the sub-block minimums (IEEE half)"))
_scales12 = field("scales", cs.Bytes(12), "8 scales and 8 minimums of 6 bits: for j < 4, scale j is the low 6 bits "
                                          "of byte j and minimum j of byte j+4; for j >= 4, the low nibble of byte "
                                          "j+4 (scale) or its high nibble (minimum), the top two bits from the top "
                                          "two bits of byte j-4 (scale) or byte j (minimum)")
_nibbles = "element j in the low nibble of byte j, element j+16 in its high nibble"

#: the block of each packed ggml type that is dequantized here (ggml's block structs), by type
#: code.  Each block's doc gives an element's value x from its quantized integer q and the
#: block's fields (sc, mn: its sub-block's scale and minimum), computed in float32 in the order
#: written (a product, then a difference), as ggml does
BLOCKS = {
    2: _block(2, "Q4_0: 4-bit values q, x = d*(q-8)", _d, field("qs", cs.Bytes(16), _nibbles)),
    3: _block(3, "Q4_1: 4-bit values q, x = d*q + m", _d, field("m", cs.Float16l, "minimum (IEEE half)"),
              field("qs", cs.Bytes(16), _nibbles)),
    6: _block(6, "Q5_0: 5-bit values q, x = d*(q-16)", _d,
              field("qh", cs.Int32ul, "the fifth bit of element j in bit j"), field("qs", cs.Bytes(16), _nibbles)),
    7: _block(7, "Q5_1: 5-bit values q, x = d*q + m", _d, field("m", cs.Float16l, "minimum (IEEE half)"),
              field("qh", cs.Int32ul, "the fifth bit of element j in bit j"), field("qs", cs.Bytes(16), _nibbles)),
    8: _block(8, "Q8_0: 8-bit values q, x = d*q", _d, field("qs", cs.Array(32, cs.Int8sl), "element j")),
    9: _block(9, "Q8_1: 8-bit values q, x = d*q; the 40-byte block GGML_TYPES and gguf-py give, ggml's older "
                 "block_q8_1 (its current one holds d and s as halves, in 36 bytes)",
              field("d", cs.Float32l, "scale (IEEE single)"),
              field("s", cs.Float32l, "d times the sum of the block's q (IEEE single; for dot products, not "
                                      "read to dequantize)"),
              field("qs", cs.Array(32, cs.Int8sl), "element j")),
    10: _block(10, "Q2_K: 2-bit values q in 16 sub-blocks of 16, x = (d*sc)*q - dmin*mn",
               field("scales", cs.Bytes(16), "sub-block i: scale in the low nibble of byte i, minimum in the high"),
               field("qs", cs.Bytes(64), "element 128*h + 32*s + l (h < 2, s < 4, l < 32): bits 2s..2s+1 of "
                                         "byte 32*h + l"), *_dm),
    11: _block(11, "Q3_K: 3-bit values q in 16 sub-blocks of 16, x = (d*(sc-32))*q",
               field("hmask", cs.Bytes(32), "the high bit of element 128*h + 32*s + l: bit 4h+s of byte l "
                                            "(set: q as is; clear: q - 4)"),
               field("qs", cs.Bytes(64), "the low 2 bits, as Q2_K's qs"),
               field("scales", cs.Bytes(12), "16 scales of 6 bits, minus 32: the low nibble of scale i from byte "
                                             "i (i < 8, low nibble) or byte i-8 (high nibble), its top two bits "
                                             "bits 2(i//4)..2(i//4)+1 of byte 8 + i%4"),
               _d),
    12: _block(12, "Q4_K: 4-bit values q in 8 sub-blocks of 32, x = (d*sc)*q - dmin*mn", *_dm, _scales12,
               field("qs", cs.Bytes(128), "sub-block 2k in the low nibbles of bytes 32k..32k+31, 2k+1 in their "
                                          "high nibbles")),
    13: _block(13, "Q5_K: 5-bit values q in 8 sub-blocks of 32, x = (d*sc)*q - dmin*mn", *_dm, _scales12,
               field("qh", cs.Bytes(32), "the fifth bit of element l of sub-block i: bit i of byte l"),
               field("qs", cs.Bytes(128), "the low 4 bits, as Q4_K's qs")),
    14: _block(14, "Q6_K: 6-bit values q in 16 sub-blocks of 16, x = (d*sc)*(q-32)",
               field("ql", cs.Bytes(128), "the low 4 bits of element 128*h + 32*s + l: byte 64*h + 32*(s%2) + "
                                          "l, its low nibble for s < 2, its high nibble after"),
               field("qh", cs.Bytes(64), "its top 2 bits: bits 2s..2s+1 of byte 32*h + l"),
               field("scales", cs.Array(16, cs.Int8sl), "sub-block scales (signed)"), _d),
    15: _block(15, "Q8_K: 8-bit values q, x = d*q",
               field("d", cs.Float32l, "scale (IEEE single)"), field("qs", cs.Array(QK_K, cs.Int8sl), "element j"),
               field("bsums", cs.Array(16, cs.Int16sl), "the sum of the q of elements 16i..16i+15 (for dot "
                                                        "products, not read to dequantize)")),
    20: _block(20, "IQ4_NL: 4-bit indices q, x = d*IQ4_VALUES[q]", _d, field("qs", cs.Bytes(16), _nibbles)),
    23: _block(23, "IQ4_XS: 4-bit indices q in 8 sub-blocks of 32, x = (d*(sc-32))*IQ4_VALUES[q]", _d,
               field("scales_h", cs.Int16ul, "the top 2 bits of sub-block i's 6-bit scale: bits 2i..2i+1"),
               field("scales_l", cs.Bytes(4), "the low 4 bits of sub-block i's scale: byte i//2, low nibble "
                                              "for even i"),
               field("qs", cs.Bytes(128), "sub-block i in bytes 16i..16i+15, as IQ4_NL's qs")),
    34: _block(34, "TQ1_0: ternary digits q (0..2), five per byte of qs and four per byte of qh, x = (q-1)*d",
               field("qs", cs.Bytes(48), "digit n (0..4) of byte b is (((b*3^n) mod 256)*3) >> 8; element "
                                         "32n + l from byte l < 32, then 160 + 16n + l from byte 32 + l"),
               field("qh", cs.Bytes(4), "element 240 + 4n + j: digit n (0..3) of byte j"), _d),
    35: _block(35, "TQ2_0: 2-bit values q, x = (q-1)*d",
               field("qs", cs.Bytes(64), "element 128*h + 32*s + l: bits 2s..2s+1 of byte 32*h + l"), _d),
    39: _block(39, "MXFP4: 4-bit indices q, x = MXFP4_VALUES[q] * 2^(e-128)",
               field("e", cs.Int8ul, "shared exponent (E8M0)"), field("qs", cs.Bytes(16), _nibbles)),
    40: _block(40, "NVFP4: 4-bit indices q in 4 sub-blocks of 16, x = MXFP4_VALUES[q] * (UE4M3(sc)/2)",
               field("d", cs.Array(4, cs.Int8ul), "sub-block i's scale sc, an unsigned E4M3 byte (UE4M3): bit 7 "
                                                  "ignored, e = bits 3..6, m = bits 0..2; (1 + m/8) * 2^(e-7), "
                                                  "or m * 2^-9 when e = 0; the bytes 0x00 and 0x7F "
                                                  "(NVFP4_ZERO_SCALES) are 0"),
               field("qs", cs.Bytes(32), "sub-block i in bytes 8i..8i+7: its element j in the low nibble of "
                                         "byte 8i+j, j+8 in its high nibble")),
    41: _block(41, "Q1_0: 1-bit values q, x = d if q is 1, -d if it is 0", _d,
               field("qs", cs.Bytes(16), "element j in bit j%8 of byte j//8")),
}
#: the blocks, documented with the records (inside the tensors' data: not part of the file's structure)
DATA_RECORDS = tuple(BLOCKS.values())
#: IQ4_NL's and IQ4_XS's 16 values (ggml's kvalues_iq4nl)
IQ4_VALUES = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
#: MXFP4's 16 values, twice those of FP4 E2M1 (ggml's kvalues_mxfp4; the scale halves them)
MXFP4_VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)
#: NVFP4's scale bytes that stand for 0 (0x7F, E4M3's NaN, too: ggml's ggml_ue4m3_to_fp32)
NVFP4_ZERO_SCALES = (0x00, 0x7F)
HEADER_SIZE = Header.sizeof()

#: the rules between the key/values (their keys, as the reader reads them) and between the tensor
#: infos' fields (RELATIONS), over the columns the reader derives (offsets from the start of the data, byte
#: sizes and blocks from the type's traits)
KV_RELATIONS = (
    Unique("KeyValue.key", Rule.KEY),
)

#: the tensor infos, read by the engine where the key/values end ("$infos_at", the reader's
#: cursor): a record that does not fit ends the read (GGUF-TRUNCATED); names are UTF-8
INFO_RELATIONS = (
    Records(TensorInfo, count="tensor_count", at="$infos_at", path="tensors"),
    Text("TensorInfo.name", Rule.STRING),
)

RELATIONS = (
    Member("Tensor.type", tuple(GGML_TYPES), Rule.TENSOR_TYPE, names={k: v[0] for k, v in GGML_TYPES.items()}),
    Aligned("Tensor.dim0", "Tensor.block", Rule.DIMS),  # (a quantized type stores whole blocks)
    Unique("Tensor.name", Rule.DUPLICATE),
    Aligned("Tensor.offset", "$alignment", Rule.DATA_ALIGN),
    Region("Tensor.offset", "Tensor.nbytes", Rule.BOUNDS, hi="$data_length", hi_is_end=True),
    Disjoint("Tensor.offset", "Tensor.nbytes", Rule.OVERLAP),
)

#: the splits of a split model (each a ``{"path": file}`` entry of ``splits``, the names
#: SPLIT_NAME gives for the first split's split.count): each exists
SPLITS = Linked(at=("splits[]",), path="path", size=None, digest=None, algorithm="sha256",
                rule_missing=Rule.SPLIT_MISSING, rule=Rule.SPLIT_MISSING)
#: relations between the files of a split model (``codec.io.links`` evaluates them)
SPLIT_RELATIONS = (SPLITS,)
