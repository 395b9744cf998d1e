"""MAG conformance details: what each valid file of ../shared/vectors/mag/manifest.json holds
(checksum, records, metadata bits); every vector's verdict is in tests/test_conformance.py."""
import hashlib
import math

import numpy as np
import pytest

import codec

from .conftest import manifest, vectors_dir

VDIR = vectors_dir("mag")
ENTRIES = manifest("mag")["vectors"]


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
