"""AEROSET v0.1/v0.2 — a multi-file AERO model (the AEROSET specification).

Layout::

    model/
      model.aeroset.json   the JSON index declared below (unknown fields tolerated)
      index.aero           global MMSG + TIDX (with hash_b3), no weights
      part-000.aero        valid AERO files holding the WTSH shards listed in parts[].shards
      ...

A tensor is found by its global shard id -> the part that lists it -> the tensor *by name* in
that part's TIDX (so both global-id parts and the reference's part-local parts read).
"""
from __future__ import annotations

from . import http
from .dsl import Agrees, AnyValue, Int, Key, Linked, ListOf, Map, Range, RuleId, Str

FORMAT = "AEROSET"
INDEX_SUFFIX = ".aeroset.json"
VERSIONS = ([0, 1], [0, 2])
#: the index JSON is read whole: refuse bigger ones before reading them
MAX_INDEX_BYTES = 64 * 1024 * 1024
#: reader safety limit: index.aero (no weights: MMSG + the global TIDX) is read whole and checked
#: against its sha256 before any of it is trusted, so it may be at most this big
MAX_GLOBAL_TIDX_BYTES = 256 * 1024 * 1024
U64_MAX = 2**64 - 1
#: reader safety limit (not in the spec): a part or index file is at most 128 TiB, so that no
#: size from an index (local or remote) can overflow an offset, a seek or an allocation -- the
#: transport's own limit on any remote file
MAX_FILE_BYTES = http.MAX_FILE_BYTES
HEX = "0123456789abcdefABCDEF"
#: reader rule (not in the spec): a local set whose files were gone before they could be opened
#: because a writer replaced the set meanwhile is opened again from its new index (and a listing
#: of its directory made again), at most this many times
OPEN_ATTEMPTS = 20


class Rule(RuleId):
    """Every rule an AEROSET is checked against (its parts also obey every AERO rule; a remote set's
    reads, the transport's rules of ``schemas.http``)."""
    INDEX = "AEROSET-INDEX", "the index is JSON with the declared shape"
    FORMAT = "AEROSET-FORMAT", 'format is {"name": "AEROSET", "version": [0, 1] or [0, 2]}'
    LIMIT = "AEROSET-LIMIT", "the index JSON is at most MAX_INDEX_BYTES; a size_bytes is at most MAX_FILE_BYTES"
    PATH = "AEROSET-PATH", "local paths are relative and stay inside the set's directory (no '..', no escaping symlink)"
    MISSING = "AEROSET-MISSING", "every file the index lists exists and can be read"
    SHARD = "AEROSET-SHARD", "every shard id belongs to exactly one part, and every tensor's shard to some part"
    TENSOR = "AEROSET-TENSOR", "every tensor of the global TIDX is in the TIDX of the part holding its shard, alike"
    PART_HASH = "AEROSET-PART-HASH", "a part's (and index.aero's) sha256 and size_bytes match the file"


FileRef = Map(
    "FileRef",
    Key("path", Str(min_len=1, rule=Rule.PATH), doc="relative path (or an http(s) URL in v0.2)"),
    Key("sha256", Str(min_len=64, max_len=64, charset=HEX, pattern_doc="64 hex chars", rule=Rule.INDEX),
        required=False, doc="SHA-256 of the whole file"),
    Key("size_bytes", Int((Range(0, MAX_FILE_BYTES, Rule.LIMIT, "MAX_FILE_BYTES"),)), required=False,
        doc="file size"),
    rule=Rule.INDEX, doc="A file of the set.",
)

Part = Map(
    "Part",
    *FileRef.keys,
    Key("shards", ListOf(Int((Range(0, U64_MAX, Rule.SHARD),))), doc="global shard ids held by this part"),
    rule=Rule.INDEX, doc="One part file and the shards it holds.",
)

Index = Map(
    "Index",
    Key("format", Map("IndexFormat", Key("name", Str()), Key("version", ListOf(Int(), min_len=2, max_len=2)),
                      rule=Rule.FORMAT), doc='{"name": "AEROSET", "version": [0, 1]}'),
    Key("model", AnyValue(map_only=True), required=False, doc="name, architecture"),
    Key("base_url", Str(min_len=1, rule=http.Rule.URL), required=False, doc="v0.2: base for relative paths"),
    Key("parts", ListOf(Part), doc="the part files"),
    Key("global_tidx", FileRef, doc="index.aero"),
    Key("cache", AnyValue(map_only=True), required=False, doc="v0.2: client cache hints"),
    rule=Rule.INDEX, doc="model.aeroset.json",
)

#: the files the index lists: each exists, and matches its size_bytes and sha256 when given
FILES = Linked(at=("global_tidx", "parts[]"), path="path", size="size_bytes", digest="sha256", algorithm="sha256",
               rule_missing=Rule.MISSING, rule=Rule.PART_HASH)
#: a tensor is described alike by index.aero and by the part holding its shard
TENSORS = Agrees(source="index.aero TIDX", target="the TIDX of the part holding its shard", key="name",
                 fields=("dtype", "shape", "data_len", "hash_b3"), rule=Rule.TENSOR)
#: relations between the set's files (``codec.io.links`` evaluates them)
FILE_RELATIONS = (FILES, TENSORS)

RECORDS = ()
PAYLOADS = (Index, Part, FileRef)
#: documented and audited with the format: the transport a remote set is read over
RELATED = (http,)
