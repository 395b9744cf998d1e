"""safetensors — Hugging Face's tensor container.

Layout::

    0       header_length: u64 little-endian (N)
    8       the header: N bytes of UTF-8 JSON (an object), padded with spaces
    8 + N   the data: every tensor's bytes, back to back

The header maps each tensor name to ``{"dtype": "F32", "shape": [...], "data_offsets": [begin,
end]}`` (offsets relative to the start of the data) and may hold ``"__metadata__"``: an object of
text to text.  The tensors tile the data exactly: in offset order each begins where the previous
ends, and the last ends where the file does.

A model may be sharded as Hugging Face writes it: ``model.safetensors.index.json`` (the index,
declared below: ``{"metadata": {"total_size": N}, "weight_map": {tensor name: shard file}}``)
beside the shards ``model-00001-of-00003.safetensors`` ..., each a safetensors file as above.
"""
from __future__ import annotations

import construct as cs

from .dsl import (Agrees, ElementTypes, Int, Key, Linked, ListOf, Map, MapOf, NBytes, Range, RuleId, Str, Tiles, field,
                  record)

FORMAT = "SAFETENSORS"
EXTENSIONS = (".safetensors",)

#: the largest header the reference implementation reads (and so do we)
MAX_HEADER_BYTES = 100_000_000
#: the key holding the file's metadata (text to text)
METADATA_KEY = "__metadata__"
#: a header is padded to this multiple with spaces by writers (readers accept any length)
HEADER_ALIGN = 8
#: ranks above this are refused (no real model has them; it bounds shape products)
MAX_RANK = 64
U64_MAX = 2**64 - 1
#: the header's decode budget: it opens at most the engine's allowance of lists and maps
#: (codec.engine.payload.DECODE_OBJECTS_ALLOWANCE) plus one per this many bytes -- an entry takes at
#: least 51 bytes for its three ({...}, shape, data_offsets), so no honest header comes near it,
#: and a header of empty lists ("[],[],...") is refused before it is built
HEADER_BYTES_PER_CONTAINER = 16

#: a sharded model's index: its name ends with this (Hugging Face names it model.safetensors.index.json)
INDEX_SUFFIX = ".safetensors.index.json"
#: the index a directory holds, when it holds several (what Hugging Face writes)
INDEX_NAME = "model" + INDEX_SUFFIX
#: the name of shard ``no`` (from 1) of ``count``, for an index named ``stem`` + INDEX_SUFFIX
SHARD_NAME = "{stem}-{no:05d}-of-{count:05d}.safetensors"
#: reader safety limit: the index JSON is read whole, at most this big
MAX_INDEX_BYTES = 64 * 1024 * 1024


class Rule(RuleId):
    """Every rule a safetensors file is checked against."""
    HEADER_LENGTH = "SAFETENSORS-HEADER-LENGTH", ("the header length is 2..MAX_HEADER_BYTES and the header lies inside "
                                                  "the file")
    HEADER_JSON = "SAFETENSORS-HEADER-JSON", ("the header is UTF-8 JSON: one object, nothing after it but "
                                              "spaces; within the decode budget (HEADER_BYTES_PER_CONTAINER) and "
                                              "nesting at most the engine's MAX_NESTING deep")
    DUPLICATE = "SAFETENSORS-DUPLICATE", "no key appears twice in the header"
    ENTRY = "SAFETENSORS-ENTRY", ("every tensor entry has dtype, shape and data_offsets [begin, end], begin <= end; "
                                  "its shape is one an array can have; its name is valid Unicode text (no lone "
                                  "surrogate)")
    DTYPE = "SAFETENSORS-DTYPE", "dtype is one of the known element types"
    METADATA = "SAFETENSORS-METADATA", "__metadata__ is an object of text to text (valid Unicode: no lone surrogate)"
    NBYTES = "SAFETENSORS-NBYTES", "end - begin = product(shape) x element size"
    TILES = "SAFETENSORS-TILES", ("in offset order, every tensor begins where the previous ends, the first at 0, "
                                  "the last ends at the end of the file")
    BOOL = "SAFETENSORS-BOOL", ("(a warning) every bool element is the byte 0 or 1: another byte "
                                "reads as True here, but formats that require 0 or 1 refuse it (checked "
                                "by validate --full)")
    INDEX = "SAFETENSORS-INDEX", ("a sharded model's index (*.safetensors.index.json) is a JSON object of at most "
                                  "MAX_INDEX_BYTES: weight_map (tensor name -> shard file) and metadata.total_size")
    SHARD_PATH = "SAFETENSORS-SHARD-PATH", ("a shard the weight map names is a file inside the index's directory "
                                            "(not absolute, no '..', no symlink leading out)")
    SHARD_MISSING = "SAFETENSORS-SHARD-MISSING", "every shard the weight map names exists and is a regular file"
    SHARD_TENSOR = "SAFETENSORS-SHARD-TENSOR", ("every tensor the weight map names is in the shard it names, and "
                                                "every tensor of a shard is one the weight map puts there")
    TOTAL_SIZE = "SAFETENSORS-TOTAL-SIZE", ("(a warning) the index's metadata.total_size is the bytes of every "
                                            "tensor together (no reader needs it, and writers have counted it "
                                            "differently)")


#: rules whose findings are warnings (codec.engine.severity)
WARNINGS = (Rule.BOOL, Rule.TOTAL_SIZE)


#: the element types: the header names them; the codes (positions) are this library's, for the
#: columns the engine checks
DTYPES = ElementTypes(dict(enumerate([
    ("BOOL", "bool", 1), ("U8", "uint8", 1), ("I8", "int8", 1), ("U16", "uint16", 2), ("I16", "int16", 2),
    ("F16", "float16", 2), ("BF16", "bfloat16", 2), ("U32", "uint32", 4), ("I32", "int32", 4),
    ("F32", "float32", 4), ("U64", "uint64", 8), ("I64", "int64", 8), ("F64", "float64", 8),
    ("F8_E5M2", "float8_e5m2", 1), ("F8_E4M3", "float8_e4m3fn", 1),
])))
DTYPE_CODES = DTYPES.codes

Header = record(
    "Header",
    field("header_length", cs.Int64ul, "bytes of the JSON header that follows",
          Range(2, MAX_HEADER_BYTES, Rule.HEADER_LENGTH, "MAX_HEADER_BYTES")),
    fmt=FORMAT, size=8, doc="The first 8 bytes.",
)

Entry = Map(
    "Entry",
    Key("dtype", Str(one_of=tuple(DTYPES.codes), rule=Rule.DTYPE), doc="element type"),
    Key("shape", ListOf(Int((Range(0, U64_MAX, Rule.ENTRY),)), max_len=MAX_RANK, rule=Rule.ENTRY),
        doc="extents, C order"),
    Key("data_offsets", ListOf(Int((Range(0, U64_MAX, Rule.ENTRY),)), min_len=2, max_len=2, rule=Rule.ENTRY,
                               ascending=True),
        doc="[begin, end) relative to the start of the data"),
    rule=Rule.ENTRY, doc="One tensor of the header.",
)

Metadata = MapOf("Metadata", Str(), rule=Rule.METADATA, doc=f"The header's {METADATA_KEY!r} (optional): text to text.")

RECORDS = (Header,)

#: the rules between the entries' fields, over the columns the reader derives from the header
#: (``Entry.begin``, ``Entry.nbytes`` = end - begin, ``Entry.dtype`` as a code)
RELATIONS = (
    NBytes("Entry.nbytes", "Entry.dtype", "Entry.shape", DTYPES.itemsize, Rule.NBYTES, names=DTYPES.names,
           rule_shape=Rule.ENTRY),
    Tiles("Entry.begin", "Entry.nbytes", Rule.TILES, start=0, end="$data_length"),
)

# ------------------------------------------------------------------ a sharded model (Hugging Face)
IndexMetadata = Map("IndexMetadata", Key("total_size", Int((Range(0, U64_MAX, Rule.INDEX),)), required=False,
                                         doc="bytes of every tensor together"),
                    rule=Rule.INDEX, doc="The index's metadata (other keys tolerated).")
WeightMap = MapOf("WeightMap", Str(min_len=1, rule=Rule.SHARD_PATH), rule=Rule.INDEX,
                  doc="tensor name -> the shard file holding it (relative to the index's directory)")
Index = Map("Index", Key("metadata", IndexMetadata, required=False, doc="total_size"),
            Key("weight_map", WeightMap, doc="tensor name -> shard file"),
            rule=Rule.INDEX, doc="model.safetensors.index.json")

#: the shards the weight map names (each a ``{"path": file}`` entry of ``shards``, once each, in
#: the order the map first names them): each exists
SHARDS = Linked(at=("shards[]",), path="path", size=None, digest=None, algorithm="sha256",
                rule_missing=Rule.SHARD_MISSING, rule=Rule.SHARD_MISSING)
#: a tensor the weight map names is in the shard it names; a tensor of a shard is mapped to it
MAPPED = Agrees(source="the index's weight_map", target="a shard's header", key="name", fields=("shard",),
                rule=Rule.SHARD_TENSOR)
HELD = Agrees(source="a shard's header", target="the index's weight_map", key="name", fields=("shard",),
              rule=Rule.SHARD_TENSOR)
#: relations between the index and its shards (``codec.io.links`` evaluates them)
SHARD_RELATIONS = (SHARDS, MAPPED, HELD)

PAYLOADS = (Entry, Metadata, Index, IndexMetadata, WeightMap)
