"""`codec.diff` / `modelcodec diff` (issue 34 §2): two models of any formats compared tensor by
tensor -- identical across formats, one perturbed element measured exactly, renames, dtype and
shape changes, packed bytes, NaN and -0.0, tolerances, metadata, exit codes, sets and URLs, and
bounded memory (in a subprocess)."""
import json
import math
import pickle

import numpy as np
import pytest

import codec
from codec.compare import HISTOGRAM_EDGES
from codec.tools.cli import main

from .test_json_output import _conforms

pytestmark = pytest.mark.timeout(300)


def _model():
    rng = np.random.default_rng(7)
    return {"embed": rng.standard_normal((48, 32)).astype(np.float32),
            "layer.0.w": rng.standard_normal((32, 32)).astype(np.float16),
            "layer.0.b": np.arange(32, dtype=np.int32)}


def _write(path, tensors, **kw):
    return str(codec.save(tensors, str(path), **kw))


@pytest.mark.parametrize("fmt", ["aero", "gguf", "oinf", "mag", "aeroset.json"])
def test_the_same_tensors_in_two_formats_are_identical(tmp_path, fmt, capsys):
    a = _write(tmp_path / "m.safetensors", _model())
    b = _write(tmp_path / fmt / f"m.{fmt}", _model()) if fmt == "aeroset.json" else \
        _write(tmp_path / f"m.{fmt}", _model())
    d = codec.diff(a, b)
    assert d.equal and bool(d)
    assert [t.status for t in d.tensors] == ["identical"] * 3
    assert all(t.max_abs is None and t.histogram is None and t.bits_differ == 0 for t in d.tensors)
    assert d.tensors[0].compared == 48 * 32
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    assert "3 identical" in out and out.splitlines()[-1].startswith("equal")


def test_one_perturbed_element_is_measured_exactly(tmp_path, capsys):
    t = _model()
    a = _write(tmp_path / "a.safetensors", t)
    w = t["embed"].copy()
    w[5, 7] = np.float32(w[5, 7] + np.float32(0.25))
    b = _write(tmp_path / "b.aero", dict(t, embed=w))
    d = codec.diff(a, b)
    assert not d.equal
    e = next(x for x in d.tensors if x.name == "embed")
    want = abs(float(t["embed"][5, 7]) - float(w[5, 7]))
    assert (e.status, e.differing, e.bits_differ, e.nan_mismatches) == ("different", 1, 1, 0)
    assert e.max_abs == want and e.max_at == (5, 7)
    assert e.a_value == float(t["embed"][5, 7]) and e.b_value == float(w[5, 7])
    assert e.max_rel == want / abs(float(w[5, 7]))
    assert e.histogram[_bin(want)] == 1 and sum(e.histogram) == 1
    assert [x.status for x in d.tensors if x.name != "embed"] == ["identical", "identical"]
    assert main(["diff", a, b]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4  # A, B, the one tensor that differs, the summary
    assert lines[2].startswith("~ embed: float32 [48, 32]: 1 of 1,536 elements differ") and "at [5, 7]" in lines[2]
    assert lines[3].startswith("DIFFERENT") and "1 different" in lines[3]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float16", "uint8", "bool"])
def test_every_element_type_is_compared_by_value(tmp_path, dtype):
    """bfloat16 and the float8 types (whatever kind numpy gives them) are numbers like float16."""
    from codec.engine.dtypes import numpy_dtype
    dt = numpy_dtype(dtype)
    a = np.array([0, 1, 2, 3, 1, 0] * 100).astype(dt)
    b = a.copy()
    b[7] = np.array(0, dt) if dtype == "bool" else np.array(3, dt)  # 1 -> 0 (bool) or 1 -> 3
    pa, pb = _write(tmp_path / "a.safetensors", {"x": a}), _write(tmp_path / "b.safetensors", {"x": b})
    (t,) = codec.diff(pa, pb).tensors
    want = 1.0 if dtype == "bool" else 2.0
    assert (t.status, t.bytewise, t.differing, t.max_abs, t.max_at) == ("different", False, 1, want, (7,))
    assert t.histogram[_bin(want)] == 1


def _bin(x: float) -> int:
    """The histogram bin holding ``x``: edges[i] <= x < edges[i + 1]."""
    return next(i for i in range(len(HISTOGRAM_EDGES) - 1) if HISTOGRAM_EDGES[i] <= x < HISTOGRAM_EDGES[i + 1])


def test_renames_dtype_and_shape_changes(tmp_path):
    t = _model()
    a = _write(tmp_path / "a.safetensors", t)
    u = {"embedding": t["embed"], "layer.0.w": t["layer.0.w"].reshape(64, 16),
         "layer.0.b": t["layer.0.b"].astype(np.int64)}
    d = codec.diff(a, _write(tmp_path / "b.oinf", u))
    by = {x.name: x for x in d.tensors}
    assert [x.name for x in d.tensors] == ["embed", "layer.0.w", "layer.0.b", "embedding"]
    assert by["embed"].status == "only_a" and by["embed"].dtype_a == "float32" and by["embed"].dtype_b is None
    assert by["embedding"].status == "only_b" and by["embedding"].shape_b == (48, 32)
    assert by["layer.0.w"].status == "shape_changed" and (by["layer.0.w"].shape_a, by["layer.0.w"].shape_b) == \
        ((32, 32), (64, 16))
    b = by["layer.0.b"]  # the same numbers in a wider type: compared exactly, still a change
    assert (b.status, b.dtype_a, b.dtype_b, b.differing, b.bits_differ) == ("dtype_changed", "int32", "int64", 0, None)
    assert not d.equal
    counts = d.counts()
    assert (counts["only_a"], counts["only_b"], counts["shape_changed"], counts["dtype_changed"]) == (1, 1, 1, 1)


def test_a_dtype_change_compares_values_across_the_types(tmp_path):
    x = np.array([1.5, 2.0, 1e30, -3.0], np.float64)
    y = x.astype(np.float32)  # 1e30 is not a float32 value
    d = codec.diff(_write(tmp_path / "a.safetensors", {"x": x}), _write(tmp_path / "b.safetensors", {"x": y}))
    (t,) = d.tensors
    assert (t.status, t.differing, t.max_at) == ("dtype_changed", 1, (2,))
    assert t.max_abs == abs(1e30 - float(np.float32(1e30)))


def test_large_integers_differ_by_their_exact_difference(tmp_path):
    """2^62 and 2^62 + 1 are one apart (float64 would call them equal)."""
    a = np.array([2**62, 5], np.int64)
    b = np.array([2**62 + 1, 5], np.int64)
    pa, pb = _write(tmp_path / "a.safetensors", {"i": a}), _write(tmp_path / "b.safetensors", {"i": b})
    (t,) = codec.diff(pa, pb).tensors
    assert (t.status, t.differing, t.max_abs, t.max_at, t.a_value, t.b_value) == \
        ("different", 1, 1.0, (0,), 2**62, 2**62 + 1)


def test_nan_and_signed_zero(tmp_path):
    nan2 = np.array([0x7FC00001], np.uint32).view(np.float32)[0]  # a NaN with another payload
    a = np.array([np.nan, 0.0, 1.0, np.nan, np.inf], np.float32)
    same = a.copy()
    other_bits = np.array([nan2, -0.0, 1.0, np.nan, np.inf], np.float32)
    nan_vs_number = np.array([np.nan, 0.0, 1.0, 7.0, np.inf], np.float32)
    pa = _write(tmp_path / "a.safetensors", {"v": a})
    d = codec.diff(pa, _write(tmp_path / "b.safetensors", {"v": same}))
    assert d.tensors[0].status == "identical"  # NaN == NaN, bit for bit
    d = codec.diff(pa, _write(tmp_path / "c.safetensors", {"v": other_bits}))
    t = d.tensors[0]
    assert d.equal and (t.status, t.bits_differ, t.differing, t.max_abs) == ("equal", 2, 0, None)
    d = codec.diff(pa, _write(tmp_path / "d.safetensors", {"v": nan_vs_number}), atol=1e30)
    t = d.tensors[0]
    assert not d.equal and (t.status, t.differing, t.nan_mismatches, t.max_abs) == ("different", 1, 1, None)
    assert t.histogram == (0,) * (len(HISTOGRAM_EDGES) - 1)


def test_tolerances(tmp_path, capsys):
    a = np.linspace(1, 2, 100, dtype=np.float64)
    b = a.copy()
    b[10] += 1e-3
    b[20] -= 1e-6
    pa, pb = _write(tmp_path / "a.safetensors", {"x": a}), _write(tmp_path / "b.aero", {"x": b})
    t = codec.diff(pa, pb).tensors[0]
    assert (t.status, t.differing, t.bits_differ) == ("different", 2, 2)
    assert math.isclose(t.max_abs, 1e-3, rel_tol=1e-9) and t.max_at == (10,)
    want = [0] * (len(HISTOGRAM_EDGES) - 1)
    for k in (10, 20):  # each difference counted in its decade [edge, next edge)
        want[_bin(abs(a[k] - b[k]))] += 1
    assert list(t.histogram) == want and want[_bin(1.001e-3)] + want[_bin(0.999e-3)] == 1
    t = codec.diff(pa, pb, atol=1e-5).tensors[0]
    assert (t.status, t.differing) == ("different", 1)
    d = codec.diff(pa, pb, atol=2e-3)
    assert d.equal and d.tensors[0].status == "equal" and d.tensors[0].bits_differ == 2
    assert codec.diff(pa, pb, rtol=1e-3).equal  # |a-b| <= rtol * |b|, b >= 1
    assert not codec.diff(pa, pb, rtol=1e-4).equal
    assert main(["diff", pa, pb, "--atol", "2e-3"]) == 0
    assert "each within the tolerances" in capsys.readouterr().out
    assert main(["diff", pa, pb, "--rtol", "1e-4"]) == 1
    for bad in ({"rtol": -1}, {"atol": math.nan}, {"atol": "1"}, {"rtol": True}):
        with pytest.raises(codec.UsageError, match=next(iter(bad))):
            codec.diff(pa, pb, **bad)


def test_metadata_added_removed_changed(tmp_path, capsys):
    a = _write(tmp_path / "a.aero", _model(), metadata={"keep": "1", "old": "x", "k": [1, 2]})
    b = _write(tmp_path / "b.aero", _model(), metadata={"keep": "1", "new": 3, "k": [1, 3]})
    d = codec.diff(a, b)
    assert d.metadata_removed == {"old": "x"} and d.metadata_added == {"new": 3}
    assert d.metadata_changed == {"k": ([1, 2], [1, 3])}
    assert d.equal and not d.metadata_equal  # the verdict is the tensors'
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    assert "- metadata 'old'" in out and "+ metadata 'new'" in out and "~ metadata 'k': [1, 2] -> [1, 3]" in out


def test_packed_tensors_are_compared_bytewise(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, 68, dtype=np.uint8)
    q = codec.Packed(data, (2, 32), {"ggml_type": 8})
    a = codec.write(str(tmp_path / "a.gguf"), {"q": q, "f": np.ones(4, np.float32)})
    same = codec.convert(a, str(tmp_path / "same.aero"))
    assert codec.diff(a, same).equal
    flipped = data.copy()
    flipped[40] ^= 1
    b = codec.write(str(tmp_path / "b.gguf"), {"q": codec.Packed(flipped, (2, 32), {"ggml_type": 8}),
                                               "f": np.ones(4, np.float32)})
    t = codec.diff(a, b).tensors[0]
    assert (t.status, t.bytewise, t.compared, t.differing, t.max_abs, t.histogram) == \
        ("different", True, 68, 1, None, None)
    i8 = codec.Packed(np.zeros(64, np.uint8), (2, 32), {"ggml_type": 24})  # I8: another codec
    other = codec.write(str(tmp_path / "c.gguf"), {"q": i8, "f": np.ones(4, np.float32)})
    t = codec.diff(a, other).tensors[0]
    assert (t.status, t.compared) == ("dtype_changed", 0)


def test_an_unreadable_tensor_is_reported_and_the_rest_compared(tmp_path, capsys):
    t = _model()
    a = _write(tmp_path / "a.aero", t)
    raw = bytearray(open(a, "rb").read())
    with codec.open(a) as r:
        off = r.tensors["embed"].offset
    raw[off + 3] ^= 0x40  # hash_b3 no longer matches
    b = tmp_path / "b.aero"
    b.write_bytes(bytes(raw))
    d = codec.diff(a, str(b))
    by = {x.name: x for x in d.tensors}
    assert by["embed"].status == "unreadable" and "[AERO-HASH-B3]" in by["embed"].error
    assert by["layer.0.b"].status == "identical" and not d.equal
    assert main(["diff", a, str(b)]) == 1
    assert "embed: could not be read" in capsys.readouterr().out


def test_exit_codes_and_json(tmp_path, capsys):
    t = _model()
    a = _write(tmp_path / "a.safetensors", t)
    b = _write(tmp_path / "b.mag", dict(t, embed=t["embed"] * 2))
    assert main(["diff", a, b, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["equal"] is False and doc["a"]["format"] == "safetensors" and doc["b"]["format"] == "mag"
    assert doc["counts"]["different"] == 1 and doc["counts"]["identical"] == 2
    e = next(x for x in doc["tensors"] if x["name"] == "embed")
    assert e["status"] == "different" and e["differing"] == 48 * 32 and e["shape_a"] == [48, 32]
    assert len(e["histogram"]) == len(doc["histogram_edges"]) - 1 and doc["histogram_edges"][-1] == "inf"
    _conforms("diff", doc)  # the documented schema (docs/json/cli.schema.json)
    assert main(["diff", a, a, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["equal"] is True
    _conforms("diff", doc)
    # anything that stops the comparison: 2 (1 means "they differ")
    assert main(["diff", a, str(tmp_path / "missing.aero")]) == 2
    assert "modelcodec:" in capsys.readouterr().err
    assert main(["diff", a, str(tmp_path / "missing.aero"), "--json"]) == 2
    _conforms("failure", json.loads(capsys.readouterr().out))
    (tmp_path / "notes.txt").write_text("not a model")
    assert main(["diff", a, str(tmp_path / "notes.txt")]) == 2
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(open(a, "rb").read()[:-10])  # bad data: the file cannot be compared
    assert main(["diff", a, str(cut)]) == 2
    assert "[SAFETENSORS-" in capsys.readouterr().err
    assert main(["diff", a, b, "--atol", "-1"]) == 2
    assert "atol" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["diff", a])
    assert e.value.code == 2


def test_names_from_a_file_reach_the_terminal_escaped(tmp_path, capsys):
    a = _write(tmp_path / "a.safetensors", {"w": np.zeros(2, np.float32)})
    b = _write(tmp_path / "b.safetensors", {"w": np.zeros(2, np.float32), "\x1b[2Jx": np.ones(1, np.float32)},
               metadata={"\x1b]0;k": "\x07"})
    assert main(["diff", a, b]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "+ \\x1b[2Jx: only in B" in out and "\\u0007" in out  # (the value as JSON writes it)


def test_the_result_pickles_and_its_json_is_strict(tmp_path):
    a = _write(tmp_path / "a.safetensors", {"x": np.array([0.0, 1.0], np.float32)})
    b = codec.write(str(tmp_path / "b.gguf"), {"x": np.array([0.0, np.inf], np.float32), "y": np.zeros(2, np.int8)},
                    metadata={"scale": [1.0, float("nan")], "ok": True})
    d = codec.diff(a, b)
    assert d.tensors[0].max_abs == math.inf and d.tensors[0].max_rel == math.inf
    assert pickle.loads(pickle.dumps(d)).as_dict() == d.as_dict()  # (NaN != NaN: compared as JSON gives it)
    doc = json.loads(json.dumps(d.as_dict(), allow_nan=False))
    assert doc["tensors"][0]["max_abs"] == "inf" and doc["tensors"][1]["status"] == "only_b"
    assert doc["metadata"]["added"] == {"scale": [1.0, "nan"], "ok": True}
    _conforms("diff", doc)


def test_sets_and_urls(tmp_path):
    from .servers import Nginx
    t = _model()
    www = tmp_path / "www"
    www.mkdir()
    a = _write(www / "m.safetensors", t)
    s = codec.write(str(www / "set" / "m.aeroset.json"), t)
    assert codec.diff(a, s).equal
    with Nginx(www) as n:
        d = codec.diff(f"{n.url}/m.safetensors", s)
        assert d.equal and d.a.source.startswith("http") and d.a.format == "safetensors"
        (index,) = (www / "set").glob("*.aeroset.json")
        d = codec.diff(f"{n.url}/set/{index.name}", a)  # a set over HTTP: its tensors one at a time
        assert d.equal and d.a.format == "aeroset" and len(d.tensors) == 3
        w = t["embed"].copy()
        w[0, 0] += 1
        other = _write(tmp_path / "o.aero", dict(t, embed=w))
        (e,) = [x for x in codec.diff(f"{n.url}/m.safetensors", other).tensors if x.status != "identical"]
        assert (e.name, e.differing, e.max_at) == ("embed", 1, (0, 0))


def test_two_large_models_diff_in_bounded_memory(tmp_path):
    """128 MiB against 128 MiB, every element of every tensor different: the diffing process'
    peak RSS grows by far less than either file (each tensor compared in 1 MiB pieces, mapped
    pages dropped behind: ~40 MB here, ~290 MB without the dropping)."""
    from .budgets import peak_growth_mb
    rng = np.random.default_rng(0)
    a, b = tmp_path / "a.safetensors", tmp_path / "b.aero"
    t = {f"w{i}": rng.integers(0, 255, 16 << 20, dtype=np.uint8).view(np.float32) for i in range(8)}
    codec.save(t, str(a))
    with np.errstate(all="ignore"):
        codec.save({k: v + np.float32(1) for k, v in t.items()}, str(b))
    del t
    grew = peak_growth_mb(f"d = codec.diff({str(a)!r}, {str(b)!r}); assert d.counts()['different'] == 8, d.counts()")
    assert grew < 96, grew  # MB: under either file's 128, whatever the machine


def test_tensors_declared_without_data_are_compared_by_declaration(tmp_path, capsys):
    from codec.formats.oinf import UninitializedTensor
    w = np.arange(4, dtype=np.float32)
    a, b = tmp_path / "a.oinf", tmp_path / "b.oinf"
    codec.save({"w": w, "cache": UninitializedTensor("f16", (2, 3))}, a)
    codec.save({"w": w, "cache": np.zeros((2, 3), np.float16)}, b)
    assert codec.diff(a, a).equal
    d = codec.diff(a, b)
    t = {x.name: x for x in d.tensors}["cache"]
    assert t.status == "different" and "A declares it without data" in t.error
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "~ cache: float16 [2, 3]: A declares it without data" in out


def test_a_file_on_a_server_without_range_requests_is_downloaded_once_and_compared(tmp_path, capsys):
    """As convert does (and as diff's docstring says): not a stop with HTTP-RANGE."""
    from .servers import FaultServer
    t = _model()
    www = tmp_path / "www"
    www.mkdir()
    a = _write(www / "m.aero", t)
    with FaultServer(www) as f:
        url = f"{f.url}/ignore-range/m.aero"
        d = codec.diff(url, a)
        assert d.equal and d.a.source == url and len(d.tensors) == len(t)
        assert main(["diff", url, str(a)]) == 0
        assert "equal" in capsys.readouterr().out
