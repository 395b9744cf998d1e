"""Issue 32 §1: casts that change values, when asked (``lossy=True`` / ``--lossy``): values round
to the nearest, ties to even, exactly as numpy and ml_dtypes round; a value beyond the target's
range is refused unless ``overflow`` says what it becomes; each tensor's largest absolute and
relative error is reported (human output and ``--json``).  Without the opt-in nothing changes."""
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import codec
from codec.engine.casts import BLOCK, lossy_cast
from codec.engine.dtypes import numpy_dtype
from codec.tools import cli


def _run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _src(tmp_path, tensors, name="m.safetensors", **kw):
    return codec.write(str(tmp_path / name), tensors, **kw)


def _errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The largest absolute and relative error of ``b`` against ``a`` (finite elements)."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    d = np.abs(x - y)[ok]
    nz = x[ok] != 0
    rel = d[nz] / np.abs(x[ok][nz])
    return float(d.max(initial=0)), float(rel.max(initial=0))


@pytest.mark.parametrize("to", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_float32_rounds_to_nearest_even_like_numpy_and_ml_dtypes(tmp_path, to):
    """Every float32 bit pattern class (random normals, subnormals, ties, signed zeros, NaN)
    becomes exactly what ``astype`` gives; the reported errors are the real ones."""
    rng = np.random.default_rng(7)
    top = float(ml_dtypes.finfo(numpy_dtype(to)).max)
    a = np.concatenate([rng.uniform(-top, top, 5000), rng.normal(0, 1e-3, 3000),
                        [0.0, -0.0, np.nan, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 2.0 ** -30]]).astype(np.float32)
    a = a[~(np.abs(a) > top)]  # (in range: the overflow policy is another test)
    src = _src(tmp_path, {"w": a.reshape(-1, 2) if a.size % 2 == 0 else a})
    dst = str(tmp_path / "out.safetensors")
    out = codec.convert(src, dst, cast=[f"float32={to}"], lossy=True)
    want = a.astype(numpy_dtype(to))
    with codec.open(dst) as r:
        got = r.tensor("w").reshape(-1)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    [rep] = out.lossy
    assert (rep["name"], rep["from"], rep["to"]) == ("w", "float32", to)
    abs_err, rel_err = _errors(a, want)
    assert rep["max_abs_error"] == pytest.approx(abs_err, rel=1e-12) and abs_err > 0
    assert rep["max_rel_error"] == pytest.approx(rel_err, rel=1e-12)
    assert rep["changed"] == int(np.count_nonzero((a.astype(np.float64) != want.astype(np.float64))
                                                   & ~np.isnan(a))) and rep["overflowed"] == 0


def test_ties_go_to_even():
    """1 + 2^-11 lies halfway between float16 1 and 1 + 2^-10: it becomes 1 (even); 1 + 3*2^-11
    becomes 1 + 2^-9 (even); float to int rounds 2.5 to 2 and 3.5 to 4."""
    b, rep = lossy_cast("w", np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11], np.float32), "float16")
    assert b.tolist() == [1.0, 1 + 2.0 ** -9] and rep["max_abs_error"] == 2.0 ** -11
    b, _ = lossy_cast("w", np.array([2.5, 3.5, -2.5], np.float64), "int8")
    assert b.tolist() == [2, 4, -2]


def test_without_lossy_the_exact_refusal_stays(tmp_path, capsys):
    src = _src(tmp_path, {"w": np.array([0.1, 1.0], np.float32)})
    dst = tmp_path / "out.safetensors"
    with pytest.raises(codec.UsageError, match=r"would change its values \(element 0: 0.10000000149011612 would become "
                                               r"0.0999755859375\): --lossy \(lossy=True\) lets a cast round"):
        codec.convert(src, dst, cast=["float32=float16"])
    assert not dst.exists()
    rc, _, err = _run(capsys, "convert", src, dst, "--cast", "float32=float16")
    assert rc == 1 and "--lossy" in err and not dst.exists()


def test_out_of_range_is_refused_unless_a_policy_says(tmp_path):
    a = np.array([1.0, 70000.0, -1e6, 65519.0], np.float32)  # (65519 rounds down to 65504: in range)
    src = _src(tmp_path, {"w": a})
    dst = tmp_path / "o.safetensors"
    with pytest.raises(codec.UsageError, match=r"tensor 'w'.*element 1 is 70000.0, beyond float16's range: "
                                               r"--overflow saturate\|inf"):
        codec.convert(src, dst, cast=["float32=float16"], lossy=True)
    assert not dst.exists()
    out = codec.convert(src, dst, cast=["float32=float16"], lossy=True, overflow="saturate")
    with codec.open(dst) as r:
        assert r.tensor("w").tolist() == [1.0, 65504.0, -65504.0, 65504.0]
    assert out.lossy[0]["overflowed"] == 2 and out.lossy[0]["max_abs_error"] == 1e6 - 65504
    out = codec.convert(src, dst, cast=["float32=float16"], lossy=True, overflow="inf")
    with codec.open(dst) as r:
        assert r.tensor("w").tolist() == [1.0, np.inf, -np.inf, 65504.0]
    assert out.lossy[0]["overflowed"] == 2 and out.lossy[0]["max_abs_error"] == 15.0  # (infinities not counted)
    # a type without infinities: inf cannot apply, saturate can
    with pytest.raises(codec.UsageError, match="float8_e4m3fn has no infinity"):
        codec.convert(src, dst, cast=["float32=float8_e4m3fn"], lossy=True, overflow="inf")
    codec.convert(src, dst, cast=["float32=float8_e4m3fn"], lossy=True, overflow="saturate")
    with codec.open(dst) as r:
        assert r.tensor("w").astype(np.float32).tolist() == [1.0, 448.0, -448.0, 448.0]
    with pytest.raises(codec.UsageError, match="goes with lossy=True"):
        codec.convert(src, dst, cast=["float32=float16"], overflow="saturate")


def test_integers_round_and_saturate():
    b, rep = lossy_cast("w", np.array([300, -300, 5], np.int32), "int8", "saturate")
    assert b.tolist() == [127, -128, 5] and rep["overflowed"] == 2 and rep["max_abs_error"] == 173
    with pytest.raises(codec.UsageError, match="element 0 is 300, beyond int8's range"):
        lossy_cast("w", np.array([300], np.int32), "int8")
    b, _ = lossy_cast("w", np.array([2 ** 64 - 1, 3], np.uint64), "int64", "saturate")
    assert b.tolist() == [2 ** 63 - 1, 3]
    with pytest.raises(codec.UsageError, match="NaN has no integer value"):
        lossy_cast("w", np.array([np.nan], np.float32), "int32", "saturate")
    b, rep = lossy_cast("w", np.array([2 ** 24 + 1], np.int64), "float32")
    assert b.tolist() == [2.0 ** 24] and rep["max_abs_error"] == 1.0


def test_cli_reports_each_tensor_error_human_and_json(tmp_path, capsys):
    a = np.array([0.1, 1 / 3, 2.0], np.float32)
    src = _src(tmp_path, {"w": a, "i": np.arange(3, dtype=np.int32)})
    dst = tmp_path / "o.safetensors"
    rc, out, err = _run(capsys, "convert", src, dst, "--cast", "float32=bfloat16", "--lossy")
    abs_err, rel_err = _errors(a, a.astype(ml_dtypes.bfloat16))
    assert rc == 0, err
    assert out.splitlines()[0] == (f"w: float32 -> bfloat16: max abs error {abs_err:.6g}, max rel error {rel_err:.6g} "
                                   "(2 values changed)")
    rc, out, err = _run(capsys, "convert", src, dst, "--cast", "float32=bfloat16", "--lossy", "--json")
    got = json.loads(out)
    from jsonschema import Draft202012Validator
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "json" / "cli.schema.json").read_text())
    Draft202012Validator({"$ref": "#/$defs/convert", "$defs": schema["$defs"]}).validate(got)
    Draft202012Validator(schema).validate(got)
    assert rc == 0 and got["written"] == str(dst) and [t["name"] for t in got["lossy"]] == ["w"]
    assert got["lossy"][0]["max_abs_error"] == pytest.approx(abs_err) and got["lossy"][0]["max_rel_error"] == \
        pytest.approx(rel_err)
    with pytest.raises(SystemExit):
        cli.main(["convert", src, str(dst), "--cast", "float32=float16", "--lossy", "--overflow", "nope"])


def test_lossy_streams_in_pieces(tmp_path):
    """A tensor larger than one cast block is converted block by block and each block's error
    counts (the largest error sits in the last block)."""
    a = np.zeros(BLOCK + 3, np.float32)
    a[-1] = 1 + 2.0 ** -12
    b, rep = lossy_cast("w", a, "float16")
    assert b[-1] == 1.0 and rep["max_abs_error"] == 2.0 ** -12 and rep["changed"] == 1


def test_an_integer_out_of_range_is_not_told_of_an_overflow_to_infinity():
    """int32 has no infinity: --overflow inf would be refused, so it is not suggested."""
    with pytest.raises(codec.UsageError, match=r"--overflow saturate \(overflow=\)") as e:
        lossy_cast("i", np.array([2 ** 40], np.int64), "int32")
    assert "inf" not in str(e.value).split("range:")[1]
    with pytest.raises(codec.UsageError, match=r"--overflow saturate\|inf"):
        lossy_cast("f", np.array([1e10], np.float32), "float16")
