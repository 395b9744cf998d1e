"""safetensors: files the official library writes read exactly, files we write the official
library reads exactly, every rule of the format is enforced with a typed error, and hostile
headers end at once within bounds."""
import json
import struct

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from safetensors.numpy import load_file, save_file

import codec
from codec.tools import cli
from codec import errors as E

from .test_hostile_decode import RSS_LIMIT_MB, _run
from .test_json_output import SCHEMA

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "bool"]


def _tensors():
    rng = np.random.default_rng(0)
    out = {f"t.{dt}": (rng.standard_normal((3, 5)) * 50).astype(dt) for dt in DTYPES}
    out["scalar"] = np.array(2.5, np.float32)
    out["empty"] = np.zeros((0, 4), np.int32)
    return out


def test_what_the_official_library_writes_reads_exactly(tmp_path):
    t = _tensors()
    p = str(tmp_path / "ref.safetensors")
    save_file(t, p, metadata={"format": "np", "note": "é"})
    with codec.open(p) as r:
        assert r.format == "safetensors" and r.metadata == {"format": "np", "note": "é"}
        assert sorted(r.tensors) == sorted(t)
        for name, a in t.items():
            got = r.tensor(name)
            assert got.dtype == a.dtype and got.shape == a.shape and got.tobytes() == a.tobytes()
        assert r.validate(full=True).ok


def test_what_we_write_the_official_library_reads_exactly(tmp_path):
    t = _tensors()
    p = codec.write(str(tmp_path / "ours.safetensors"), t, metadata={"k": "v"})
    back = load_file(p)
    assert sorted(back) == sorted(t)
    for name, a in t.items():
        assert back[name].dtype == a.dtype and back[name].shape == a.shape and back[name].tobytes() == a.tobytes()
    head = open(p, "rb").read(8)
    assert (8 + struct.unpack("<Q", head)[0]) % 8 == 0  # header padded with spaces to a multiple of 8


def test_the_types_numpy_lacks_round_trip(tmp_path):
    import ml_dtypes
    t = {"bf": np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16),
         "f8": np.arange(4, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn),
         "f8b": np.arange(4, dtype=np.float32).astype(ml_dtypes.float8_e5m2)}
    p = codec.write(str(tmp_path / "x.safetensors"), t)
    header = json.loads(open(p, "rb").read()[8:8 + struct.unpack("<Q", open(p, "rb").read(8))[0]])
    assert [header[n]["dtype"] for n in t] == ["BF16", "F8_E4M3", "F8_E5M2"]
    with codec.open(p) as r:
        assert all(r.tensor(n).tobytes() == a.tobytes() and r.tensor(n).dtype == a.dtype for n, a in t.items())


def _file(header: dict | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


W = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


#: one hostile file per rule (tests/test_rule_renderings.py pins how each finding reads)
CASES = [
    (_file(b"[1, 2]"), "SAFETENSORS-HEADER-JSON", E.SchemaError),
    (_file(b"{\"w\": "), "SAFETENSORS-HEADER-JSON", E.DecodeError),
    (_file(b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "w": {}}', bytes(8)),
     "SAFETENSORS-DUPLICATE", E.StructureError),
    (_file({"w": dict(W, dtype="F33")}, bytes(8)), "SAFETENSORS-DTYPE", E.EnumError),
    (_file({"w": dict(W, data_offsets=[8, 0])}, bytes(8)), "SAFETENSORS-ENTRY", E.StructureError),
    (_file({"w": dict(W, shape=[3])}, bytes(8)), "SAFETENSORS-NBYTES", E.StructureError),
    (_file({"w": W, "v": dict(W, data_offsets=[12, 20])}, bytes(20)), "SAFETENSORS-TILES", E.StructureError),
    (_file({"w": W, "v": dict(W, data_offsets=[4, 12])}, bytes(12)), "SAFETENSORS-TILES", E.StructureError),
    (_file({"w": W}, bytes(12)), "SAFETENSORS-TILES", E.StructureError),   # bytes after the last tensor
    (_file({"w": W}, bytes(4)), "SAFETENSORS-TILES", E.StructureError),    # the data ends early
    (_file({"w": W, "__metadata__": {"a": 1}}, bytes(8)), "SAFETENSORS-METADATA", E.SchemaError),
    (_file({"w": W}, bytes(8), length=10**9), "SAFETENSORS-HEADER-LENGTH", E.LimitError),
    (_file({"w": W}, bytes(8), length=10**6), "SAFETENSORS-HEADER-LENGTH", E.TruncatedError),
    (_file({"w": dict(W, shape=[2**40, 2**40], data_offsets=[0, 0])}), "SAFETENSORS-ENTRY", E.RangeError),
    (_file({"w": W, "__metadata__": [1]}, bytes(8)), "SAFETENSORS-METADATA", E.SchemaError),
]


#: one file per rule whose finding is a warning (validate --full): the file opens and reads
WARNING_CASES = [
    (_file({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, b"\x01\x00\x07"), "SAFETENSORS-BOOL",
     E.ConstraintError),
]


@pytest.mark.parametrize("data,rule,cls", WARNING_CASES)
def test_each_warning_rule_is_reported(data, rule, cls):
    with codec.open(data, format="safetensors") as r:
        assert r.tensor("b").view(np.uint8).tolist() == [1, 0, 7]
    assert not codec.validate(data, format="safetensors").violations
    rep = codec.validate(data, format="safetensors", full=True)
    assert rep.ok and [type(v) for v in rep.warnings if v.rule == rule] == [cls], rep.violations


@pytest.mark.parametrize("data,rule,cls", CASES)
def test_each_rule_is_enforced(tmp_path, data, rule, cls):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(data)
    rep = codec.validate(str(p), format="safetensors")
    hits = [e for e in rep.errors if e.rule == rule]
    assert hits and isinstance(hits[0], cls), [str(e) for e in rep.violations]
    with pytest.raises(E.FormatError):
        codec.open(str(p), format="safetensors").close()


@pytest.mark.parametrize("data,rule", [
    (_file(b"{}", length=2**63), "SAFETENSORS-HEADER-LENGTH"),
    (_file(b"[" * 200_000 + b"]" * 200_000), "SAFETENSORS-HEADER-JSON"),
    (_file(b"[" + b"[]," * 300_000 + b"[]]"), "SAFETENSORS-HEADER-JSON"),  # 300 k objects, then refused
])
def test_hostile_headers_end_at_once_within_bounds(tmp_path, data, rule):
    got = _run(tmp_path, data, 'codec.open(path, format="safetensors")')
    assert got.get("rule") == rule and got["rss_mb"] < RSS_LIMIT_MB, got


def test_detected_by_content_and_described_in_json(tmp_path, capsys):
    p = tmp_path / "weights.bin"
    save_file({"w": np.ones(3, np.float32)}, str(p))
    with codec.open(str(p)) as r:
        assert r.format == "safetensors"
    assert cli.main(["inspect", "--json", str(p)]) == 0
    doc = json.loads(capsys.readouterr().out)
    errors = list(Draft202012Validator({"$ref": "#/$defs/inspect", "$defs": SCHEMA["$defs"]}).iter_errors(doc))
    assert not errors, errors[0].message


def test_the_writer_refuses_what_the_format_cannot_hold(tmp_path):
    p = str(tmp_path / "x.safetensors")
    with pytest.raises(codec.UsageError, match="__metadata__"):
        codec.write(p, {"__metadata__": np.ones(1)})
    with pytest.raises(codec.UsageError, match="text -> text"):
        codec.write(p, {"w": np.ones(1)}, metadata={"a": 1})
    with pytest.raises(codec.UsageError, match="no element type"):
        codec.write(p, {"w": np.ones(1, np.complex64)})


def test_converting_to_safetensors_and_back_is_bit_identical(tmp_path):
    t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.arange(4, dtype=np.int64)}
    src = codec.write(str(tmp_path / "m.aero"), t, model_name="tiny")
    mid = codec.convert(src, str(tmp_path / "m.safetensors"))
    back = codec.convert(mid, str(tmp_path / "m2.aero"))
    with codec.open(back) as r:
        assert r.metadata["model_name"] == "tiny"
        assert all(r.tensor(n).tobytes() == a.tobytes() and r.tensor(n).dtype == a.dtype for n, a in t.items())


def test_one_finding_per_fault():
    """A shape no array has is one finding (the relation that checks sizes reports it, under the
    entry's rule), not one per check that meets it; a bad dtype and bad offsets in one entry are
    both reported."""
    rep = codec.validate(_file({"w": dict(W, shape=[2**40, 2**40], data_offsets=[0, 0])}), format="safetensors")
    assert [(type(e), e.rule, e.path) for e in rep.violations] == [(E.RangeError, "SAFETENSORS-ENTRY", "header['w'].shape")]
    rep = codec.validate(_file({"w": dict(W, dtype="F33", data_offsets=[8, 0])}, bytes(8)), format="safetensors")
    assert [(e.rule, e.path) for e in rep.violations][:2] == [("SAFETENSORS-DTYPE", "header['w'].dtype"),
                                                              ("SAFETENSORS-ENTRY", "header['w'].data_offsets")]
