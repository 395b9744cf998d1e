"""``modelcodec verify``: the seed's human-readable view (codec/tools/verify.py).

Golden files: tests/golden/verify/<vector>.txt, the output for the seed's two examples.
Regenerate with ``modelcodec verify FILE > tests/golden/verify/<name>.txt`` after a
deliberate layout change, and check them by eye against oinf.md "Verifier Output Examples".
"""
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import codec
from codec.tools.cli import main
from codec.formats.oinf import UninitializedTensor, write_oinf_file
from codec.formats.stb import StbReader
from codec.tools.verify import render, stats_lines

from .conftest import VECTORS, vectors_dir

VDIR = vectors_dir("oinf")
GOLDEN = Path(__file__).parent / "golden" / "verify"


def verify_text(path, **kw) -> str:
    with codec.open(path, **kw) as r:
        return render(r)


# ------------------------------------------------------------------ golden: the seed's two examples
@pytest.mark.parametrize("name", ["minimal_model", "simple_model"])
def test_seed_examples_match_golden(name):
    assert verify_text(VDIR / f"{name}.oinf") == (GOLDEN / f"{name}.txt").read_text()


def test_simple_model_layout_is_the_seeds():
    out = verify_text(VDIR / "simple_model.oinf").splitlines()
    # the seed's lines, verbatim (its example lists D before B; the file order is B, D)
    for line in ['B := 1024', 'D := 128', 'mode: str = "clamp_up"',
                 "W.0: f32[128] = { 0.48424, 1.61435, -0.782165, -0.0947963, 1.15624, ..., "
                 "-0.646709, 0.947614, 0.625521, -0.300354, 0.897275 }",
                 "- [nbytes: 512, min: -3.19735, max: 2.8745, mean: 0.093444, median: 0.16931, std: 1.02064]",
                 "- hist:", "    [-3.19735,-2.59016):1", "    [-2.59016,-1.98298):2",
                 "a: f16[1024] = { 0.125732, -0.13208, 0.640625, 0.104919, -0.535645, ..., "
                 "1.37988, -1.17969, 0.509766, -1.0752, -0.334229 }",
                 "- [nbytes: 2048, min: -3.90039, max: 3.06641, mean: -0.0491846, median: -0.0691223, std: 0.971848]",
                 "    [-3.90039,-3.20371):2",
                 "kernel: u8[128, 128] = {",
                 "{ 163, 255, 148, 186, 142, ..., 208, 23, 236, 196, 15 } ,",
                 "{ 200, 64, 246, 249, 250, ..., 171, 56, 243, 37, 201 } ,",
                 "- [nbytes: 16384, min: 0, max: 255, mean: 127.408, median: 128, std: 74.2236]",
                 "    [0,25.5):1710", "x: f32 = 10.35", "y: i16[] -- uninitialized"]:
        assert line in out, line
    assert out.index("B := 1024") < out.index("D := 128")
    assert out[out.index("kernel: u8[128, 128] = {") + 3:][:2] == ["...", "}"]
    hist = [ln for ln in out if ln.startswith("    [")]
    assert len(hist) == 3 * 10 and sum(ln.endswith("]:2") or ln.endswith("]:7") or ln.endswith("]:1689")
                                       for ln in hist) == 3  # the last bin of each is closed
    assert "\n\n\n" not in verify_text(VDIR / "simple_model.oinf")


# ------------------------------------------------------------------ against the reference printouts
_REF_HIST = re.compile(r"\(\[([^,\]]+), ([^\]]+)\], (\d+)\)")


def _split(text: str) -> tuple[list[str], list[tuple[str, str, int]]]:
    """(lines without the hist blocks, all (lo, hi, count) bins) of our output or the reference's."""
    lines, bins = [], []
    for ln in text.splitlines():
        if ln.startswith("- hist: {"):
            bins += [(a, b, int(c)) for a, b, c in _REF_HIST.findall(ln)]
        elif ln.startswith("    ["):
            a, b, c = re.fullmatch(r"    \[([^,]+),([^)\]]+)[)\]]:(\d+)", ln).groups()
            bins.append((a, b, int(c)))
        elif ln != "- hist:":
            lines.append(ln.rstrip())      # the reference writes "= { " before a row block
    while lines and not lines[-1]:
        lines.pop()
    return lines, bins


def test_simple_model_agrees_with_the_reference_printout():
    ours = _split(verify_text(VDIR / "simple_model.oinf"))
    ref = _split((VDIR / "simple_model.oinf.verify.txt").read_text())
    assert ours == ref


def test_metadata_ndarrays_agree_with_the_reference_printout():
    ours, _ = _split(verify_text(VDIR / "metadata_ndarrays.oinf"))
    ref, _ = _split((VDIR / "metadata_ndarrays.oinf.verify.txt").read_text())
    assert ours == ref


def test_shapes_agree_with_the_reference_printout():
    ours = verify_text(VDIR / "shapes.oinf")
    ref = (VDIR / "shapes.oinf.verify.txt").read_text()
    # the reference bins small integer ranges per value and prints zero-size tensors that
    # have data (HAS_DATA=1, 0 bytes) as "uninitialized"; we keep 10 bins and say "= {  }"
    ol, ob = _split(ours)
    rl, rb = _split(ref)
    drop = ("z0_f32", "z203_i32", "- [nbytes: 0")
    assert [ln for ln in ol if not ln.startswith(drop)] == [ln for ln in rl if not ln.startswith(drop)]
    assert "z0_f32: f32[0] = {  }" in ours and "z203_i32: i32[2, 0, 3] = {  }" in ours
    # tensors the reference also bins in 10: identical edges and counts
    assert ob[:10] == rb[:10]                       # m2_f32
    assert ob[20:30] == rb[16:26]                   # m3_i16


# ------------------------------------------------------------------ every valid vector of every format
def _valid_vectors():
    out = []
    for fmt in ("oinf", "aero", "mag", "stb"):
        d = VECTORS / fmt
        if not (d / "manifest.json").is_file():
            continue
        for v in json.loads((d / "manifest.json").read_text())["vectors"]:
            if v["expect"] != "valid":
                continue
            p = d / v["file"]
            if p.name.endswith(".aeroset.json"):
                out += [pytest.param(q, {}, id=str(q.relative_to(VECTORS))) for q in sorted(p.parent.glob("*.aero"))]
            else:
                kw = {"strict": False} if fmt == "stb" and v.get("strict_valid") is False else {}
                out.append(pytest.param(p, kw, id=f"{fmt}/{v['file']}"))
    return out


@pytest.mark.parametrize("path,kw", _valid_vectors())
def test_every_valid_vector_renders(path, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no overflow / invalid-value warnings either
        text = verify_text(path, **kw)
    with codec.open(path, **kw) as r:
        n = len(r.tensors)
        fmt = r.format
    assert text == "" or text.endswith("\n") and not text.endswith("\n\n")
    if fmt != "oinf":
        assert ":=" not in text
    # one block per tensor, each starting with its name
    assert text.count("\n\n") + (1 if text else 0) >= n


def test_other_formats_use_the_same_view():
    mag = verify_text(VECTORS / "mag" / "valid_all_dtypes.mag")
    assert "lr: f64 = 0.0003" in mag and "n_layers: i64 = 12" in mag
    assert "w_f32: f32[3, 4] = {" in mag and "mask_bool: bool[7] = { " in mag and "- hist:" in mag
    aero = verify_text(VECTORS / "aero" / "all_dtypes.aero")
    assert 'model_name: str = "all-dtypes"' in aero and "t_bf16: bf16[3, 5] = {" in aero
    packed = verify_text(VECTORS / "aero" / "packed_q4_0.aero")
    assert "blk.0.ffn.weight: Q4_0[64, 2] -- packed: " in packed  # (its codec; rows of 2 are no Q4_0 blocks)
    assert 'quant_descriptors: list = [{"codec": "ggml"' in packed
    index = verify_text(VECTORS / "aero" / "aeroset_ref" / "index.aero")
    assert "-- data not in this file" in index
    stb = verify_text(VECTORS / "stb" / "v12_seed_rank4_rank5_shape_table.stb")
    assert stb.startswith("0: -- shape unknown: rank 4 tensor 0 needs shape table entry 0")


def test_stb_column_major_previews_in_logical_order():
    with StbReader(VECTORS / "stb" / "v06_ref_layouts.stb") as r:
        blocks = render(r).split("\n\n")
    assert blocks[0].split(":", 1)[1] == blocks[1].split(":", 1)[1]  # same logical matrix
    assert "{ 0, 1, 2, 3 } ," in blocks[1] and "{ 4, 5, 6, 7 } ," in blocks[1]


def test_mag_rank_255_previews_rows():
    """numpy holds 64 axes: the reader squeezes the array; rows still follow the file's shape."""
    text = verify_text(VECTORS / "mag" / "seedvalid_rank255.mag")
    assert text.startswith("rank255: f32[" + "1, " * 253 + "2, 3] = {\n{ 0, 1, 2, 3, 4, 5 } ,\n}\n")


# ------------------------------------------------------------------ NaN / Inf
def test_float_specials_report_non_finite_counts():
    text = verify_text(VDIR / "float_specials.oinf")
    for name in ("f16_sp", "f32_sp", "f64_sp"):
        block = next(b for b in text.split("\n\n") if b.startswith(name + ":"))
        assert "= { nan, inf, -inf, -0, 1 }" in block
        assert "- non-finite: 3 (nan 1, +inf 1, -inf 1)" in block
        assert "min: -0, max: 1, mean: 0.5, median: 0.5, std: 0.5]" in block   # over the finite values
        assert block.count("\n    [") == 10


def test_all_non_finite_has_no_stats():
    lines = stats_lines(np.array([np.nan, np.inf, np.nan], np.float32), 12)
    assert lines == ["- [nbytes: 12, no finite values]", "- non-finite: 3 (nan 2, +inf 1, -inf 0)"]


def test_stats_match_numpy():
    rng = np.random.default_rng(5)
    a = rng.normal(3, 2, 10_001).astype(np.float32)
    a[[3, 70, 900]] = [np.nan, np.inf, -np.inf]
    lines = stats_lines(a, a.nbytes)
    f = a[np.isfinite(a)].astype(np.float64)
    want = (f"min: {float(f.min()):.6g}, max: {float(f.max()):.6g}, mean: {f.mean():.6g}, "
            f"median: {np.median(f):.6g}, std: {f.std():.6g}]")
    assert lines[0].endswith(want)
    counts, edges = np.histogram(a[np.isfinite(a)], bins=10)
    assert [int(ln.rsplit(":", 1)[1]) for ln in lines[3:]] == counts.tolist()
    ints = np.arange(-7, 13, dtype=np.int64)
    assert stats_lines(ints, ints.nbytes)[0] == (
        f"- [nbytes: 160, min: -7, max: 12, mean: {ints.mean():.6g}, median: {np.median(ints):.6g}, "
        f"std: {ints.std():.6g}]")


# ------------------------------------------------------------------ empty, uninitialized, scalars
def test_empty_uninitialized_and_scalar_tensors(tmp_path):
    p = tmp_path / "t.oinf"
    write_oinf_file(p, sizevars={"N": 0}, metadata={"flags": codec.formats.oinf.Bitset((1, 0, 1)), "lr": 0.125},
                    tensors={"e1": np.zeros(0, np.float32), "e3": np.zeros((2, 0, 3), np.int32),
                             "u": UninitializedTensor("i16", ()), "u2": UninitializedTensor("f32", (4, 0)),
                             "s": np.array(True), "v": np.array([1.5, 2.5], np.float64)}, sort=False)
    assert verify_text(p) == (
        "N := 0\n\n"
        "flags: bitset[3] = { 1, 0, 1 }\n"
        "lr: f32 = 0.125\n\n"
        "e1: f32[0] = {  }\n- [nbytes: 0, no elements]\n\n"
        "e3: i32[2, 0, 3] = {  }\n- [nbytes: 0, no elements]\n\n"
        "u: i16[] -- uninitialized\n\n"
        "u2: f32[4, 0] -- uninitialized\n\n"
        "s: bool = true\n\n"
        "v: f64[2] = { 1.5, 2.5 }\n"
        "- [nbytes: 16, min: 1.5, max: 2.5, mean: 2, median: 2, std: 0.5]\n"
        "- hist:\n"
        + "".join(f"    [{lo:.6g},{hi:.6g}):{c}\n" for lo, hi, c in
                  [(1.5, 1.6, 1)] + [(1.5 + i / 10, 1.6 + i / 10, 0) for i in range(1, 9)])
        + "    [2.4,2.5]:1\n")


def test_empty_file_renders_nothing():
    assert verify_text(VDIR / "empty.oinf") == ""


def test_aero_scalar_and_empty():
    text = verify_text(VECTORS / "aero" / "scalar_and_empty.aero")
    assert "empty_f32: f32[0, 4] = {  }\n- [nbytes: 0, no elements]" in text
    assert "scalar_bool: bool = " in text and "scalar_f32: f32 = " in text


# ------------------------------------------------------------------ the command line
def test_cli_verify_good_file(capsys):
    rc = main(["verify", str(VDIR / "simple_model.oinf")])
    out, err = capsys.readouterr()
    assert rc == 0 and not err
    assert out == (GOLDEN / "simple_model.txt").read_text()


@pytest.mark.parametrize("bad", ["inv_bad_magic.oinf", "inv_nbytes_mismatch.oinf", "inv_bad_version.oinf"])
def test_cli_verify_broken_file_is_one_line(capsys, bad):
    rc = main(["verify", str(VDIR / bad)])
    out, err = capsys.readouterr()
    assert rc == 1 and not out
    assert err.startswith("modelcodec: ") and err.count("\n") == 1 and bad in err


def test_cli_verify_missing_file(capsys, tmp_path):
    rc = main(["verify", str(tmp_path / "nope.oinf")])
    out, err = capsys.readouterr()
    assert rc == 1 and err.startswith("modelcodec: ") and err.count("\n") == 1
