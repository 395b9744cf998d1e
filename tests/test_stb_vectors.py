"""Conformance: every file of ../shared/vectors/stb/manifest.json, strict and relaxed."""
import hashlib

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.stb import StbReader, validate_file
from schemas.stb import Rule

from .conftest import manifest, vectors_dir

VDIR = vectors_dir("stb")
ENTRIES = manifest("stb")["vectors"]

EXPECTED = {
    "i01_bad_magic.stb": (E.MagicError, Rule.MAGIC),
    "i02_bad_version.stb": (E.UnsupportedVersionError, Rule.VERSION),
    "i03_data_offset_unaligned.stb": (E.AlignmentError, Rule.DATA_ALIGN),
    "i04_data_offset_below_table.stb": (E.BoundsError, Rule.DATA_OFFSET),
    "i05_data_offset_beyond_file.stb": (E.BoundsError, Rule.DATA_OFFSET),
    # (the file is shorter than it says: a truncation, reported as one finding)
    "i06_file_size_field_too_large.stb": (E.TruncatedError, Rule.FILE_SIZE),
    "i07_trailing_bytes.stb": (E.StructureError, Rule.FILE_SIZE),
    "i08_tensor_beyond_eof.stb": (E.BoundsError, Rule.TENSOR_BOUNDS),
    "i09_offset_below_data_offset.stb": (E.BoundsError, Rule.TENSOR_START),
    "i10_offset_unaligned.stb": (E.AlignmentError, Rule.TENSOR_ALIGN),
    "i11_unknown_dtype.stb": (E.EnumError, Rule.DTYPE),
    "i12_offset_size_u64_overflow.stb": (E.BoundsError, Rule.TENSOR_BOUNDS),
    "i13_truncated_header.stb": (E.TruncatedError, Rule.TRUNCATED),
    "i14_truncated_table.stb": (E.TruncatedError, Rule.TRUNCATED),
    "i15_unknown_layout.stb": (E.EnumError, Rule.LAYOUT),
    "i16_flags_nonzero.stb": (E.ReservedError, Rule.FLAGS),
    "i17_reserved_nonzero.stb": (E.ReservedError, Rule.RESERVED),
    "i18_size_dims_mismatch.stb": (E.StructureError, Rule.SIZE),
    "i19_duplicate_tensor_id.stb": (E.StructureError, Rule.TENSOR_ID),
    "i20_rank_9.stb": (E.RangeError, Rule.RANK),
}


def test_every_invalid_vector_has_an_expectation():
    assert {v["file"] for v in ENTRIES if v["expect"] == "invalid"} == set(EXPECTED)


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
def test_invalid_vector_is_rejected_with_its_rule(v):
    cls, rule = EXPECTED[v["file"]]
    path = VDIR / v["file"]
    with pytest.raises(E.FormatError) as ei:
        StbReader(path)
    assert ei.value.format == "STB" and ei.value.path and ei.value.offset is not None
    # (what follows from a truncation is attached to it as consequences, not listed on its own)
    found = [y for x in validate_file(path).errors for y in [x, *x.consequences]]
    hits = [x for x in found if x.rule == rule and isinstance(x, cls)]
    assert hits, [str(x) for x in validate_file(path).violations]
    if rule not in (Rule.TENSOR_ALIGN, Rule.LAYOUT):
        with pytest.raises(E.FormatError):  # relaxed mode forgives only alignment and layouts
            StbReader(path, strict=False)
