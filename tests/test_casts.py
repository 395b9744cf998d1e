"""Casts keep every value or are refused; a refusal's hint works when followed; a target whose
readers require bools of 0 or 1 gets only those (issue 30 §0, §5)."""
import math
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import codec
from codec.tools import cli
from codec.convert import _CASTABLE, holds_every, lossless_cast
from codec.engine.dtypes import numpy_dtype


# ------------------------------------------------------------------ every pair of cast types
def _py(a: np.ndarray, k: int):
    """Element ``k`` of ``a`` as an exact Python number (a bool is 0 or 1, a float a float)."""
    if a.dtype == np.bool_:
        return int(a.view(np.uint8)[k] != 0)
    if a.dtype.kind in "iu":
        return int(a[k])
    return float(a.astype(np.float64)[k])


def _same(x, y) -> bool:
    """Python compares an int and a float exactly; NaN is NaN."""
    nan = [isinstance(v, float) and math.isnan(v) for v in (x, y)]
    return nan[0] and nan[1] or (not any(nan) and x == y)


#: numbers at every type's edges (and just past them), precision edges, specials
EDGES = sorted({v for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
                for b in (int(np.iinfo(t).min), int(np.iinfo(t).max)) for v in (b - 1, b, b + 1)}
               | {2**24 + 1, 2**53 + 1, -(2**53) - 1, 2**63, 2**64}) + [0.5, -0.0, 1e-8, 65504.0, 65520.0, 448.0,
                                                                         464.0, 57344.0, 3.4e38, 1e300, -2.5,
                                                                         float("nan"), float("inf"), float("-inf")]


def _array(dt: np.dtype, xs: list) -> np.ndarray:
    """The numbers of ``xs`` that ``dt`` holds (an integer type: those in its range; a float
    type: each as the nearest value it has)."""
    if dt == np.bool_:
        return np.array([bool(x) for x in xs if x in (0, 1)], bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([int(x) for x in xs if not isinstance(x, float) and info.min <= x <= info.max], dt)
    with np.errstate(all="ignore"):
        return np.array([float(x) for x in xs], np.float64).astype(dt)


@pytest.mark.parametrize("to", _CASTABLE)
@pytest.mark.parametrize("frm", _CASTABLE)
@settings(max_examples=15, deadline=None)
@given(xs=st.lists(st.one_of(st.sampled_from(EDGES), st.integers(-(2**65), 2**65), st.floats(width=64)),
                   max_size=6))
def test_a_cast_keeps_every_value_or_names_the_first_it_would_change(frm, to, xs):
    """Over every pair of cast types: an accepted cast gives every element the very number it
    had; a refused one names the tensor and the first element whose number would change."""
    a = _array(numpy_dtype(frm), list(EDGES) + xs)
    with np.errstate(all="ignore"):
        naive = a.astype(numpy_dtype(to))
    changed = [k for k in range(a.size) if not _same(_py(a, k), _py(naive, k))]
    try:
        b = lossless_cast("w", a, to)
    except codec.UsageError as e:
        assert changed, f"refused a cast that keeps every value: {e}"
        assert re.search(rf"tensor 'w': casting {frm} to {to} would change its values \(element {changed[0]}:", str(e)), \
            (str(e), changed[:3])
        return
    assert not changed, f"accepted a cast changing element {changed[0]}: {_py(a, changed[0])!r} -> {_py(naive, changed[0])!r}"
    assert b.dtype == numpy_dtype(to) and b.shape == a.shape
    assert all(_same(_py(a, k), _py(b, k)) for k in range(a.size))


@pytest.mark.parametrize("frm", [d for d in _CASTABLE if numpy_dtype(d).itemsize <= 2])
def test_holds_every_is_exact_for_the_small_types(frm):
    """What a hint calls a type that "holds every value" is checked over every value of each
    type of one or two bytes: the cast is accepted exactly when the claim is made."""
    dt = numpy_dtype(frm)
    a = np.array([False, True]) if dt == np.bool_ else np.arange(256 ** dt.itemsize, dtype=f"u{dt.itemsize}").view(dt)
    for to in _CASTABLE:
        try:
            lossless_cast("w", a, to)
            kept = True
        except codec.UsageError:
            kept = False
        assert kept == holds_every(frm, to), (frm, to)


@pytest.mark.parametrize("frm, to, value, becomes", [
    ("uint64", "int64", 2**64 - 1, "-1"), ("int8", "uint8", -1, "255"), ("uint64", "int32", 2**64 - 1, "-1"),
    ("int64", "float64", 2**53 + 1, "9007199254740992.0"), ("uint64", "float64", 2**64 - 1, "1.8446744073709552e+19"),
    ("int32", "float32", 2**24 + 1, "16777216.0"), ("int64", "uint64", -5, "18446744073709551611")])
def test_the_casts_that_wrapped_around_are_refused(tmp_path, frm, to, value, becomes):
    src = codec.write(str(tmp_path / "a.aero"), {"w": np.array([0, 1, value], frm)})
    dst = tmp_path / "b.aero"
    with pytest.raises(codec.UsageError, match=rf"tensor 'w': casting {frm} to {to} would change its values "
                                               rf"\(element 2: {value} would become {re.escape(becomes)}\)"):
        codec.convert(src, str(dst), cast=[f"{frm}={to}"])
    assert not dst.exists()


def test_special_floats_keep_their_values():
    """NaN stays NaN, infinities stay, -0.0 stays -0.0 between floats (and may become 0 as an
    integer: the same number); FP8 widens exactly."""
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5], np.float32)
    b = lossless_cast("w", a, "float16")
    assert np.isnan(b[0]) and b[1:3].tolist() == [np.inf, -np.inf] and np.signbit(b[3]) and b[4] == 1.5
    assert lossless_cast("w", np.array([-0.0, 3.0]), "int8").tolist() == [0, 3]
    odd = np.frombuffer(b"\x00\x02\x01", bool)  # (a bool is 0 or 1 whatever its byte: never 2)
    assert lossless_cast("w", odd, "bfloat16").tolist() == [0, 1, 1] and lossless_cast("w", odd, "int8").tolist() == [0, 1, 1]
    f8 = np.array([0.5, -448, 240], numpy_dtype("float8_e4m3fn"))
    assert lossless_cast("w", f8, "float32").tolist() == [0.5, -448.0, 240.0]
    with pytest.raises(codec.UsageError, match=r"element 1: inf would become nan"):
        lossless_cast("w", a[:2], "float8_e4m3fn")


def test_the_cli_cast_refuses_a_changed_value_and_writes_a_kept_one(tmp_path, capsys):
    src = codec.write(str(tmp_path / "a.safetensors"), {"u": np.array([1, 2**64 - 1], np.uint64),
                                                        "k": np.array([[7, -3]], np.int64)})
    dst = tmp_path / "b.oinf"
    assert cli.main(["convert", src, str(dst), "--cast", "uint64=int64"]) == 1
    assert "tensor 'u': casting uint64 to int64 would change its values (element 1: 18446744073709551615 would " \
           "become -1)" in capsys.readouterr().err and not dst.exists()
    codec.write(src, {"u": np.array([1, 2**63 - 1], np.uint64), "k": np.array([[7, -3]], np.int64)})
    assert cli.main(["convert", src, str(dst), "--cast", "uint64=int64", "--cast", "int64=int8"]) == 0
    assert f"wrote {dst}" in capsys.readouterr().out
    with codec.open(str(dst)) as r:
        assert r.tensor("u").dtype == np.int64 and r.tensor("u").tolist() == [1, 2**63 - 1]
        assert r.tensor("k").dtype == np.int8 and r.tensor("k").tolist() == [[7, -3]]


# ------------------------------------------------------------------ hints that work
def _follow(msg: str, kw: dict) -> dict:
    """The options a refusal's hint says to add (none: {})."""
    more = {}
    m = re.search(r"--cast (\w+)=TYPE \(TYPE one of (\w+)", msg)
    if m:
        more["cast"] = {**kw.get("cast", {}), m.group(1): m.group(2)}
    if "--rename index" in msg:
        more["rename"] = "index"
    if "--drop-metadata" in msg:
        more["drop_metadata"] = True
    return more


#: a model of every type a cast names (safetensors holds them all), values every type holds
EVERY = {f"t.{d}": np.array([0, 1], numpy_dtype(d)) for d in _CASTABLE}
TARGETS = ["aero", "mag", "oinf", "stb", "safetensors", "gguf", "aeroset"]


@pytest.mark.parametrize("fmt", TARGETS)
def test_every_hint_followed_makes_the_conversion_go_further(tmp_path, fmt):
    """Convert a model of every cast type to each format, following each refusal's hint: each
    hint is accepted and moves the conversion on (past that tensor or reason), and the
    conversion ends written, every value kept."""
    src = codec.write(str(tmp_path / "every.safetensors"), EVERY, metadata={"note": "x"})
    dst = str(tmp_path / ("set/" if fmt == "aeroset" else f"out.{fmt}"))
    kw, seen = {}, []
    for _ in range(40):
        try:
            out = codec.convert(src, dst, format=fmt, **kw)
            break
        except codec.UsageError as e:
            msg = str(e)
            more = _follow(msg, kw)
            assert more, f"a refusal with no hint, though options make it fit: {msg}"
            assert msg not in seen, f"the hint did not help: {msg}"
            seen.append(msg)
            kw.update(more)
    else:
        pytest.fail(f"no end: {seen[-3:]}")
    with codec.open(out) as r:
        assert len(r.tensors) == len(EVERY)
        for k, (name, a) in enumerate(EVERY.items()):
            got = r.tensor(str(k) if kw.get("rename") else name)
            assert got.astype(np.float64).tolist() == [0.0, 1.0], name


@pytest.mark.parametrize("case", ["rank0", "rank5", "zero", "packed", "packed_gguf", "ggml_type_true",
                                  "ggml_type_float"])
def test_no_hint_when_no_option_fits(tmp_path, case):
    """A refusal no cast or rename fixes (a rank, a zero extent, packed bytes a target cannot
    hold and no format can dequantize, a ggml type that is not an integer) offers neither."""
    from codec.model import Packed
    t, fmt = {
        "rank0": ({"w": np.float32(1.5).reshape(())}, "gguf"),
        "rank5": ({"w": np.ones((1, 1, 1, 1, 2), np.float32)}, "gguf"),
        "zero": ({"w": np.ones((2, 0), np.float32)}, "mag"),
        "packed": ({"w": Packed(np.zeros(18, np.uint8), (32,), {"codec": "mine"})}, "safetensors"),
        "packed_gguf": ({"w": Packed(np.zeros(66, np.uint8), (256,), {"ggml_type": 16})}, "oinf"),  # (IQ2_XXS)
        "ggml_type_true": ({"w": Packed(np.zeros(18, np.uint8), (32,), {"ggml_type": True})}, "gguf"),
        "ggml_type_float": ({"w": Packed(np.zeros(18, np.uint8), (32,), {"ggml_type": 2.0})}, "gguf"),
    }[case]
    src = codec.write(str(tmp_path / ("a.gguf" if case == "packed_gguf" else "a.aero")), t)
    dst = tmp_path / "b.out"
    with pytest.raises(codec.UsageError, match="tensor 'w': .* cannot hold it") as e:
        codec.convert(src, str(dst), format=fmt, drop_metadata=True)
    assert "--cast" not in str(e.value) and "--rename" not in str(e.value), str(e.value)
    assert not dst.exists()


def test_an_fp8_cast_the_hint_names_is_accepted(tmp_path, capsys):
    src = codec.write(str(tmp_path / "a.safetensors"), {"w": np.array([0.5, -2, 448], numpy_dtype("float8_e4m3fn"))})
    dst = tmp_path / "b.oinf"
    assert cli.main(["convert", src, str(dst)]) == 1
    err = capsys.readouterr().err
    assert "--cast float8_e4m3fn=TYPE (TYPE one of float16, float32, float64: each holds every value)" in err, err
    assert cli.main(["convert", src, str(dst), "--cast", "float8_e4m3fn=float16"]) == 0
    with codec.open(str(dst)) as r:
        assert r.tensor("w").dtype == np.float16 and r.tensor("w").tolist() == [0.5, -2.0, 448.0]


def test_a_metadata_value_json_cannot_hold_is_named(tmp_path):
    for v in (float("nan"), float("inf"), [1.0, float("-inf")]):
        with pytest.raises(codec.UsageError, match=r"metadata 'lr' must be JSON-serialisable"):
            codec.write(str(tmp_path / "a.aero"), {"w": np.ones(2, np.float32)}, metadata={"ok": 1, "lr": v})
    assert not os.listdir(tmp_path)


# ------------------------------------------------------------------ bools of 0 or 1
ODD = np.frombuffer(b"\x00\x02\x01\xff", bool)


def test_a_writer_whose_reader_requires_0_or_1_refuses_other_bool_bytes(tmp_path):
    from codec.io.writer_io import LazyTensor
    for t in (ODD, LazyTensor(bool, (4,), lambda: ODD)):
        with pytest.raises(codec.UsageError, match=r"tensor 'a': a bool element must be the byte 0 or 1, element 1 is 2"):
            codec.write(str(tmp_path / "w.oinf"), {"a": t})
        assert not os.listdir(tmp_path)
    p = codec.write(str(tmp_path / "w.oinf"), {"a": ODD != 0})
    assert codec.validate(p, full=True).ok
    with codec.open(p) as r:
        assert r.tensor("a").tolist() == [False, True, True, True]


@pytest.mark.parametrize("fmt", ["safetensors", "mag", "aero", "aeroset"])
def test_other_bool_bytes_are_a_warning_and_stop_a_conversion_to_a_strict_target(tmp_path, fmt):
    src = codec.write(str(tmp_path / (f"s.{fmt}" if fmt != "aeroset" else "s/s.aeroset.json")),
                      {"a": ODD, "b": np.ones(3, bool)})
    rep = codec.validate(src, full=True)
    rule = "AERO-BOOL" if fmt == "aeroset" else f"{fmt.upper()}-BOOL"  # (a set's parts are AERO files)
    assert rep.ok and [(v.rule, v.offset is not None) for v in rep.warnings] == [(rule, True)]
    assert "element 1 is the byte 2" in str(rep.warnings[0])
    assert not codec.validate(src).violations  # (the data is read only by --full)
    dst = tmp_path / "d.oinf"
    with pytest.raises(codec.UsageError, match=r"tensor 'a': a bool element must be the byte 0 or 1, element 1 is 2"):
        codec.convert(src, str(dst))
    assert not dst.exists()
    out = codec.convert(src, str(tmp_path / "d.aero"))  # (AERO holds any byte, as the source does)
    with codec.open(out) as r:
        assert r.tensor("a").view(np.uint8).tolist() == [0, 2, 1, 255]


def test_a_hint_offers_lossy_rounding_only_to_types_it_rounds_to(tmp_path):
    """--lossy never rounds to bool (it keeps values or refuses): a hint that says "unless --lossy
    rounds them" lists only the types --lossy rounds to, and following it with --lossy works."""
    src = codec.write(str(tmp_path / "a.safetensors"), {"w": np.array([0.1, 2.5], np.float64)})
    dst = tmp_path / "b.mag"
    with pytest.raises(codec.UsageError) as e:
        codec.convert(src, str(dst))
    msg = str(e.value)
    assert "--cast float64=TYPE (TYPE one of int32, float16, float32: refused if any value would change, " \
           "unless --lossy rounds them)" in msg, msg
    for to in ("int32", "float16", "float32"):
        out = codec.convert(src, str(tmp_path / f"{to}.mag"), cast=[f"float64={to}"], lossy=True)
        with codec.open(out) as r:
            assert r.tensor("w").dtype == np.dtype(to)
    with pytest.raises(codec.UsageError, match="--lossy does not round to bool"):
        codec.convert(src, str(dst), cast=["float64=bool"], lossy=True)
    assert not dst.exists()
