"""Conformance: every file of ../shared/vectors/mag/manifest.json."""
import hashlib
import math

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.mag import MagReader, validate_file
from schemas.mag import Rule

from .conftest import manifest, vectors_dir

VDIR = vectors_dir("mag")
ENTRIES = manifest("mag")["vectors"]

# the typed error and rule each invalid file must be reported with (validate lists it; open
# raises a FormatError — the checksum comes first when the covered bytes are damaged)
EXPECTED = {
    "invalid_bad_magic.mag": (E.MagicError, Rule.MAGIC),
    "invalid_bad_checksum.mag": (E.IntegrityError, Rule.CHECKSUM),
    "invalid_checksum_covered_byte.mag": (E.IntegrityError, Rule.CHECKSUM),
    "invalid_version_2.mag": (E.UnsupportedVersionError, Rule.VERSION),
    "invalid_header_aux.mag": (E.ReservedError, Rule.RESERVED),
    "invalid_meta_reserved_aux.mag": (E.ReservedError, Rule.RESERVED),
    "invalid_meta_type_tensor.mag": (E.EnumError, Rule.META_TYPE),
    "invalid_meta_type_3.mag": (E.EnumError, Rule.META_TYPE),
    "invalid_tensor_reserved_aux.mag": (E.ReservedError, Rule.RESERVED),
    "invalid_tensor_dtype_4.mag": (E.EnumError, Rule.DTYPE),
    "invalid_tensor_rank0.mag": (E.RangeError, Rule.RANK),
    "invalid_tensor_offset_unaligned.mag": (E.AlignmentError, Rule.ALIGN),
    "invalid_tensor_data_beyond_eof.mag": (E.TruncatedError, Rule.BOUNDS),
    "invalid_tensor_numel_mismatch.mag": (E.StructureError, Rule.NUMEL),
    "invalid_tensor_dim_zero.mag": (E.RangeError, Rule.DIM),
    "invalid_duplicate_tensor_key.mag": (E.StructureError, Rule.DUPLICATE),
    "invalid_duplicate_meta_key.mag": (E.StructureError, Rule.DUPLICATE),
    "invalid_tensor_key_not_utf8.mag": (E.DecodeError, Rule.KEY_UTF8),
    "invalid_meta_key_not_utf8.mag": (E.DecodeError, Rule.KEY_UTF8),
    "invalid_truncated_in_records.mag": (E.TruncatedError, Rule.COUNT),
    "invalid_meta_count_too_large.mag": (E.TruncatedError, Rule.COUNT),
}


def test_every_invalid_vector_has_an_expectation():
    assert {v["file"] for v in ENTRIES if v["expect"] == "invalid"} == set(EXPECTED)


def _bits(value, typ):
    if typ == "i64":
        return int(np.array([value], dtype="<i8").view("<u8")[0])
    return int(np.array([float(value)], dtype="<f8").view("<u8")[0])


@pytest.mark.parametrize("v", [v for v in ENTRIES if v["expect"] == "valid"], ids=lambda v: v["file"])
def test_valid_vector_reads_exactly(v):
    path = VDIR / v["file"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == v["file_sha256"]
    with codec.open(path) as r:
        assert r.format == "mag"
        assert r.checksum_ok
        if "checksum_u32" in v:  # hand-built seed files list only tensors
            assert r.header["checksum"] == v["checksum_u32"]
            assert r.records_end == v["records_end"]
        md = r.metadata
        assert len(md) == len(v.get("metadata", []))
        for m in v.get("metadata", []):
            assert r.meta_types[m["key"]] == m["type"]
            got = md[m["key"]]
            assert f"{_bits(got, m['type']):016x}" == m["u64_hex"], m["key"]
            if isinstance(m["value"], (int, float)) and not (isinstance(m["value"], float) and math.isnan(m["value"])):
                assert got == m["value"]
        assert sorted(r.tensors) == sorted(t["name"] for t in v["tensors"])
        for t in v["tensors"]:
            info = r.tensors[t["name"]]
            assert info.dtype_name == t["dtype"] and list(info.shape) == t["shape"]
            assert info.offset == t.get("offset", info.offset) and info.nbytes == t.get("nbytes", info.nbytes)
            a = r.tensor(t["name"])
            assert not a.flags.writeable
            assert hashlib.sha256(a.tobytes()).hexdigest() == t["sha256"]
            if len(t["shape"]) <= 64:
                assert list(a.shape) == t["shape"]
        rep = r.validate(full=True)
        assert rep.ok, [str(x) for x in rep.violations]


@pytest.mark.parametrize("v", [v for v in ENTRIES if v["expect"] == "invalid"], ids=lambda v: v["file"])
def test_invalid_vector_is_rejected_with_its_rule(v):
    cls, rule = EXPECTED[v["file"]]
    path = VDIR / v["file"]
    with pytest.raises(E.FormatError) as ei:
        MagReader(path)
    assert ei.value.format == "MAG" and ei.value.path and ei.value.offset is not None
    rep = validate_file(path)
    assert not rep.ok
    hits = [x for x in rep.errors if x.rule == rule and isinstance(x, cls)]
    assert hits, [str(x) for x in rep.violations]
    if rule == Rule.CHECKSUM:
        assert isinstance(ei.value, E.IntegrityError)
