"""AERO v0.1: what cannot be declarative — chunk semantics, payload decoding, reader, writer.

The layout is declared once in :mod:`schemas.aero`; records go through :mod:`codec.engine.records`
(header, TOC header) or its numpy path (the TOC entry table); msgpack payloads are checked by
:mod:`codec.engine.payload` against the declarations of the same module.

Reading has two levels (DECISIONS.md): *structure* is checked at open (cheap: header, TOC,
string table, TIDX/MMSG decoded and hash-verified, tensor names) and, once and vectorised,
before the first tensor is handed out (every TIDX entry: types, ranges, dtype x shape, bytes
inside the shard); *integrity* (``validate(full=True)``) adds every chunk's BLAKE3 streamed,
hash_b3, IHSH and PHSH.

The package's modules: :mod:`.chunks` (records, dtype tables, chunks, bounded zstd),
:mod:`.reader` (structure at open, tensors), :mod:`.validate` (integrity checks),
:mod:`.remote` (opening a file that is not here), :mod:`.layout` (where everything goes, an
in-memory builder), :mod:`.writer`.  Every name other modules use is importable from here.
"""
from __future__ import annotations

import os

from ...schemas import aero as S
from ...schemas.aero import DType, FourCC, Rule

from ...io.integrity import blake3_bytes
from ...registry import Capabilities, FormatDescriptor
from .chunks import B3, CODE_OF, FMT, HEADER, NP_DTYPES, TOC_ENTRY, TOC_HEADER, Chunk
from .layout import Layout, build_container
from .reader import AeroReader, tensor_view, validate_file
from .remote import OPEN_PREFIX, open_partial
from .writer import TensorSpec, Written, index_only, plan_shards, prepare, write_aero, write_aero_file

__all__ = ["AeroReader", "B3", "CAPABILITIES", "CODE_OF", "Chunk", "DESCRIPTOR", "DType", "FMT", "FourCC",
           "HEADER", "Layout", "NP_DTYPES", "OPEN_PREFIX", "Rule", "S", "TOC_ENTRY", "TOC_HEADER", "TensorSpec",
           "Written", "blake3_bytes", "build_container", "index_only", "open_partial", "plan_shards", "prepare",
           "tensor_view", "validate_file", "write_aero", "write_aero_file"]


# =============================================================================== registry
def _demo(out_dir: str, model: dict) -> list:
    """Two AERO files (plain; sharded with control-region and page hashes) and a copy of the
    first with one bit flipped in a tensor, which validate reports."""
    from ..hooks import flip_bit, show
    plain, sharded = os.path.join(out_dir, "tiny-mlp.aero"), os.path.join(out_dir, "tiny-mlp-sharded.aero")
    write_aero(plain, model, uuid=bytes(16), model_name="tiny-mlp", architecture="mlp",
               metadata={"license": "CC0", "note": "modelcodec demo"})
    write_aero(sharded, model, uuid=bytes(range(16)), model_name="tiny-mlp", architecture="mlp",
               max_shard_bytes=32 * 1024, control_integrity=True, page_hashes=True, page_size=16 * 1024)
    bad = os.path.join(out_dir, "corrupted.aero")
    with AeroReader(plain) as r:
        flip_bit(plain, bad, r.tensors["layer.0.weight"].offset + 5)
    return [*show(plain), *show(sharded), *show(bad, expect=1, note="   # one flipped bit in layer.0.weight")[1:]]


CAPABILITIES = Capabilities(frozenset({dt.name for c, dt in NP_DTYPES.items() if c != DType.PACKED} | {"packed"}),
                            max_rank=S.MAX_RANK, metadata="json", lazy=True,
                            common_keys=(("architecture", "architecture"), ("model_name", "model_name")))


def _cgen() -> list:
    """The C++ reader's generated header (cpp/include/aero/generated.hpp): this schema, plus the
    element type names the reader gives (``TensorInfo.common_dtype``, the ``dtype`` of
    ``inspect --json``) for each dtype code."""
    from ..hooks import CgenSpec
    common = {int(c): ("packed" if c == DType.PACKED else dt.name) for c, dt in NP_DTYPES.items()}
    array = {int(c): dt.name for c, dt in NP_DTYPES.items()}  # (the element type of the array tensor() gives)
    return [CgenSpec("cpp/include/aero/generated.hpp", "schema_aero", S,
                     {"DTYPE_COMMON_NAMES": common, "DTYPE_ARRAY_NAMES": array}, order=0)]


DESCRIPTOR = FormatDescriptor("aero", S, AeroReader, write_aero, magic=S.MAGIC, capabilities=CAPABILITIES, demo=_demo,
                              open_ranges=open_partial, cgen=lambda: _cgen(),
                              summary="chunked container: BLAKE3, zstd, msgpack tensor index")
