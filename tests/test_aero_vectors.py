"""AERO conformance details: the layout, chunks and metadata of each valid file of
../shared/vectors/aero/manifest.json, and the parts of its sets; every vector's verdict is in
tests/test_conformance.py."""
import hashlib
from pathlib import Path

import pytest

import codec
from codec import errors as E
from codec.schemas import aero as S

from .conftest import manifest, vectors_dir

VDIR = vectors_dir("aero")
MANIFEST = manifest("aero")
ENTRIES = MANIFEST["vectors"]
SINGLE = [v for v in ENTRIES if not v["file"].endswith(".aeroset.json")]
SETS = [v for v in ENTRIES if v["file"].endswith(".aeroset.json")]

def sha(a) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


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
    assert e.format == "aero" and e.path and e.rule == rule
    return e


def test_bad_magic_is_unknown_to_auto_detection_but_named_by_the_file_name():
    """Content detection does not know the bytes; a name ending with .aero says what the file
    claims to be, so the AERO reader reports its bad magic (as a buffer: nothing claims it)."""
    with pytest.raises(E.MagicError) as ei:
        codec.open(VDIR / "invalid/bad_magic.aero")
    assert ei.value.rule == "AERO-MAGIC"
    with pytest.raises(E.UnknownFormatError):
        codec.open((VDIR / "invalid/bad_magic.aero").read_bytes())


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
                    with pytest.raises(codec.NotLocalError):
                        r.tensor(name)
                else:
                    r.tensor(name)
            rep = r.validate(full=True)
            if v["expect"] == "valid" or r.chunk(b"MJSN") is None:
                assert rep.ok, [str(x) for x in rep.violations]
            else:  # the reference writer leaves every part's MJSN hash zero
                e = _first(rep, E.IntegrityError, S.Rule.CHUNK_HASH)
                assert "MJSN" in e.path and len(rep.errors) == 1
