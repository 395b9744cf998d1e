"""Conformance over every shared vector of every format: each valid file reads exactly (names and
bytes as the manifest lists them, a clean full validation), each invalid one is refused with its
verdict -- the error class and rule, at the stage the verdict names.  The format-specific
details of the manifests (layouts, headers, metadata, reference outputs) are checked in
``tests/test_<fmt>_vectors.py``."""
import hashlib

import pytest

import codec
from codec import errors as E
from codec.schemas import aero as A, mag as M, oinf as O, stb as S

from .conftest import manifest, vectors_dir

FORMATS = ("aero", "mag", "oinf", "stb")

# How each invalid file must be refused: (stage, error class, rule).  "open": opening raises
# exactly that error; "refused": opening raises a FormatError of the format (an earlier rule may
# speak first), and validation lists the verdict; "access": the names are listed but the first
# look at a tensor (info or bytes) raises; "read": reading a tensor raises; "structure" / "full" /
# "control": the report of validation at that level carries it.
VERDICTS = {
    "aero": {
        "invalid/bad_magic.aero": ("open", E.MagicError, A.Rule.MAGIC),
        "invalid/toc_past_eof.aero": ("open", E.BoundsError, A.Rule.TOC_BOUNDS),
        "invalid/wtsh_hash_mismatch.aero": ("full", E.IntegrityError, A.Rule.CHUNK_HASH),
        "invalid/name_off_out_of_strtab.aero": ("open", E.BoundsError, A.Rule.NAME_BOUNDS),
        "invalid/entry_count_over_max.aero": ("open", E.LimitError, A.Rule.LIMIT_ENTRY_COUNT),
        "invalid/tensor_beyond_shard.aero": ("access", E.BoundsError, A.Rule.TENSOR_BOUNDS),
        "invalid/zstd_ulen_over_cap.aero": ("open", E.LimitError, A.Rule.LIMIT_METADATA_ULEN),
        "invalid/zstd_frame_bomb.aero": ("open", E.CompressionError, A.Rule.ZSTD),
        "invalid/truncated.aero": ("open", E.TruncatedError, A.Rule.CHUNK_BOUNDS),
        "invalid/negative_data_off.aero": ("access", E.RangeError, A.Rule.TIDX_RANGE),
        "invalid/ihsh_mismatch.aero": ("control", E.IntegrityError, A.Rule.IHSH),
        "invalid/header_reserved_nonzero.aero": ("open", E.ReservedError, A.Rule.RESERVED),
        "invalid/phsh_page_mismatch.aero": ("full", E.IntegrityError, A.Rule.PHSH),
        "invalid/hash_b3_mismatch.aero": ("read", E.IntegrityError, A.Rule.HASH_B3),
        "invalid/bug_write_model_default.aero": ("structure", E.IntegrityError, A.Rule.CHUNK_HASH),
        "invalid/bug_write_model_tensor_hash.aero": ("open", E.OverlapError, A.Rule.CHUNK_OVERLAP),
    },
    "mag": {  # ("refused": the checksum speaks first, the bytes it covers being damaged)
        "invalid_bad_magic.mag": ("open", E.MagicError, M.Rule.MAGIC),
        "invalid_bad_checksum.mag": ("open", E.IntegrityError, M.Rule.CHECKSUM),
        "invalid_checksum_covered_byte.mag": ("open", E.IntegrityError, M.Rule.CHECKSUM),
        "invalid_version_2.mag": ("open", E.UnsupportedVersionError, M.Rule.VERSION),
        "invalid_header_aux.mag": ("open", E.ReservedError, M.Rule.RESERVED),
        "invalid_meta_reserved_aux.mag": ("open", E.ReservedError, M.Rule.RESERVED),
        "invalid_meta_type_tensor.mag": ("open", E.EnumError, M.Rule.META_TYPE),
        "invalid_meta_type_3.mag": ("open", E.EnumError, M.Rule.META_TYPE),
        "invalid_tensor_reserved_aux.mag": ("open", E.ReservedError, M.Rule.RESERVED),
        "invalid_tensor_dtype_4.mag": ("open", E.EnumError, M.Rule.DTYPE),
        "invalid_tensor_rank0.mag": ("refused", E.RangeError, M.Rule.RANK),
        "invalid_tensor_offset_unaligned.mag": ("open", E.AlignmentError, M.Rule.ALIGN),
        "invalid_tensor_data_beyond_eof.mag": ("open", E.TruncatedError, M.Rule.BOUNDS),
        "invalid_tensor_numel_mismatch.mag": ("open", E.StructureError, M.Rule.NUMEL),
        "invalid_tensor_dim_zero.mag": ("open", E.RangeError, M.Rule.DIM),
        "invalid_duplicate_tensor_key.mag": ("open", E.StructureError, M.Rule.DUPLICATE),
        "invalid_duplicate_meta_key.mag": ("open", E.StructureError, M.Rule.DUPLICATE),
        "invalid_tensor_key_not_utf8.mag": ("open", E.DecodeError, M.Rule.KEY_UTF8),
        "invalid_meta_key_not_utf8.mag": ("open", E.DecodeError, M.Rule.KEY_UTF8),
        "invalid_truncated_in_records.mag": ("refused", E.TruncatedError, M.Rule.COUNT),
        "invalid_meta_count_too_large.mag": ("refused", E.TruncatedError, M.Rule.COUNT),
    },
    "oinf": {
        "inv_bad_magic.oinf": ("open", E.MagicError, O.Rule.MAGIC),
        "inv_bad_version.oinf": ("open", E.UnsupportedVersionError, O.Rule.VERSION),
        "inv_misaligned_tensor_offset.oinf": ("open", E.AlignmentError, O.Rule.ALIGN),
        "inv_blob_out_of_bounds.oinf": ("open", E.BoundsError, O.Rule.BLOB_BOUNDS),
        "inv_bad_string_charset.oinf": ("open", E.ConstraintError, O.Rule.NAME),
        "inv_nbytes_mismatch.oinf": ("open", E.StructureError, O.Rule.NBYTES),
        "inv_offsets_not_ascending.oinf": ("open", E.StructureError, O.Rule.OFFSETS),
        "inv_duplicate_tensor_name.oinf": ("open", E.StructureError, O.Rule.DUPLICATE),
        "inv_file_size_mismatch.oinf": ("open", E.StructureError, O.Rule.FILE_SIZE),
        "inv_nodata_nonzero_offset.oinf": ("open", E.StructureError, O.Rule.NO_DATA),
        "inv_bitset_tensor_dtype.oinf": ("open", E.EnumError, O.Rule.TENSOR_DTYPE),
        "inv_header_flags_reserved.oinf": ("open", E.ReservedError, O.Rule.RESERVED),
        "inv_string_length_overflow.oinf": ("open", E.TruncatedError, O.Rule.TRUNCATED),
        "inv_metadata_string_unpadded_nbytes.oinf": ("open", E.StructureError, O.Rule.VALUE_NBYTES),
        "inv_ext_dtype_tags.oinf": ("open", E.EnumError, O.Rule.VALUE_TYPE),
    },
    "stb": {
        "i01_bad_magic.stb": ("open", E.MagicError, S.Rule.MAGIC),
        "i02_bad_version.stb": ("open", E.UnsupportedVersionError, S.Rule.VERSION),
        "i03_data_offset_unaligned.stb": ("open", E.AlignmentError, S.Rule.DATA_ALIGN),
        "i04_data_offset_below_table.stb": ("open", E.BoundsError, S.Rule.DATA_OFFSET),
        "i05_data_offset_beyond_file.stb": ("open", E.BoundsError, S.Rule.DATA_OFFSET),
        # (the file is shorter than it says: a truncation, reported as one finding)
        "i06_file_size_field_too_large.stb": ("open", E.TruncatedError, S.Rule.FILE_SIZE),
        "i07_trailing_bytes.stb": ("open", E.StructureError, S.Rule.FILE_SIZE),
        "i08_tensor_beyond_eof.stb": ("open", E.BoundsError, S.Rule.TENSOR_BOUNDS),
        "i09_offset_below_data_offset.stb": ("open", E.BoundsError, S.Rule.TENSOR_START),
        "i10_offset_unaligned.stb": ("open", E.AlignmentError, S.Rule.TENSOR_ALIGN),
        "i11_unknown_dtype.stb": ("open", E.EnumError, S.Rule.DTYPE),
        "i12_offset_size_u64_overflow.stb": ("open", E.BoundsError, S.Rule.TENSOR_BOUNDS),
        "i13_truncated_header.stb": ("open", E.TruncatedError, S.Rule.TRUNCATED),
        "i14_truncated_table.stb": ("refused", E.TruncatedError, S.Rule.TRUNCATED),
        "i15_unknown_layout.stb": ("open", E.EnumError, S.Rule.LAYOUT),
        "i16_flags_nonzero.stb": ("open", E.ReservedError, S.Rule.FLAGS),
        "i17_reserved_nonzero.stb": ("open", E.ReservedError, S.Rule.RESERVED),
        "i18_size_dims_mismatch.stb": ("open", E.StructureError, S.Rule.SIZE),
        "i19_duplicate_tensor_id.stb": ("open", E.StructureError, S.Rule.TENSOR_ID),
        "i20_rank_9.stb": ("open", E.RangeError, S.Rule.RANK),
    },
}


def _single(fmt):
    """The manifest's single files (AERO's sets are AEROSET's: tests/test_aeroset_local.py)."""
    return [v for v in manifest(fmt)["vectors"] if not v["file"].endswith(".aeroset.json")]


def _cases(expect):
    return [pytest.param(fmt, v, id=f"{fmt}/{v['file']}") for fmt in FORMATS for v in _single(fmt)
            if v["expect"] == expect]


def _options(fmt, v) -> dict:
    """What a reader needs to be told about a valid file (STB: its shape table; relaxed mode for
    the reference's unaligned files)."""
    if fmt != "stb":
        return {}
    opts = {} if v["strict_valid"] else {"strict": False}
    table = v.get("shape_table") or {t["dims_raw"][0]: t["shape"] for t in v["tensors"] if t["rank"] > 3}
    return opts | ({"shape_table": table} if table else {})


def _key(fmt, t):
    return t["tensor_id"] if fmt == "stb" else t["name"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_invalid_vector_has_a_verdict(fmt):
    assert {v["file"] for v in _single(fmt) if v["expect"] == "invalid"} == set(VERDICTS[fmt]), \
        "manifest and VERDICTS disagree: a new vector needs a verdict"


@pytest.mark.parametrize("fmt, v", _cases("valid"))
def test_valid_vector_reads_exactly(fmt, v):
    path = vectors_dir(fmt) / v["file"]
    with codec.open(path, **_options(fmt, v)) as r:
        assert r.format == fmt
        assert sorted(map(str, r.tensors)) == sorted(str(_key(fmt, t)) for t in v["tensors"])
        for t in v["tensors"]:
            if t.get("has_data") is False:
                continue  # (an OINF tensor declared without data: nothing to compare)
            a = r.tensor(_key(fmt, t))
            assert not a.flags.writeable
            assert hashlib.sha256(a.tobytes(order="A")).hexdigest() == t["sha256"], _key(fmt, t)
        rep = r.validate(full=True)
        assert rep.ok, [str(x) for x in rep.violations]


def _found(rep, cls, rule):
    """The report's errors of that class and rule (with what follows from them)."""
    every = [y for x in rep.errors for y in [x, *x.consequences]]
    hits = [x for x in every if isinstance(x, cls) and x.rule == rule]
    assert hits, f"expected {cls.__name__}[{rule}], report: {[str(x) for x in rep.violations]}"
    return hits[0]


@pytest.mark.parametrize("fmt, v", _cases("invalid"))
def test_invalid_vector_is_refused_with_its_verdict(fmt, v):
    stage, cls, rule = VERDICTS[fmt][v["file"]]
    path = vectors_dir(fmt) / v["file"]
    if stage in ("open", "refused"):
        with pytest.raises(E.FormatError) as ei:
            codec.open(path, format=fmt)  # named: a broken magic still reaches the format's reader
        e = ei.value
        assert e.format == fmt and e.path and e.offset is not None and str(path) in str(e)
        if stage == "open":
            assert isinstance(e, cls) and e.rule == rule
        e = _found(codec.validate(path, format=fmt, full=True), cls, rule)
        assert e.format == fmt and e.path
        return
    with codec.open(path, format=fmt) as r:
        if stage == "access":
            name = next(iter(r.tensors))  # names are listed...
            for touch in (lambda: r.tensors[name], lambda: r.tensor(name)):  # ...nothing else is handed out
                with pytest.raises(cls) as ei:
                    touch()
                assert ei.value.rule == rule and ei.value.path
            _found(r.validate(), cls, rule)
        elif stage == "read":
            with pytest.raises(cls) as ei:
                for name in r.tensors:
                    r.tensor(name)
            assert ei.value.rule == rule
            _found(r.validate(full=True), cls, rule)
            assert r.validate().ok, "an integrity finding: the structure alone stays clean"
        elif stage == "structure":
            for t in v["tensors"]:  # a finding that leaves the tensors readable
                assert hashlib.sha256(r.tensor(t["name"]).tobytes()).hexdigest() == t["sha256"]
            _found(r.validate(), cls, rule)
        elif stage == "full":
            assert r.validate().ok
            _found(r.validate(full=True), cls, rule)
        elif stage == "control":
            _found(r.validate(control=True), cls, rule)
            _found(r.validate(full=True), cls, rule)
