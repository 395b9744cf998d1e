"""OINF conformance details: the header, size variables and metadata of each valid file of
../shared/vectors/oinf/manifest.json; the seed's two example programs (import line changed
only) write byte-identical files.  Every vector's verdict is in tests/test_conformance.py."""
import hashlib
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec.formats.oinf import (
    TAG_OF,
    TAG_OF_NAME,
    Bitset,
    ScalarValue,
    UninitializedTensor,
    encode_value,
)
from codec.schemas import oinf as S

from .conftest import ROOT, manifest, vectors_dir

VDIR = vectors_dir("oinf")
ENTRIES = manifest("oinf")["vectors"]

def _meta_equal(got, m):
    t = m["type"]
    if t == "string":
        return got == m["value"]
    if t == "bitset":
        return isinstance(got, Bitset) and list(got.bits) == m["value"]["bits"]
    if t == "ndarray":
        val = m["value"]
        return (isinstance(got, np.ndarray) and list(got.shape) == val["shape"]
                and S.TYPE_NAMES[TAG_OF[got.dtype]] == val["dtype"] and got.tolist() == val["values"])
    if isinstance(m["value"], str):  # "nan", "inf"
        return str(got) == m["value"] or (m["value"] == "nan" and math.isnan(got))
    return got == m["value"]


@pytest.mark.parametrize("v", [v for v in ENTRIES if v["expect"] == "valid"], ids=lambda v: v["file"])
def test_valid_vector_reads_exactly(v):
    path = VDIR / v["file"]
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == v["file_sha256"]
    with codec.open(path) as r:
        assert r.format == "oinf"
        for k in ("n_sizevars", "n_metadata", "n_tensors", "offset_sizevars", "offset_metadata", "offset_tensors",
                  "offset_data", "file_size"):
            assert r.header[k] == v["header"][k], k
        assert r.sizevars == v.get("sizevars", {})
        assert list(r.sizevars) == sorted(r.sizevars, key=str.encode)
        md = r.metadata
        assert len(md) == len(v.get("metadata", []))
        for m in v.get("metadata", []):
            got = md[m["key"]]
            assert _meta_equal(got, m), (m["key"], got, m["value"])
            # and our writer encodes that value exactly as the reference did
            typed = ScalarValue(got, r.meta_types[m["key"]]) if r.meta_types[m["key"]] in TAG_OF_NAME else got
            tag, raw, nbytes = encode_value(typed)
            assert (tag, nbytes) == (m["type_tag"], m["value_nbytes"])
            assert raw.hex() == m["payload_hex"][:len(raw) * 2] and not bytes.fromhex(m["payload_hex"])[len(raw):].strip(b"\0")
        assert list(r.tensors) == [t["name"] for t in v["tensors"]]
        for t in v["tensors"]:
            info = r.tensors[t["name"]]
            got = r.tensor(t["name"])
            assert info.dtype_name == t["dtype"] and list(info.shape) == t["shape"]
            if t["has_data"]:
                assert not got.flags.writeable
                assert hashlib.sha256(got.tobytes()).hexdigest() == t["sha256"]
                assert (info.offset, info.nbytes) == (t["data_offset"], t["data_nbytes"])
            else:
                assert got == UninitializedTensor(t["dtype"], tuple(t["shape"]))
        assert r.validate(full=True).ok


@pytest.mark.parametrize("example,out", [("minimal_oinf.py", "minimal_model.oinf"), ("simple_oinf.py", "simple_model.oinf")])
def test_seed_examples_are_byte_identical(tmp_path, example, out):
    """The seed's programs, with only the import line changed, run as written."""
    shutil.copy(ROOT / "tests" / "seed_examples" / example, tmp_path / example)
    p = subprocess.run([sys.executable, example], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / out).read_bytes() == (VDIR / out).read_bytes()


CFG_MODULE = '''
from dataclasses import dataclass
from typing import Annotated


@dataclass
class Cfg:
    D: int
    name: str
    scale: float
    on: bool
    taps: list
    w: Annotated[list, {"dtype": "f32"}]
'''


def test_cli_from_dataclass_matches_the_reference_cli(tmp_path):
    """cli_json.oinf was written by the reference CLI from this module and JSON."""
    (tmp_path / "cfgmod.py").write_text(CFG_MODULE)
    (tmp_path / "data.json").write_text('{"D": 16, "name": "relu_fast", "scale": 0.125, "on": true, '
                                        '"taps": [1, -2, 3], "w": [[1.0, 2.0], [3.0, 4.0]]}')
    p = subprocess.run([sys.executable, "-m", "codec.tools.cli", "oinf", "from-dataclass", "--input", "cfgmod:Cfg",
                        "--json", "data.json", "--output", "out.oinf"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out.oinf").read_bytes() == (VDIR / "cli_json.oinf").read_bytes()


def test_cli_from_dataclass_errors_are_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "codec.tools.cli", "oinf", "from-dataclass", "--input", "nope:X",
                        "--output", "x.oinf"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "nope" in p.stderr
