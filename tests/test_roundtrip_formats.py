"""Every value survives every trip the formats allow (issue 30, section 2): load -> save in every
format, metadata that is empty or equal to a format's default, non-finite GGUF floats through
AERO's JSON, and packed tensors through load/save."""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import codec
from codec import registry
from codec.engine import values
from codec.convert import tensor_of


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


def test_gguf_declares_its_name_limit_in_bytes_as_its_writer_applies_it(tmp_path):
    caps = registry.get("gguf").capabilities
    for name, fits in (("x" * 63, True), ("é" * 31, True), ("é" * 32, False), ("x" * 64, False)):
        assert (caps.refuse(name, "float32", (1,)) is None) == fits, name
        src = codec.write(str(tmp_path / "s.safetensors"), {name: np.zeros(1, np.float32)})
        if fits:
            codec.convert(src, str(tmp_path / "a.gguf"))
        else:  # (refused before anything is written, with the way out)
            with pytest.raises(codec.UsageError, match=r"is not 1\.\.63 bytes of UTF-8 \(--rename index"):
                codec.convert(src, str(tmp_path / "b.gguf"))
    assert not (tmp_path / "b.gguf").exists()


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


def test_aeroset_refuses_a_key_its_index_would_give_back_as_another(tmp_path):
    from codec.formats.aeroset import write_aeroset
    for md in ({"name": "x"}, {"name": "x", "model_name": "m"}):
        with pytest.raises(codec.UsageError, match="metadata key 'name'"):
            write_aeroset(str(tmp_path / "s"), {"w": np.zeros(2, np.float32)}, metadata=md)
    assert list(tmp_path.iterdir()) == []


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
    from codec.engine import values
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


# ------------------------------------------------------------------------------ exact counts in reports
def test_a_cut_file_counts_every_finding_and_says_what_it_holds_and_what_is_promised(tmp_path):
    t = {f"t{i}": np.full(1000, i, np.float32) for i in range(250)}
    whole = open(codec.write(str(tmp_path / "a.gguf"), t), "rb").read()
    cut = len(whole) // 5
    (tmp_path / "cut.gguf").write_bytes(whole[:cut])
    with codec.open(str(tmp_path / "a.gguf")) as r:
        infos = [r.tensors[n] for n in r.tensors]
        data_start = min(i.offset for i in infos)
    held, promised = cut - data_start, max(i.offset + i.nbytes for i in infos) - data_start
    past = sum(i.offset + i.nbytes > cut for i in infos)
    assert past > 51  # (more than the 50 findings a check lists)
    rep = codec.validate(str(tmp_path / "cut.gguf"))
    (v,) = rep.violations
    assert isinstance(v, codec.errors.TruncatedError)
    assert f"[holds {held} bytes of the {promised} its header promises; +{past - 1} more findings past the end " \
           "of the data that follow from it]" in str(v)
    assert len(v.consequences) + sum(c.more for c in [v, *v.consequences]) == past - 1


def test_a_cut_file_with_one_region_past_its_end_says_what_it_holds_and_what_is_promised(tmp_path):
    whole = open(codec.write(str(tmp_path / "a.gguf"), {"w": np.zeros(1000, np.float32)}), "rb").read()
    (tmp_path / "cut.gguf").write_bytes(whole[:-100])
    (v,) = codec.validate(str(tmp_path / "cut.gguf")).violations
    assert str(v).endswith("[holds 3900 bytes of the 4000 its header promises] [GGUF-BOUNDS]")


def test_findings_a_cap_leaves_out_are_counted(tmp_path):
    from codec.formats.stb import DESC
    from codec.schemas import stb as S
    p = str(tmp_path / "a.stb")
    codec.write(p, [np.zeros(1, np.float32)] * 60)
    b = bytearray(open(p, "rb").read())
    for i in range(60):  # every tensor_id 0: 59 repeats
        b[S.HEADER_SIZE + i * S.DESCRIPTOR_SIZE + DESC.by_name["tensor_id"].offset] = 0
    (tmp_path / "a.stb").write_bytes(b)
    rep = codec.validate(p)
    assert len(rep.violations) == 50 and sum(1 + v.more for v in rep.violations) == 59
    assert str(rep.violations[-1]).endswith("[+9 more like it, not listed] [STB-TENSOR-ID]")


# ------------------------------------------------------------------------------ every format, any input it can hold
# What each format can hold comes from its descriptor's Capabilities: tensors of its dtypes,
# ranks, extents and names, and metadata of its kind.  Whatever a writer is given from that
# domain it writes, and it reads back the same (tensors bit for bit, metadata as the format
# keeps it); save(load(...)) with that metadata gives the same again.

FORMATS = [f.name for f in registry.formats()]
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
_KEY = _TEXT.filter(bool)  # (a metadata key is non-empty text in every format)


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def _array(dt: np.dtype, shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, int(np.prod(shape)) * dt.itemsize, dtype=np.uint8)
    if dt == np.bool_:
        raw %= 2
    return raw.view(dt).reshape(shape)


def domain_tensors(fmt: str, max_size: int = 3):
    """Tensors a format can hold, by its Capabilities (name -> array)."""
    caps = registry.get(fmt).capabilities
    dtypes = sorted(d for d in caps.dtypes if d != "packed")
    top = min(caps.max_rank if caps.max_rank is not None else 4, 4)
    side = st.integers(0 if caps.zero_extents else 1, 3)
    arrays = st.builds(lambda d, shape, seed: _array(_np_dtype(d), tuple(shape), seed), st.sampled_from(dtypes),
                       st.lists(side, min_size=caps.min_rank, max_size=top), st.integers(0, 2**32 - 1))
    names = st.from_regex(caps.names, fullmatch=True) if caps.names else st.text(min_size=1, max_size=8)
    names = names.filter(lambda n: not any("\ud800" <= c <= "\udfff" for c in n) and (
        caps.max_name_bytes is None or len(n.encode()) <= caps.max_name_bytes))
    if "packed" in caps.dtypes:  # quantized tensors (of a codec the format knows, when it says which)
        packed = st.builds(_packed, st.sampled_from(sorted(_QUANT)), st.integers(1, 3), st.integers(1, 2),
                           st.integers(0, 2**32 - 1))
        if caps.packed is not None:
            packed = packed.filter(lambda p: caps.packed(p.shape, p.nbytes, p.quant_params) is None)
        arrays = arrays | packed
    return st.dictionaries(names, arrays, max_size=max_size)


#: quantized ggml types: code -> (block size, bytes per block)
_QUANT = {code: (block, size) for code, (_, block, size, np_name) in
          __import__("codec.schemas.gguf", fromlist=["GGML_TYPES"]).GGML_TYPES.items() if np_name is None}


def _packed(code: int, rows: int, blocks: int, seed: int) -> codec.Packed:
    block, size = _QUANT[code]
    data = np.random.default_rng(seed).integers(0, 256, rows * blocks * size, dtype=np.uint8)
    return codec.Packed(data, (rows, blocks * block), {"ggml_type": code})


def domain_metadata(fmt: str):
    """Metadata a format can hold, by its Capabilities' kind of metadata."""
    caps = registry.get(fmt).capabilities
    kind = caps.metadata
    ints64 = st.integers(-2**63, 2**63 - 1)
    if kind == "none":
        return st.just({})
    if kind == "text":
        return st.dictionaries(_KEY, _TEXT, max_size=4)
    if kind == "scalars":
        return st.dictionaries(_KEY, st.one_of(ints64, st.floats(), st.booleans()), max_size=4)
    if kind == "typed":
        word = st.from_regex(caps.text, fullmatch=True) if caps.text else _TEXT
        f32 = st.floats(width=32, allow_nan=False) | st.just(float("nan"))
        return st.dictionaries(word.filter(bool), st.one_of(
            st.integers(-2**63, 2**64 - 1), f32, st.booleans(), word,
            st.lists(st.integers(-2**31, 2**31 - 1), max_size=3), st.lists(f32, max_size=3)), max_size=4)
    if kind == "typed-arrays":
        scalar = st.one_of(st.integers(-2**63, 2**64 - 1), st.floats(), st.booleans(), _TEXT,
                           st.builds(np.float32, st.floats(width=32)), st.builds(np.uint8, st.integers(0, 255)))
        value = st.one_of(scalar, st.lists(ints64, max_size=3), st.lists(_TEXT, max_size=3),
                          st.lists(st.lists(st.floats(), min_size=1, max_size=2), min_size=1, max_size=2))
        return st.dictionaries(_KEY.filter(lambda k: k != "general.alignment"), value, max_size=4)
    # JSON (AERO, AEROSET): any JSON value but NaN/inf, which JSON has no number for
    json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False,
                        allow_infinity=False) | _TEXT,
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                        max_leaves=6)
    # (an AEROSET index keeps model_name as "name": a key "name" is refused)
    keys = _KEY.filter(lambda k: k not in (values.TYPES_KEY, "name"))
    return st.dictionaries(keys, json, max_size=4)


def _same_tensors(got: dict, want: dict) -> None:
    want = {str(k): w for k, w in want.items()}
    assert sorted(got) == sorted(want)  # (OINF writes its tables sorted by name)
    for k, g in got.items():
        w = want[k]
        if isinstance(w, codec.Packed):
            assert isinstance(g, codec.Packed) and (g.shape, g.quant_params) == (w.shape, w.quant_params), k
            assert g.data.tobytes() == w.data.tobytes(), k
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, k
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(w).tobytes(), k


def _kept(fmt: str, v):
    """A metadata value as the format keeps it (a comparable form)."""
    if fmt == "oinf" and isinstance(v, float):
        return _bits(np.float32(v))  # (OINF stores a Python float as f32, as documented)
    if fmt == "oinf" and isinstance(v, list) and any(isinstance(x, float) for x in v):
        return _bits(np.array(v, np.float32))
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def same_metadata(fmt: str, r, want: dict) -> None:
    """The metadata ``r`` reads back is ``want``, as ``fmt`` keeps it."""
    got = r.metadata
    if fmt == "gguf":  # typed: the same type and bits
        assert r.value_types == {k: values.describe(v) for k, v in want.items()}
        assert {k: _bits(values.typed(v, r.value_types[k])) for k, v in got.items()} == \
            {k: _bits(values.typed(v, values.describe(v))) for k, v in want.items()}
        return
    if fmt == "oinf":
        got = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in got.items()}
    assert {k: _kept(fmt, v) for k, v in got.items()} == {k: _kept(fmt, v) for k, v in want.items()}


def write(fmt: str, path: str, tensors: dict, metadata: dict):
    return codec.write(path, tensors, format=fmt, **({"metadata": metadata} if metadata else {}))


def typed_metadata(r) -> dict:
    """A reader's metadata as a writer takes it back unchanged (typed values keep their types)."""
    types = r.value_types
    return {k: values.typed(v, types[k]) if k in types else v for k, v in r.metadata.items()}


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=int(os.environ.get("RT_EXAMPLES", 25)), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_format_gives_back_what_it_can_hold_through_save_and_load(fmt, data, tmp_path_factory):
    tensors = data.draw(domain_tensors(fmt), "tensors")
    metadata = data.draw(domain_metadata(fmt), "metadata")
    d = tmp_path_factory.mktemp(fmt)
    p, q = str(d / f"p.{fmt}"), str(d / f"q.{fmt}")
    write(fmt, p, tensors, metadata)
    with codec.open(p, format=fmt) as r:
        _same_tensors({k: tensor_of(r, k) for k in r.tensors}, tensors)
        same_metadata(fmt, r, metadata)
        again = typed_metadata(r)
    codec.save(codec.load(p, format=fmt), q, format=fmt, **({"metadata": again} if again else {}))
    with codec.open(q, format=fmt) as r2:
        _same_tensors(codec.load(q, format=fmt), tensors)
        same_metadata(fmt, r2, metadata)


@pytest.mark.parametrize("src,mid", [("gguf", "aero"), ("gguf", "aeroset"), ("safetensors", "aero"),
                                     ("safetensors", "aeroset"), ("safetensors", "gguf")])
@settings(max_examples=int(os.environ.get("RT_EXAMPLES", 25)), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_metadata_converts_there_and_back_unchanged(src, mid, data, tmp_path_factory):
    """Every value of a source (GGUF: every type, NaN payloads and infinities included) goes to
    a format that can hold it and comes back with the same type and bits: the same file."""
    metadata = data.draw(domain_metadata(src), "metadata")
    tensors = {"w": np.arange(4, dtype=np.float32)}
    d = tmp_path_factory.mktemp("trip")
    p = write(src, str(d / f"p.{src}"), tensors, metadata)
    m = codec.convert(p, str(d / f"m.{mid}"), format=mid)
    back = codec.convert(m, str(d / f"q.{src}"), format=src)
    with codec.open(p) as a, codec.open(back) as b:
        same_metadata(src, b, metadata)
        assert b.value_types == a.value_types
    if src == "gguf":
        assert open(p, "rb").read() == open(back, "rb").read()
