"""Dequantization of ggml's packed tensor types (issue 32 §2, §5): gguf-py's own
``gguf.quants.dequantize`` is the oracle, and every value must be bit-identical float32 --
on random blocks of every type (every byte random: NaN and infinite scales included, compared
bit for bit), on blocks gguf-py quantized itself (NVFP4, which it cannot quantize: on every
scale byte and every value, and on floats quantized here), on generated GGUF files converted with
``--cast packed=float32`` (the real SmolLM2 Q4_1 file: tests/test_real_files.py), and on an
AERO file's packed tensors (the dequantizer is found through the registry, not by format).
The types gguf-py cannot dequantize (Q8_1, Q8_K, Q1_0) are checked against per-element
references written here from ggml's block definitions, on hand-built blocks and random ones."""
from __future__ import annotations

import json
import os
import struct

import gguf
import ml_dtypes
import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType as T
from hypothesis import given, strategies as st
from safetensors.numpy import load_file

import codec
from codec.engine.records import record_of
from codec.formats import ggml_quants as Q
from codec.schemas import gguf as S
from codec.tools import cli
from codec.tools.verify import fmt_float, render

TYPES = sorted(Q.KERNELS)
#: what the issue asks at least, beside the IQ4/TQ/MXFP4 types done too
REQUIRED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
IDS = [S.GGML_TYPES[c][0] for c in TYPES]
#: the types gguf-py cannot dequantize (it raises NotImplementedError): checked against
#: :func:`_reference`, written from ggml's block definitions
OWN_REFERENCE = ("Q8_1", "Q8_K", "Q1_0")


def _raw(code: int, n: int, rng, sane: bool) -> np.ndarray:
    """``n`` blocks of ggml type ``code`` as bytes: all random, or (``sane``) with every half
    (a scale or minimum) and exponent a finite value of a realistic size."""
    per = S.GGML_TYPES[code][2]
    raw = rng.integers(0, 256, n * per, dtype=np.uint8)
    if sane:
        b = raw.view(record_of(S.BLOCKS[code]).dtype)
        for f in b.dtype.names:
            if b.dtype[f] in (np.float16, np.float32):  # (Q8_1's and Q8_K's scales are float32)
                b[f] = rng.normal(0, 0.05, n).astype(b.dtype[f])
        if "e" in b.dtype.names:  # (MXFP4's exponent: scales 2^-10 .. 2^1)
            b["e"] = rng.integers(118, 130, n)
    return raw


def _shape(code: int, rows: int) -> tuple:
    block = S.GGML_TYPES[code][1]
    return (rows, 2 * block)


def _oracle(raw: np.ndarray, code: int, shape: tuple) -> np.ndarray:
    if S.GGML_TYPES[code][0] in OWN_REFERENCE:
        return _reference(code, raw).reshape(shape)
    return gguf.quants.dequantize(raw.reshape(shape[0], -1), T(code))


def _reference(code: int, raw) -> np.ndarray:
    """Blocks of Q8_1, Q8_K or Q1_0 decoded one element at a time, as ggml's block definitions
    say (ggml-common.h; a float32 product, as its C computes it)."""
    name, _, per, _ = S.GGML_TYPES[code]
    raw, out = bytes(raw), []
    for at in range(0, len(raw), per):
        b = raw[at:at + per]
        if name == "Q1_0":  # half d, then bit j % 8 of byte j // 8: +d when set, -d when clear
            d = np.frombuffer(b, "<f2", 1)[0].astype(np.float32)
            out += [d if b[2 + j // 8] >> (j % 8) & 1 else -d for j in range(128)]
        else:  # Q8_1: float d, float s, 32 int8; Q8_K: float d, 256 int8, 16 int16 sums
            d = np.frombuffer(b, "<f4", 1)[0]
            qs = struct.unpack_from("<32b", b, 8) if name == "Q8_1" else struct.unpack_from("<256b", b, 4)
            out += [d * np.float32(q) for q in qs]
    return np.array(out, np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.shape == b.shape and a.dtype == b.dtype == np.float32
            and bool((a.view(np.uint32) == b.view(np.uint32)).all()))


def test_the_required_types_are_dequantized():
    assert set(REQUIRED) | {"Q8_1", "Q8_K", "NVFP4", "Q1_0"} <= set(Q.names())
    for code in TYPES:  # (every block declaration's size is GGML_TYPES', asserted at import)
        assert record_of(S.BLOCKS[code]).size == S.GGML_TYPES[code][2]


@pytest.mark.parametrize("sane", [True, False], ids=["finite-scales", "random-bytes"])
@pytest.mark.parametrize("code", TYPES, ids=IDS)
def test_every_type_is_bit_identical_to_gguf_py(code, sane):
    rng = np.random.default_rng(code * 2 + sane)
    shape = _shape(code, 37)
    raw = _raw(code, 37 * 2, rng, sane)
    b = raw.view(record_of(S.BLOCKS[code]).dtype)
    halves = [f for f in b.dtype.names if b.dtype[f] == np.float16]
    if not sane and halves:  # (a NaN with a payload and an infinity among the scales, for sure)
        b[halves[0]][:2] = np.array([0x7E01, 0xFC00], np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        want = _oracle(raw, code, shape)
    got = Q.dequantize(code, raw, shape)
    assert _same_bits(got, want)
    if not sane and halves:
        assert np.isnan(got).any() and np.isinf(got).any()


@pytest.mark.parametrize("code", [c for c in TYPES if S.GGML_TYPES[c][0] in
                                  ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4")], ids=str)
def test_what_gguf_py_quantized_comes_back_as_it_dequantizes_it(code):
    x = np.random.default_rng(code).normal(0, 1, (8, 512)).astype(np.float32)
    packed = gguf.quants.quantize(x, T(code))
    got = Q.dequantize(code, packed, x.shape)
    assert _same_bits(got, gguf.quants.dequantize(packed, T(code)))
    assert np.abs(got - x).max() < 2  # (a quantization of x, not noise)


@pytest.mark.parametrize("code", [2, 11, 14], ids=["Q4_0", "Q3_K", "Q6_K"])
def test_chunks_of_any_size_give_the_same_values(monkeypatch, code):
    rng = np.random.default_rng(5)
    shape = _shape(code, 11)
    raw = _raw(code, 22, rng, True)
    whole = Q.dequantize(code, raw, shape)
    monkeypatch.setattr(Q, "CHUNK_ELEMENTS", 3 * S.GGML_TYPES[code][1])  # (22 blocks: 7 chunks, the last short)
    assert _same_bits(Q.dequantize(code, raw, shape), whole)


def test_float16_and_bfloat16_are_the_float32_values_rounded():
    code = 12  # Q4_K
    raw = _raw(code, 6, np.random.default_rng(1), True)
    f32 = Q.dequantize(code, raw, (3, 512))
    for dt in ("float16", "bfloat16"):
        got = Q.dequantize(code, raw, (3, 512), dt)
        want = f32.astype(ml_dtypes.bfloat16 if dt == "bfloat16" else np.float16)
        assert got.dtype == want.dtype and (got.view(np.uint16) == want.view(np.uint16)).all()
    assert Q.dequantize(code, raw, (3, 512), "float64").tolist() == f32.astype(np.float64).tolist()


def test_a_value_beyond_float16_is_an_error_not_an_infinity():
    b = np.zeros(1, record_of(S.BLOCKS[8]).dtype)  # one Q8_0 block: d = 60000, element 5 = 100
    b["d"] = 60000
    b["qs"][0, 5] = 100
    raw = b.view(np.uint8)
    with pytest.raises(codec.UsageError, match=r"tensor 'w': element 5 dequantizes to 6000000.0, beyond float16"):
        Q.dequantize(8, raw, (32,), "float16", "tensor 'w'")
    assert Q.dequantize(8, raw, (32,), "bfloat16")[5] == ml_dtypes.bfloat16(6e6)


def test_bad_shapes_and_outputs_are_usage_errors():
    raw = np.zeros(36, np.uint8)
    with pytest.raises(codec.UsageError, match=r"Q8_0\[2, 32\] takes 68 bytes; the data has 36"):
        Q.dequantize(8, raw, (2, 32))
    with pytest.raises(codec.UsageError, match=r"last extent .* multiple of the block, 32"):
        Q.dequantize(8, raw, (32, 2))
    with pytest.raises(codec.UsageError, match="dequantize to 'int8'"):
        Q.dequantize(8, raw, (32,), "int8")
    with pytest.raises(codec.UsageError, match="IQ2_XXS cannot be dequantized"):
        Q.dequantize(16, np.zeros(66, np.uint8), (256,))


# ------------------------------------------------------------------ NVFP4, Q1_0, Q8_1, Q8_K
def nvfp4_blocks(x: np.ndarray) -> np.ndarray:
    """``x`` (rows, a multiple of 64) as NVFP4 blocks, (rows, bytes), quantized as ggml does in
    outline (gguf-py 0.19 cannot quantize NVFP4): each sub-block of 16 gets gguf-py's UE4M3 of
    its largest magnitude / 6 as its scale, each element the nearest of the 16 values."""
    sub = x.reshape(-1, 16)
    ue = gguf.quants.NVFP4.fp32_to_ue4m3(np.abs(sub).max(axis=1) / np.float32(6))
    d = gguf.quants.NVFP4.ue4m3_to_fp32(ue).astype(np.float32)
    values = np.array(S.MXFP4_VALUES, np.float32)
    q = np.abs(values * d[:, None, None] - sub[:, :, None]).argmin(axis=2).astype(np.uint8)
    qs = q[:, :8] | (q[:, 8:] << 4)  # (element j of a sub-block: the low nibble of byte j, j+8 the high one)
    return np.concatenate([ue.reshape(-1, 4), qs.reshape(-1, 32)], axis=1).reshape(x.shape[0], -1)


def test_nvfp4_from_floats_dequantizes_as_gguf_py_does():
    x = np.random.default_rng(40).normal(0, 1, (8, 512)).astype(np.float32)
    x[0, :16] = 0  # (a sub-block of zeros: scale byte 0)
    x[1, :16] *= 1e-2  # (a subnormal UE4M3 scale)
    packed = nvfp4_blocks(x)
    assert packed[0, 0] == 0 and 1 <= packed[1, 0] <= 7
    got = Q.dequantize(40, packed, x.shape)
    assert _same_bits(got, gguf.quants.dequantize(packed, T.NVFP4))
    assert np.abs(got - x).max() < 1  # (a quantization of x, not noise)


def test_every_nvfp4_scale_byte_and_value_dequantizes_as_gguf_py_and_ggml_do():
    """256 sub-blocks, one per scale byte, each holding the 16 values in order: 0x00 and 0x7F
    (E4M3's NaN) are 0, bit 7 is ignored (0xFF is 240), subnormal scales m * 2^-9."""
    raw = np.zeros((64, 36), np.uint8)
    raw[:, :4] = np.arange(256).reshape(64, 4)
    raw[:, 4:] = np.tile(np.arange(8, dtype=np.uint8) | (np.arange(8, 16, dtype=np.uint8) << 4), 4)
    got = Q.dequantize(40, raw, (64, 64)).reshape(256, 16)
    assert _same_bits(got.reshape(64, 64), gguf.quants.dequantize(raw, T.NVFP4))
    e2m1 = np.array(S.MXFP4_VALUES, np.float32) / 2  # (FP4 E2M1's own values: 0, 0.5, 1, 1.5, 2, 3, 4, 6, ...)
    want = {0x00: 0.0, 0x7F: 0.0, 0x80: 0.0, 0x38: 1.0, 0xB8: 1.0, 0x01: 2.0**-9, 0x07: 7 * 2.0**-9,
            0x08: 2.0**-6, 0x7E: 448.0, 0xFF: 480.0, 0x3C: 1.5}
    for byte, scale in want.items():
        assert got[byte].tolist() == (e2m1 * np.float32(scale)).tolist(), hex(byte)
    assert got[0x7F, 9] == 0 and np.signbit(got[0x7F, 9])  # (-1 x 0: a negative zero, as ggml's float product)


def test_q8_1_q8_k_and_q1_0_blocks_built_by_hand():
    """Blocks from ggml's definitions: Q8_1 = float d, float s, 32 int8 (the 40-byte block
    GGML_TYPES and gguf-py give); Q8_K = float d, 256 int8, 16 int16; Q1_0 = half d, 128 bits."""
    for name in OWN_REFERENCE:  # (gguf-py cannot dequantize them: the reason for _reference)
        with pytest.raises(NotImplementedError):
            gguf.quants.dequantize(np.zeros(S.GGML_TYPES[T[name].value][2], np.uint8), T[name])
    q = np.array([-128, -127, -1, 0, 1, 2, 100, 127] * 4, np.int8)
    top = np.finfo(np.float32).max
    tiny = np.float32(2.0**-149)  # (the smallest subnormal float32)
    b1 = b"".join(struct.pack("<ff", d, 99.0) + q.tobytes() for d in (0.5, -0.25, top, tiny))
    got = Q.dequantize(9, np.frombuffer(b1, np.uint8), (4, 32))
    assert got[0, :8].tolist() == [-64, -63.5, -0.5, 0, 0.5, 1, 50, 63.5]
    assert got[1, :8].tolist() == [32, 31.75, 0.25, -0.0, -0.25, -0.5, -25, -31.75] and np.signbit(got[1, 3])
    assert got[2, :8].tolist() == [-np.inf, -np.inf, -top, 0, top, np.inf, np.inf, np.inf]
    assert got[3, :8].tolist() == [float(tiny * np.float32(v)) for v in q[:8]]
    assert got[3, 2] == -tiny and got[3, 7] == 127 * 2.0**-149
    qk = np.arange(-128, 128, dtype=np.int8)
    bk = b"".join(struct.pack("<f", d) + qk.tobytes() + np.full(16, 7, np.int16).tobytes() for d in (2.0, np.nan, -0.0))
    gk = Q.dequantize(15, np.frombuffer(bk, np.uint8), (3, 256))
    assert gk[0].tolist() == (2.0 * np.arange(-128, 128)).tolist()
    assert np.isnan(gk[1]).all()
    assert (gk[2] == 0).all() and np.signbit(gk[2][:128]).sum() == 0 and np.signbit(gk[2][129:]).all()
    bq = struct.pack("<e", 0.25) + bytes([0b10100101, 0, 255] + [0] * 13) + struct.pack("<e", -65504.0) + bytes(16)
    gq = Q.dequantize(41, np.frombuffer(bq, np.uint8), (2, 128))
    assert gq[0, :8].tolist() == [0.25, -0.25, 0.25, -0.25, -0.25, 0.25, -0.25, 0.25]
    assert (gq[0, 8:16] == -0.25).all() and (gq[0, 16:24] == 0.25).all() and (gq[0, 24:] == -0.25).all()
    assert (gq[1] == 65504.0).all()  # (every bit clear: -d)


@given(code=st.sampled_from([9, 15, 41]), blocks=st.lists(st.binary(min_size=292, max_size=292), min_size=1,
                                                          max_size=4))
def test_q8_1_q8_k_and_q1_0_random_blocks_match_the_per_element_reference(code, blocks):
    name, block, per, _ = S.GGML_TYPES[code]
    raw = np.frombuffer(b"".join(b[:per] for b in blocks), np.uint8)
    with np.errstate(all="ignore"):
        want = _reference(code, raw)
    assert _same_bits(Q.dequantize(code, raw, (len(blocks) * block,)), want), name


# ------------------------------------------------------------------ conversion
def _model(rng) -> dict:
    """One packed tensor of every dequantized type (random blocks, finite scales) and the
    plain float types, as a GGUF writer takes them."""
    t = {}
    for code in TYPES:
        shape = (3, S.GGML_TYPES[code][1] * 2)
        t[f"q.{S.GGML_TYPES[code][0]}"] = codec.Packed(_raw(code, 6, rng, True), shape, {"ggml_type": code})
    t["f32"] = rng.normal(size=(2, 5)).astype(np.float32)
    t["f16"] = rng.normal(size=7).astype(np.float16)
    t["bf16"] = rng.normal(size=(4, 3)).astype(ml_dtypes.bfloat16)
    return t


@pytest.fixture
def quantized_gguf(tmp_path):
    p = str(tmp_path / "q.gguf")
    codec.write(p, _model(np.random.default_rng(7)), metadata={"general.architecture": "llama"})
    return p


def _oracle_file(path) -> dict:
    """Every tensor of a GGUF file as gguf-py reads and dequantizes it (the types it cannot
    dequantize: as :func:`_reference` does)."""
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        a, code = np.asarray(t.data), t.tensor_type.value
        out[t.name] = (_oracle(a, code, a.shape[:-1] + (-1,)) if code in Q.KERNELS else
                       (a.tobytes(), gguf.quants.dequantize(a, t.tensor_type)))  # (plain: its bytes, its values)
    return out


PLAIN = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


@pytest.mark.parametrize("target", ["safetensors", "gguf", "oinf", "aero"])
def test_a_quantized_gguf_converts_with_packed_float32_as_gguf_py_dequantizes_it(tmp_path, quantized_gguf, target):
    want = _oracle_file(quantized_gguf)
    dst = str(tmp_path / f"out.{target}")
    more = ["bfloat16=float32"] if target == "oinf" else []  # (OINF has no bfloat16)
    codec.convert(quantized_gguf, dst, cast=["packed=float32", *more], drop_metadata=True)
    if target == "safetensors":
        got = load_file(dst)
    else:
        with codec.open(dst) as r:
            got = {k: np.array(r.tensor(k)) for k in r.tensors}
    assert sorted(got) == sorted(want)
    for name, a in want.items():
        g = got[name]
        if name.startswith("q."):
            assert _same_bits(g, a), name
        elif more and name == "bf16":
            assert _same_bits(g, a[1]), name
        else:  # (the plain tensors are not touched)
            assert g.dtype.name == PLAIN[name] and g.shape == a[1].shape and g.tobytes() == a[0], name


def test_the_cli_cast_and_the_hint_that_names_it(tmp_path, quantized_gguf, capsys):
    dst = str(tmp_path / "out.safetensors")
    assert cli.main(["convert", quantized_gguf, dst, "--drop-metadata"]) == 1
    err = capsys.readouterr().err
    assert "tensor 'q.Q4_0': SAFETENSORS cannot hold it" in err
    assert "--cast packed=float32 dequantizes its Q4_0 blocks" in err
    assert not os.path.exists(dst)
    assert cli.main(["convert", quantized_gguf, dst, "--drop-metadata", "--cast", "packed=float16"]) == 0
    want = _oracle_file(quantized_gguf)
    got = load_file(dst)
    assert got["q.Q6_K"].dtype == np.float16
    assert (got["q.Q6_K"].view(np.uint16) == want["q.Q6_K"].astype(np.float16).view(np.uint16)).all()
    assert got["f16"].tobytes() == want["f16"][0]


def test_packed_tensors_of_any_format_dequantize_through_their_codec(tmp_path):
    """AERO holds packed tensors with their ggml type: the same cast dequantizes them, and
    codec.dequantize does it for a Packed in memory."""
    rng = np.random.default_rng(3)
    raw = _raw(13, 4, rng, True)  # Q5_K
    aero = codec.write(str(tmp_path / "m.aero"), {"w": codec.Packed(raw, (2, 512), {"ggml_type": 13})})
    want = gguf.quants.dequantize(raw.reshape(2, -1), T.Q5_K)
    dst = codec.convert(aero, str(tmp_path / "m.safetensors"), cast={"packed": "float32"})
    assert _same_bits(load_file(dst)["w"], want)
    assert _same_bits(codec.dequantize(codec.load(aero)["w"]), want)


@pytest.mark.parametrize("params", [{"ggml_type": 16}, {"codec": "mine"}], ids=["IQ2_XXS", "unknown"])
def test_packed_bytes_no_format_can_dequantize_are_refused(tmp_path, params):
    aero = codec.write(str(tmp_path / "m.aero"), {"w": codec.Packed(np.zeros(66, np.uint8), (256,), params)})
    dst = tmp_path / "m.safetensors"
    with pytest.raises(codec.UsageError, match=r"tensor 'w': its packed bytes \((IQ2_XXS|codec .*)\) cannot be "
                                               r"dequantized; nothing was written"):
        codec.convert(aero, str(dst), cast=["packed=float32"])
    assert not dst.exists()


def test_packed_casts_only_to_floats():
    with pytest.raises(codec.UsageError, match=r"cast packed=int8: .* \(or packed=float32\|float16\|bfloat16\|float64: "
                                               r"dequantizes packed tensors\)"):
        codec.convert("x.gguf", "y.safetensors", cast=["packed=int8"])


def test_a_dequantizing_conversion_holds_one_tensor_at_a_time(tmp_path, quantized_gguf, monkeypatch):
    """To a writer that takes lazy tensors, each tensor is dequantized when its turn comes,
    the output file already being written -- never all of them before it opens."""
    import importlib
    C = importlib.import_module("codec.convert")
    out = tmp_path / "out"
    out.mkdir()
    seen = []
    real = C.dequantize

    def spy(t, dtype="float32", *, what="packed tensor"):
        seen.append(sorted(os.listdir(out)))
        return real(t, dtype, what=what)
    monkeypatch.setattr(C, "dequantize", spy)
    codec.convert(quantized_gguf, str(out / "m.safetensors"), cast=["packed=float32"], drop_metadata=True)
    assert len(seen) == len(TYPES) and all(seen), seen  # (the writer's temporary file exists each time)
    assert os.listdir(out) == ["m.safetensors"]


# ------------------------------------------------------------------ inspect, verify, fetch-tensor
@pytest.fixture
def q8(tmp_path):
    x = np.random.default_rng(0).normal(size=(4, 64)).astype(np.float32)
    raw = gguf.quants.quantize(x, T.Q8_0)
    p = codec.write(str(tmp_path / "m.gguf"), {"w": codec.Packed(raw.reshape(-1), (4, 64), {"ggml_type": 8})})
    return p, gguf.quants.dequantize(raw, T.Q8_0)


@pytest.mark.parametrize("fmt", ["gguf", "aero"])
def test_verify_shows_the_type_and_the_dequantized_values(tmp_path, q8, fmt):
    path, values = q8
    if fmt == "aero":
        path = codec.convert(path, str(tmp_path / "m.aero"))
    with codec.open(path) as r:
        text = render(r)
    assert text.startswith(f"w: Q8_0[4, 64] = {{\n{{ {fmt_float(values[0, 0])}, ")
    assert f"min: {fmt_float(values.min())}, max: {fmt_float(values.max())}" in text
    assert "u8" not in text and "nbytes: 272" in text


@pytest.mark.parametrize("fmt", ["gguf", "aero"])
def test_fetch_tensor_names_the_type_and_the_logical_shape(tmp_path, q8, capsys, fmt):
    path = q8[0] if fmt == "gguf" else codec.convert(q8[0], str(tmp_path / "m.aero"))
    out = tmp_path / "w.bin"
    assert cli.main(["fetch-tensor", path, "w", str(out)]) == 0
    assert "w Q8_0[4, 64], 272 bytes" in capsys.readouterr().out
    assert out.stat().st_size == 272


def test_inspect_json_of_aero_gives_a_packed_tensors_type_and_parameters(tmp_path, q8, capsys):
    aero = codec.convert(q8[0], str(tmp_path / "m.aero"))
    assert cli.main(["inspect", "--json", aero]) == 0
    (t,) = json.loads(capsys.readouterr().out)["tensors"]
    assert (t["dtype"], t["quant_type"], t["quant_params"], t["shape"]) == ("packed", "Q8_0", {"ggml_type": 8}, [4, 64])


def test_verify_of_packed_bytes_no_format_can_dequantize_names_their_type(tmp_path):
    p = codec.write(str(tmp_path / "m.gguf"), {"w": codec.Packed(np.zeros(66, np.uint8), (256,), {"ggml_type": 16})})
    with codec.open(p) as r:
        assert render(r) == "w: IQ2_XXS[256] -- packed: 66 bytes of quantized blocks, quant_params {'ggml_type': 16}\n"


def test_codec_dequantize_takes_numpys_dtypes_as_their_names():
    """np.float16 / np.dtype("float64") / ml_dtypes.bfloat16 are the outputs of those names (they
    were refused as "dequantize to \\"<class 'numpy.float16'>\\""); others still are refused."""
    code = 8  # Q8_0
    raw = _raw(code, 2, np.random.default_rng(2), True)
    p = codec.Packed(raw, (64,), {"ggml_type": code})
    for given, name in ((np.float16, "float16"), (np.dtype("float64"), "float64"), (ml_dtypes.bfloat16, "bfloat16")):
        got, want = codec.dequantize(p, given), codec.dequantize(p, name)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    for bad in (np.int8, None, 3):
        with pytest.raises(codec.UsageError, match="one of float32, float16, bfloat16, float64"):
            codec.dequantize(p, bad)
