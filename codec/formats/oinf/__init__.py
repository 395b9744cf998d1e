"""OINF v1: reader, validation, writer, and the seed's dataclass API.

Records (header, the three tables, STRING/BITSET/NDARRAY payload headers) and the rules between
their fields (section order, names, blob bounds, HAS_DATA, numel x size) are declared in
:mod:`schemas.oinf` and evaluated by the engine; this package adds what each metadata value
holds (its decoding, value_nbytes of a payload, bool bytes), typed metadata values, the
streaming writer, and the dataclass export of the reference tool (``TensorSpec``,
``UninitializedTensor``, ``write_oinf``, ``dataclass_to_oinf``, ``SizeVar``, ``Bitset``,
``ScalarValue``) — its two seed examples come out byte-identical to the reference files.

Modules: :mod:`.values` (records, type tables, typed values), :mod:`.reader`,
:mod:`.writer`, :mod:`.from_dataclass`; every name is importable from here.
"""
from __future__ import annotations

import os

import numpy as np

from ...schemas import oinf as S

from ...io.writer_io import array_pieces  # noqa: F401  (re-exported)
from .from_dataclass import OinfModel, dataclass_to_oinf, load_dataclass, write_oinf
from .reader import OinfReader, validate_file
from .values import (BITSET, DTYPES, FMT, HEADER, META, NDARRAY, NP_DTYPES, SIZEVAR, STRING, TAG_OF, TAG_OF_NAME, TENSOR,
                     Bitset, ScalarValue, SizeVar, TensorSpec, UninitializedTensor)
from .writer import encode_value, write_oinf_file

__all__ = ["BITSET", "FMT", "HEADER", "META", "NDARRAY", "NP_DTYPES", "SIZEVAR", "STRING", "TAG_OF", "TAG_OF_NAME",
           "TENSOR", "Bitset", "OinfModel", "OinfReader", "ScalarValue", "SizeVar", "TensorSpec", "UninitializedTensor",
           "dataclass_to_oinf", "encode_value", "load_dataclass", "validate_file", "write_oinf", "write_oinf_file",
           "DESCRIPTOR"]


# =============================================================================== registry
def _demo(out_dir: str, model: dict) -> list:
    """The sample with size variables, typed metadata and an uninitialized tensor."""
    import ml_dtypes
    from ..hooks import show
    tensors = {}
    for n, a in model.items():
        if a.dtype == ml_dtypes.bfloat16 or a.dtype == np.float64:
            a = a.astype(np.float32)
        tensors[n.replace("_", ".")] = a
    p = os.path.join(out_dir, "tiny-mlp.oinf")
    write_oinf_file(p, sizevars={"D": 64, "V": 256}, metadata={"activation": "relu", "lr": 3e-4, "tied": False},
                    tensors={**tensors, "kv.cache": UninitializedTensor("f16", (2, 64))})
    return show(p)


def cmd_from_dataclass(a) -> int:
    """``modelcodec oinf from-dataclass``: the seed tool's dataclass_to_oinf on the command line."""
    inst = load_dataclass(a.input, a.json)
    write_oinf(inst, a.output)
    print(f"wrote {a.output}")
    return 0


def _commands(sub) -> None:
    s = sub.add_parser("oinf", help="OINF tools")
    oinf_sub = s.add_subparsers(dest="oinf_cmd", required=True)
    o = oinf_sub.add_parser("from-dataclass", help="write a dataclass instance as OINF (the dataclass_to_oinf API)")
    o.add_argument("--input", required=True, metavar="MODULE:CLASS")
    o.add_argument("--json", metavar="DATA.json", help="field values (else CLASS() or the module's build*())")
    o.add_argument("--output", required=True, metavar="OUT")
    o.set_defaults(func=cmd_from_dataclass)


from ...registry import Capabilities, FormatDescriptor  # noqa: E402

DESCRIPTOR = FormatDescriptor("oinf", S, OinfReader, write_oinf_file, magic=S.MAGIC, demo=_demo,
                              capabilities=Capabilities(DTYPES.array_names, strict_bools=True,
                                                        max_rank=S.MAX_NDIM, names="[A-Za-z0-9._-]+",
                                                        names_doc="made of [A-Za-z0-9._-]", metadata="typed",
                                                        text="[A-Za-z0-9._-]*", lazy=True, without_data=True,
                                                        sizevars=True),
                              commands=_commands,
                              summary="Open Infer Neural Format v1: sizevars, typed metadata")
