"""Every value survives every trip the formats allow (issue 30, section 2): load -> save in every
format, metadata that is empty or equal to a format's default, non-finite GGUF floats through
AERO's JSON, and packed tensors through load/save."""
from __future__ import annotations

import numpy as np
import pytest

import codec


def _bits32(b: int) -> np.float32:
    return np.array(b, np.uint32).view(np.float32)[()]


def _bits64(b: int) -> np.float64:
    return np.array(b, np.uint64).view(np.float64)[()]


def _to(mid: str) -> dict:
    return {"format": "aeroset"} if mid == "set" else {}


# ------------------------------------------------------------------------------ STB names
def test_stb_names_are_one_rule_in_both_directions(tmp_path):
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, -2], np.int8)
    codec.write(str(tmp_path / "a.stb"), [a, b])
    got = codec.load(str(tmp_path / "a.stb"))
    assert list(got) == ["0", "1"]
    codec.save(got, str(tmp_path / "b.stb"))  # the reader's names are the writer's
    back = codec.load(str(tmp_path / "b.stb"))
    assert list(back) == ["0", "1"]
    assert all(back[k].dtype == got[k].dtype and np.array_equal(back[k], got[k]) for k in got)
    codec.save({7: a, "255": b}, str(tmp_path / "c.stb"))  # an int or its decimal text
    assert sorted(codec.load(str(tmp_path / "c.stb"))) == ["255", "7"]
    for bad in ("00", "-1", "256", " 1", "+1", "1.0", "w", True, 1.5):
        with pytest.raises(codec.UsageError, match="tensor_id"):
            codec.save({bad: a}, str(tmp_path / "d.stb"))
    with pytest.raises(codec.UsageError, match="used twice"):
        codec.save({1: a, "1": b}, str(tmp_path / "d.stb"))
    assert not (tmp_path / "d.stb").exists()


# ------------------------------------------------------------------------------ empty metadata
@pytest.mark.parametrize("mid", ["m.aero", "set", "m.gguf", "m.oinf"])
def test_empty_and_default_metadata_values_survive_and_no_key_is_added(tmp_path, mid):
    md = {"empty": "", "model_name": "", "architecture": "", "x": "1"}
    src = codec.write(str(tmp_path / "s.safetensors"), {"w": np.arange(3, dtype=np.float32)}, metadata=md)
    plain = codec.write(str(tmp_path / "p.safetensors"), {"w": np.arange(3, dtype=np.float32)}, metadata={"x": "1"})
    for source, want in ((src, md), (plain, {"x": "1"})):
        m = codec.convert(source, str(tmp_path / mid), **_to(mid))
        back = codec.convert(m, str(tmp_path / "back.safetensors"))
        with codec.open(back) as r:
            assert r.metadata == want, mid


def test_aero_holds_the_metadata_it_is_given_and_no_other_key(tmp_path):
    w = {"w": np.zeros(2, np.float32)}
    codec.write(str(tmp_path / "a.aero"), w)
    codec.write(str(tmp_path / "b.aero"), w, metadata={"model_name": "", "k": ""})
    codec.write(str(tmp_path / "c.aero"), w, model_name="m")
    from codec.formats.aeroset import write_aeroset
    write_aeroset(str(tmp_path / "s"), w, metadata={"architecture": "", "k": ""})
    write_aeroset(str(tmp_path / "t"), w)
    got = {}
    for n in ("a.aero", "b.aero", "c.aero", "s", "t"):
        with codec.open(str(tmp_path / n)) as r:
            got[n] = r.metadata
    assert got == {"a.aero": {}, "b.aero": {"model_name": "", "k": ""}, "c.aero": {"model_name": "m"},
                   "s": {"architecture": "", "k": ""}, "t": {}}


# ------------------------------------------------------------------------------ non-finite GGUF floats
NONFINITE = {
    "nan32": _bits32(0x7FC00000), "payload32": _bits32(0x7FC12345), "snan32": _bits32(0x7F800001),
    "negnan32": _bits32(0xFFC00001), "inf32": np.float32(np.inf), "ninf32": np.float32(-np.inf),
    "nan64": _bits64(0x7FF8000000000000), "payload64": _bits64(0x7FF0000000000123), "ninf64": np.float64(-np.inf),
    "arr32": np.array([1.5, _bits32(0xFFC12345), np.inf, -0.0], np.float32),
    "arr64": np.array([np.nan, -np.inf, 2.0 ** -1074], np.float64),
    "nested": [np.array([_bits64(0x7FF4000000000001)], np.float64), np.array([1, 2], np.int8)],
    "deep": [[_bits32(0x7F800002), np.float32(0.1)]],
    "finite": np.float32(0.1), "neg0": np.float64(-0.0), "text": "0x7fc00000",
}


def _bits(v):
    if isinstance(v, (np.ndarray, np.generic)):
        return (v.dtype.str, np.asarray(v).tobytes())
    if isinstance(v, list):
        return [_bits(x) for x in v]
    return (type(v).__name__, v)


@pytest.mark.parametrize("mid", ["m.aero", "set"])
def test_every_gguf_float_goes_to_aero_and_back_with_its_type_and_bits(tmp_path, mid):
    src = codec.write(str(tmp_path / "a.gguf"), {"w": np.zeros(2, np.float32)}, metadata=NONFINITE)
    m = codec.convert(src, str(tmp_path / mid), **_to(mid))
    back = codec.convert(m, str(tmp_path / "b.gguf"))
    with codec.open(src) as a, codec.open(back) as b:
        assert b.value_types == a.value_types
        assert {k: _bits(v) for k, v in b.metadata.items()} == {k: _bits(v) for k, v in a.metadata.items()}
        assert _bits(a.metadata["snan32"]) == _bits(NONFINITE["snan32"])  # (the reader keeps the payload)
    assert open(src, "rb").read() == open(back, "rb").read()


def test_nonfinite_float_text_is_read_only_where_its_type_says_so():
    from codec import values
    assert np.isnan(values.typed("0x7fc00000", "float32"))
    for bad, desc in (("0x3f800000", "float32"), ("0x7fc0000", "float32"), ("0x7fc00000", "float64"),
                      ("nan", "float32"), ("0X7FC00000", "float32")):
        with pytest.raises(codec.UsageError):
            values.typed(bad, desc)
    assert values.typed("0x7fc00000", "string") == "0x7fc00000"


# ------------------------------------------------------------------------------ packed tensors
def _quantized_gguf(path) -> str:
    rng = np.random.default_rng(5)
    q = {"q4_0": (2, 18, (3, 64)), "q4_1": (3, 20, (2, 32)), "q8_0": (8, 34, (1, 96))}  # ggml type, block bytes
    t = {n: codec.Packed(rng.integers(0, 256, s[0] * s[1] // 32 * bb, dtype=np.uint8), s, {"ggml_type": g})
         for n, (g, bb, s) in q.items()}
    t["f"] = rng.standard_normal((4, 8)).astype(np.float32)
    return codec.write(path, t, metadata={"general.architecture": "x"})


def test_load_gives_packed_tensors_and_save_writes_them_back_exactly(tmp_path):
    src = _quantized_gguf(str(tmp_path / "q.gguf"))
    got = codec.load(src)
    assert {n: type(v).__name__ for n, v in got.items()} == \
        {"q4_0": "Packed", "q4_1": "Packed", "q8_0": "Packed", "f": "ndarray"}
    assert got["q4_1"].shape == (2, 32) and got["q4_1"].quant_params == {"ggml_type": 3}
    assert got["q4_1"].data.dtype == np.uint8 and got["q4_1"].data.flags.writeable  # (its own copy)
    for mid in ("a.aero", "b.gguf"):
        codec.save(got, str(tmp_path / mid))
        back = codec.load(str(tmp_path / mid))
        assert list(back) == list(got)
        for n, v in got.items():
            w = back[n]
            if isinstance(v, codec.Packed):
                assert isinstance(w, codec.Packed) and w.shape == v.shape and w.quant_params == v.quant_params
                assert w.data.tobytes() == v.data.tobytes()
            else:
                assert w.dtype == v.dtype and np.array_equal(w, v)
    codec.save(codec.load(str(tmp_path / "a.aero")), str(tmp_path / "c.gguf"))
    with codec.open(src) as a, codec.open(str(tmp_path / "c.gguf")) as c:
        assert {n: (t.dtype_name, t.shape, t.nbytes) for n, t in a.tensors.items()} == \
            {n: (t.dtype_name, t.shape, t.nbytes) for n, t in c.tensors.items()}


@pytest.mark.parametrize("target", ["x.safetensors", "x.oinf", "x.mag", "x.stb"])
def test_saving_packed_bytes_where_a_format_cannot_hold_them_is_a_usage_error(tmp_path, target):
    got = codec.load(_quantized_gguf(str(tmp_path / "q.gguf")))
    one = {("0" if target == "x.stb" else "q"): got["q8_0"]}
    with pytest.raises(codec.UsageError, match=r"tensor '(q|0)': .* cannot hold it: packed is not one of its"):
        codec.save(one, str(tmp_path / target))
    assert not (tmp_path / target).exists()
