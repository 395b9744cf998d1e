"""STB conformance details: layouts, shape tables and relaxed mode over
../shared/vectors/stb/manifest.json; every vector's verdict is in tests/test_conformance.py."""
import hashlib

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.stb import StbReader
from codec.schemas.stb import Rule

from .conftest import manifest, vectors_dir
from .test_conformance import VERDICTS

VDIR = vectors_dir("stb")
ENTRIES = manifest("stb")["vectors"]

def shape_table(v):
    """The manifest's shape table, or (v11, written by the reference) the one its dims[0] implies."""
    if "shape_table" in v:
        return v["shape_table"]
    deep = [t for t in v["tensors"] if t["rank"] > 3]
    return {t["dims_raw"][0]: t["shape"] for t in deep} or None


def check_tensors(r, v):
    assert sorted(r.tensors, key=int) == sorted((str(t["tensor_id"]) for t in v["tensors"]), key=int)
    for t in v["tensors"]:
        info = r.tensors[str(t["tensor_id"])]
        a = r.tensor(t["tensor_id"])
        assert info.dtype_name == t["dtype"] and info.extra["layout"] == t["layout"]
        assert (info.offset, info.nbytes) == (t["offset"], t["size_bytes"])
        assert list(a.shape) == t.get("shape", t["dims"])
        assert not a.flags.writeable
        assert hashlib.sha256(a.tobytes(order="A")).hexdigest() == t["sha256"]  # the stored bytes
        if t["layout"] == 1:
            assert a.flags.f_contiguous


@pytest.mark.parametrize("v", [v for v in ENTRIES if v["expect"] == "valid"], ids=lambda v: v["file"])
def test_valid_vector_reads_exactly(v):
    path = VDIR / v["file"]
    if v["strict_valid"]:
        with codec.open(path) if not shape_table(v) else StbReader(path, shape_table=shape_table(v)) as r:
            check_tensors(r, v)
            assert r.validate().ok and not r.validate().warnings
    else:
        with pytest.raises(E.AlignmentError) as ei:
            StbReader(path)
        assert ei.value.rule == Rule.TENSOR_ALIGN
        with StbReader(path, strict=False) as r:
            check_tensors(r, v)
            rep = r.validate()
            assert rep.ok and rep.warnings and all(w.rule == Rule.TENSOR_ALIGN for w in rep.warnings)


def test_col_major_reads_as_the_same_matrix():
    """v06: tensor 1 holds M in column-major order; honouring the layout gives M for both."""
    with StbReader(VDIR / "v06_ref_layouts.stb") as r:
        assert np.array_equal(r.tensor(0), r.tensor(1))
        assert np.array_equal(r.tensor(0), np.arange(16, dtype=np.float32).reshape(4, 4))


def test_rank_above_3_needs_a_shape_table_only_on_access():
    with StbReader(VDIR / "v12_seed_rank4_rank5_shape_table.stb") as r:  # opens fine
        assert len(r.tensors) == 2
        with pytest.raises(E.StructureError) as ei:
            r.tensor(0)
        assert ei.value.rule == Rule.SHAPE
        assert any("shape table" in n for n in r.validate().notes)
    with pytest.raises(E.StructureError):  # a table of the wrong rank is caught at open
        StbReader(VDIR / "v12_seed_rank4_rank5_shape_table.stb", shape_table={0: (2, 3, 4), 1: (1, 2, 3, 4, 5)})


@pytest.mark.parametrize("v", [v for v in ENTRIES if v["expect"] == "invalid"], ids=lambda v: v["file"])
def test_relaxed_mode_forgives_only_alignment_and_layouts(v):
    """(every invalid file's verdict: tests/test_conformance.py)"""
    rule = VERDICTS["stb"][v["file"]][2]
    if rule in (Rule.TENSOR_ALIGN, Rule.LAYOUT):
        with StbReader(VDIR / v["file"], strict=False) as r:
            assert r.validate().ok and all(w.rule == rule for w in r.validate().warnings)
    else:
        with pytest.raises(E.FormatError):
            StbReader(VDIR / v["file"], strict=False)
