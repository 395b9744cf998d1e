"""Conformance: every file of ../shared/vectors/aero/manifest.json, valid and invalid."""
import hashlib
from pathlib import Path

import pytest

import codec
from codec import errors as E
from codec.formats.aero import AeroReader
from schemas import aero as S

from .conftest import manifest, vectors_dir

VDIR = vectors_dir("aero")
MANIFEST = manifest("aero")
ENTRIES = MANIFEST["vectors"]
SINGLE = [v for v in ENTRIES if not v["file"].endswith(".aeroset.json")]
SETS = [v for v in ENTRIES if v["file"].endswith(".aeroset.json")]

# How each invalid single file must be rejected: (stage, error class, rule).
# stage: "open" = codec.open raises; "access" = open lists the names, but the first look at any
# tensor (info or bytes) raises, before a byte is returned; "read" = reading a tensor raises; "structure" / "full" /
# "control" = the report of validate at that level carries the error.
EXPECTED = {
    "invalid/bad_magic.aero": ("open", E.MagicError, S.Rule.MAGIC),
    "invalid/toc_past_eof.aero": ("open", E.BoundsError, S.Rule.TOC_BOUNDS),
    "invalid/wtsh_hash_mismatch.aero": ("full", E.IntegrityError, S.Rule.CHUNK_HASH),
    "invalid/name_off_out_of_strtab.aero": ("open", E.BoundsError, S.Rule.NAME_BOUNDS),
    "invalid/entry_count_over_max.aero": ("open", E.LimitError, S.Rule.LIMIT_ENTRY_COUNT),
    "invalid/tensor_beyond_shard.aero": ("access", E.BoundsError, S.Rule.TENSOR_BOUNDS),
    "invalid/zstd_ulen_over_cap.aero": ("open", E.LimitError, S.Rule.LIMIT_METADATA_ULEN),
    "invalid/zstd_frame_bomb.aero": ("open", E.CompressionError, S.Rule.ZSTD),
    "invalid/truncated.aero": ("open", E.TruncatedError, S.Rule.CHUNK_BOUNDS),
    "invalid/negative_data_off.aero": ("access", E.RangeError, S.Rule.TIDX_RANGE),
    "invalid/ihsh_mismatch.aero": ("control", E.IntegrityError, S.Rule.IHSH),
    "invalid/header_reserved_nonzero.aero": ("open", E.ReservedError, S.Rule.RESERVED),
    "invalid/phsh_page_mismatch.aero": ("full", E.IntegrityError, S.Rule.PHSH),
    "invalid/hash_b3_mismatch.aero": ("read", E.IntegrityError, S.Rule.HASH_B3),
    "invalid/bug_write_model_default.aero": ("structure", E.IntegrityError, S.Rule.CHUNK_HASH),
    "invalid/bug_write_model_tensor_hash.aero": ("open", E.OverlapError, S.Rule.CHUNK_OVERLAP),
}


def sha(a) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


def test_every_invalid_vector_has_an_expectation():
    invalid = {v["file"] for v in SINGLE if v["expect"] == "invalid"}
    assert invalid == set(EXPECTED), "manifest and EXPECTED disagree: a new vector needs a verdict"


def _check_tensors(r, v):
    assert sorted(r.tensors) == sorted(t["name"] for t in v["tensors"])
    for t in v["tensors"]:
        info = r.tensors[t["name"]]
        assert info.dtype_name == t["dtype"]
        assert list(info.shape) == t["shape"]
        a = r.tensor(t["name"])
        assert not a.flags.writeable
        assert sha(a) == t["sha256"], t["name"]


def _check_layout(r, layout):
    assert r._src.size == layout["file_size"]
    assert r.uuid.hex() == layout["uuid"]
    assert r.header["toc_offset"] == layout["toc_offset"]
    assert r.header["toc_length"] == layout["toc_length"]
    assert r.header["string_table_offset"] == layout["string_table_offset"]
    assert r.header["string_table_length"] == layout["string_table_length"]
    got = [{"fourcc": c.fourcc.decode(), "name": c.name, "flags": c.flags, "offset": c.offset,
            "length": c.length, "ulen": c.ulen, "blake3": c.blake3.hex()} for c in r.chunks]
    assert got == layout["chunks"]


@pytest.mark.parametrize("v", [v for v in SINGLE if v["expect"] == "valid"], ids=lambda v: v["file"])
def test_valid_vector_reads_exactly(v):
    path = VDIR / v["file"]
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == v["extra"]["layout"]["file_sha256"]
    for src in (path, data):  # a path (mmap) and a buffer give the same answers
        with codec.open(src) as r:
            assert r.format == "aero"
            _check_tensors(r, v)
            _check_layout(r, v["extra"]["layout"])
            rep = r.validate(full=True)
            assert rep.ok, [str(x) for x in rep.violations]
            assert r.validate(control=True).ok
            if "mjsn" in v["extra"]:
                assert r.metadata == v["extra"]["mjsn"]
            if "model_name" in v["extra"]:
                assert r.metadata.get("model_name", r.manifest.get("model", {}).get("name")) == v["extra"]["model_name"]
            if "hash_b3" in v["extra"]:
                assert {n: r.tensors[n].extra["hash_b3"] for n in v["extra"]["hash_b3"]} == v["extra"]["hash_b3"]
            if "tidx" in v["extra"]:  # PACKED: quant info passed through
                for e in v["extra"]["tidx"]:
                    ex = r.tensors[e["name"]].extra
                    assert ex["dtype_code"] == e["dtype"]
                    for k in ("quant_id", "quant_params"):
                        assert ex.get(k) == e.get(k)
            if "quant_descriptors" in v["extra"].get("mjsn", {}):
                assert r.quant_descriptors == v["extra"]["mjsn"]["quant_descriptors"]


def _first(rep, cls, rule):
    errs = [x for x in rep.errors if isinstance(x, cls) and x.rule == rule]
    assert errs, f"expected {cls.__name__}[{rule}], report: {[str(x) for x in rep.violations]}"
    e = errs[0]
    assert e.format == "AERO" and e.path and e.rule == rule
    return e


@pytest.mark.parametrize("v", [v for v in SINGLE if v["expect"] == "invalid"], ids=lambda v: v["file"])
def test_invalid_vector_is_rejected_with_its_rule(v):
    stage, cls, rule = EXPECTED[v["file"]]
    path = VDIR / v["file"]
    if stage == "open":
        with pytest.raises(cls) as ei:
            AeroReader(path)
        e = ei.value
        assert e.rule == rule and e.format == "AERO" and e.path and e.offset is not None
        assert str(path) in str(e)
        # validate-style collection sees it too (via the auto-detecting entry point)
        with pytest.raises(E.FormatError):
            codec.open(path)
        return
    with codec.open(path) as r:
        if stage == "access":
            assert list(r.tensors)  # names are listed...
            name = next(iter(r.tensors))
            for touch in (lambda: r.tensors[name], lambda: r.tensor(name)):  # ...nothing else is handed out
                with pytest.raises(cls) as ei:
                    touch()
                assert ei.value.rule == rule and ei.value.path.startswith("TIDX.tensors[")
            _first(r.validate(), cls, rule)
            with pytest.raises(cls):
                AeroReader(path).tensors[name]
        elif stage == "read":
            with pytest.raises(cls) as ei:
                for name in r.tensors:
                    r.tensor(name)
            assert ei.value.rule == rule
            _first(r.validate(full=True), cls, rule)
            assert r.validate().ok, "hash_b3 is an integrity check: structure alone stays clean"
        elif stage == "structure":
            _check_tensors(r, v)  # the reference bug leaves tensors readable
            _first(r.validate(), cls, rule)
        elif stage == "full":
            assert r.validate().ok
            _first(r.validate(full=True), cls, rule)
        elif stage == "control":
            _first(r.validate(control=True), cls, rule)
            _first(r.validate(full=True), cls, rule)


def test_bad_magic_is_unknown_to_auto_detection():
    with pytest.raises(E.UnknownFormatError):
        codec.open(VDIR / "invalid/bad_magic.aero")


@pytest.mark.parametrize("v", SETS, ids=lambda v: v["file"])
def test_aeroset_parts_are_valid_single_files(v):
    """Set-level reading is AEROSET's job; every part must still be a readable AERO file, and
    the reference writer's parts show its MJSN-hash bug under validate."""
    parts = sorted((VDIR / Path(v["file"]).parent).glob("*.aero"))
    assert parts
    for p in parts:
        with codec.open(p) as r:
            assert r.index_only == (p.name == "index.aero")
            for name in r.tensors:
                if r.index_only:  # global TIDX without weights: names listed, bytes elsewhere
                    with pytest.raises(codec.NotFoundError):
                        r.tensor(name)
                else:
                    r.tensor(name)
            rep = r.validate(full=True)
            if v["expect"] == "valid" or r.chunk(b"MJSN") is None:
                assert rep.ok, [str(x) for x in rep.violations]
            else:  # the reference writer leaves every part's MJSN hash zero
                e = _first(rep, E.IntegrityError, S.Rule.CHUNK_HASH)
                assert "MJSN" in e.path and len(rep.errors) == 1
