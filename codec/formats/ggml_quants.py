"""Dequantization of ggml's packed tensor types (GGUF's quantized tensors, and any format's
packed tensor whose codec parameters name a ggml type: ``{"ggml_type": 2}``).

The blocks are declared in :mod:`schemas.gguf` (``BLOCKS``: each type's fields, its size
asserted against ``GGML_TYPES``); the engine derives a numpy structured dtype from each, so
the packed bytes are read as a zero-copy array of blocks.  Each kernel here turns ``n`` blocks
into an ``(n, elements)`` float32 array with numpy, in the order of operations ggml's own
``dequantize_row_*`` functions use (a float32 product, then a float32 sum), so the values are
bit-identical to ggml's.  A tensor is decoded a bounded number of blocks at a time
(``CHUNK_ELEMENTS``) straight into its output array: the only memory a tensor takes beyond its
packed bytes is the output and one chunk's temporaries.  Float16 and bfloat16 outputs are the
float32 values rounded to nearest even, chunk by chunk; a value beyond the type's range is a
:class:`codec.errors.UsageError` (never a silent infinity).
"""
from __future__ import annotations

import math

import numpy as np

from ..schemas import gguf as S

from .. import errors as E
from ..engine.dtypes import numpy_dtype
from ..engine.records import record_of
from ..registry import PackedCodec

#: elements decoded at a time (bounded temporaries: a few arrays of this many float32)
CHUNK_ELEMENTS = 1 << 18
#: the element types a packed tensor can be dequantized to
OUTPUTS = ("float32", "float16", "bfloat16", "float64")

_F32 = np.float32
_IQ4 = np.array(S.IQ4_VALUES, _F32)
_MXFP4 = np.array(S.MXFP4_VALUES, _F32)


def _ue4m3_halves() -> np.ndarray:
    """NVFP4's 256 scale bytes as float32, halved (schemas.gguf describes the encoding): every
    value is exact in float32, as ggml's ggml_ue4m3_to_fp32 computes it."""
    b = np.arange(256)
    e, m = (b >> 3) & 0xF, (b & 7).astype(np.float64)
    v = np.where(e == 0, np.ldexp(m, -9), np.ldexp(1 + m / 8, e - 7)) * 0.5
    v[list(S.NVFP4_ZERO_SCALES)] = 0
    return v.astype(_F32)


_UE4M3 = _ue4m3_halves()


def _half(x: np.ndarray) -> np.ndarray:
    """A column of IEEE halves as float32, one per block, ready to broadcast: (n, 1)."""
    return x.astype(_F32)[:, None]


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """(n, k) bytes -> (n, 2k): element j from the low nibble of byte j, j+k from its high one."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1)


def _crumbs(qs: np.ndarray, halves: int) -> np.ndarray:
    """The 2-bit fields of the K layout: (n, 32*halves) bytes -> (n, 128*halves), element
    128h + 32s + l from bits 2s..2s+1 of byte 32h + l."""
    n = qs.shape[0]
    return ((qs.reshape(n, halves, 1, 32) >> _SHIFT2) & 3).reshape(n, -1)


_SHIFT2 = np.array([0, 2, 4, 6], np.uint8)[:, None]
_BITS32 = np.arange(32, dtype=np.uint32)


def _fifth_bit(qh: np.ndarray) -> np.ndarray:
    """Q5_0/Q5_1: bit j of the u32 ``qh`` is the fifth bit of element j -> (n, 32) of 0 or 16."""
    return (((qh[:, None] >> _BITS32) & 1) << 4).astype(np.uint8)


def _q4_0(b):
    return (_nibbles(b["qs"]).astype(_F32) - 8) * _half(b["d"])


def _q4_1(b):
    return _nibbles(b["qs"]).astype(_F32) * _half(b["d"]) + _half(b["m"])


def _q5_0(b):
    return ((_nibbles(b["qs"]) | _fifth_bit(b["qh"])).astype(_F32) - 16) * _half(b["d"])


def _q5_1(b):
    return (_nibbles(b["qs"]) | _fifth_bit(b["qh"])).astype(_F32) * _half(b["d"]) + _half(b["m"])


def _q8_0(b):
    return b["qs"].astype(_F32) * _half(b["d"])  # (Q8_1 and Q8_K too: Q8_K's d is a float32)


def _by_sub(q: np.ndarray, scale: np.ndarray, minimum: np.ndarray | None = None) -> np.ndarray:
    """``scale * q - minimum`` over sub-blocks: q (n, elements) float32, scale and minimum
    (n, sub-blocks) float32."""
    n, subs = scale.shape
    y = q.reshape(n, subs, -1) * scale[:, :, None]
    if minimum is not None:
        y -= minimum[:, :, None]
    return y.reshape(n, -1)


def _q2_k(b):
    sc = b["scales"]
    return _by_sub(_crumbs(b["qs"], 2).astype(_F32), _half(b["d"]) * (sc & 0xF).astype(_F32),
                   _half(b["dmin"]) * (sc >> 4).astype(_F32))


def _scales_6bit_16(s: np.ndarray) -> np.ndarray:
    """Q3_K's 16 scales of 6 bits from its 12 bytes (as schemas.gguf describes them)."""
    low = np.concatenate([s[:, 0:8] & 0xF, s[:, 0:8] >> 4], axis=1)
    high = (s[:, None, 8:12] >> _SHIFT2) & 3  # (n, 4 shifts, 4 bytes): scale i at [i // 4, i % 4]
    return (low | (high.reshape(s.shape[0], 16) << 4)).astype(np.int8)


def _q3_k(b):
    n = b.shape[0]
    high = (b["hmask"].reshape(n, 1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(2, 4, 1)) & 1
    q = _crumbs(b["qs"], 2).astype(np.int8) - ((1 - high.reshape(n, -1)) << 2).astype(np.int8)
    return _by_sub(q.astype(_F32), _half(b["d"]) * (_scales_6bit_16(b["scales"]) - 32).astype(_F32))


def _scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K: the 8 scales and 8 minimums of 6 bits from the 12 bytes, as float32."""
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(_F32), mn.astype(_F32)


def _k4_nibbles(qs: np.ndarray) -> np.ndarray:
    """(n, 128) -> (n, 256): sub-block 2k the low nibbles of bytes 32k.., 2k+1 their high ones."""
    n = qs.shape[0]
    q = qs.reshape(n, 4, 1, 32)
    return np.concatenate([q & 0xF, q >> 4], axis=2).reshape(n, -1)


def _q4_k(b):
    sc, mn = _scale_min_k4(b["scales"])
    return _by_sub(_k4_nibbles(b["qs"]).astype(_F32), _half(b["d"]) * sc, _half(b["dmin"]) * mn)


def _q5_k(b):
    n = b.shape[0]
    sc, mn = _scale_min_k4(b["scales"])
    high = ((b["qh"][:, None, :] >> np.arange(8, dtype=np.uint8)[:, None]) & 1) << 4  # (n, 8, 32)
    q = _k4_nibbles(b["qs"]) | high.reshape(n, -1)
    return _by_sub(q.astype(_F32), _half(b["d"]) * sc, _half(b["dmin"]) * mn)


def _q6_k(b):
    n = b.shape[0]
    ql = b["ql"].reshape(n, 2, 2, 32)
    low = np.concatenate([ql & 0xF, ql >> 4], axis=2)                    # (n, 2 halves, 4, 32)
    high = (b["qh"].reshape(n, 2, 1, 32) >> _SHIFT2) & 3
    q = (low | (high << 4)).astype(np.int8) - np.int8(32)
    return _by_sub(q.reshape(n, -1).astype(_F32), _half(b["d"]) * b["scales"].astype(_F32))


def _iq4_nl(b):
    return _IQ4[_nibbles(b["qs"])] * _half(b["d"])


def _iq4_xs(b):
    n = b.shape[0]
    i = np.arange(8)
    low = (b["scales_l"][:, i // 2] >> (4 * (i % 2)).astype(np.uint8)) & 0xF
    high = (b["scales_h"][:, None] >> (2 * i).astype(np.uint16)) & 3
    ls = (low.astype(np.int16) | (high.astype(np.int16) << 4)) - 32
    q = _IQ4[_nibbles(b["qs"].reshape(n * 8, 16)).reshape(n, -1)]
    return _by_sub(q, _half(b["d"]) * ls.astype(_F32))


_POW3 = np.array([1, 3, 9, 27, 81], np.uint8)[:, None]


def _ternary(x: np.ndarray, digits: int) -> np.ndarray:
    """TQ1_0: digit n of each byte b (n < ``digits``): (((b * 3^n) mod 256) * 3) >> 8, as
    (n_blocks, digits, bytes)."""
    q = x[:, None, :] * _POW3[:digits]  # (uint8: wraps mod 256)
    return ((q.astype(np.uint16) * 3) >> 8).astype(_F32)


def _tq1_0(b):
    n = b.shape[0]
    qs = b["qs"]
    q = np.concatenate([_ternary(qs[:, :32], 5).reshape(n, -1), _ternary(qs[:, 32:], 5).reshape(n, -1),
                        _ternary(b["qh"], 4).reshape(n, -1)], axis=1)
    return (q - 1) * _half(b["d"])


def _tq2_0(b):
    return (_crumbs(b["qs"], 2).astype(_F32) - 1) * _half(b["d"])


def _mxfp4(b):
    e = b["e"].astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32)
    return _MXFP4[_nibbles(b["qs"])] * bits.view(_F32)[:, None]


def _nvfp4(b):
    n = b.shape[0]
    q = _MXFP4[_nibbles(b["qs"].reshape(n * 4, 8))].reshape(n, -1)
    return _by_sub(q, _UE4M3[b["d"]])


def _q1_0(b):
    d = _half(b["d"])
    return np.where(np.unpackbits(b["qs"], axis=1, bitorder="little").astype(bool), d, -d)


#: ggml type code -> kernel(blocks) -> (n, elements) float32
KERNELS = {2: _q4_0, 3: _q4_1, 6: _q5_0, 7: _q5_1, 8: _q8_0, 9: _q8_0, 10: _q2_k, 11: _q3_k, 12: _q4_k,
           13: _q5_k, 14: _q6_k, 15: _q8_0, 20: _iq4_nl, 23: _iq4_xs, 34: _tq1_0, 35: _tq2_0, 39: _mxfp4,
           40: _nvfp4, 41: _q1_0}
assert set(KERNELS) == set(S.BLOCKS)


def packed_bytes(code: int, shape: tuple) -> int:
    """The bytes a tensor of ggml type ``code`` and this (numpy) shape takes."""
    _, block, per, _ = S.GGML_TYPES[code]
    return math.prod(shape) // block * per


def dequantize(code: int, data, shape: tuple, dtype: str = "float32", what: str = "packed tensor") -> np.ndarray:
    """The elements of a tensor of packed ggml type ``code`` (its bytes ``data``, any
    contiguous buffer or array; numpy's ``shape``, the last extent a multiple of the block) as
    a new array of ``dtype`` (float32; float16, bfloat16: rounded to nearest even from
    float32; float64).  ``what`` names the tensor in errors."""
    name, block, per, _ = S.GGML_TYPES[code]
    if code not in KERNELS:
        raise E.UsageError(f"{what}: {name} cannot be dequantized (types that can: {', '.join(names())})")
    if str(dtype) not in OUTPUTS:
        raise E.UsageError(f"{what}: dequantize to {dtype!r}: one of {', '.join(OUTPUTS)}")
    shape = tuple(int(d) for d in shape)
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if not shape or shape[-1] % block:
        raise E.UsageError(f"{what}: {name}{list(shape)}: the last extent (numpy's order: the rows of blocks) "
                           f"must be a multiple of the block, {block}")
    if raw.nbytes != packed_bytes(code, shape):
        raise E.UsageError(f"{what}: {name}{list(shape)} takes {packed_bytes(code, shape):,} bytes; the data has "
                           f"{raw.nbytes:,}")
    out = np.empty(shape, numpy_dtype(str(dtype)))
    blocks = raw.view(record_of(S.BLOCKS[code]).dtype)
    rows = out.reshape(-1, block)
    kernel, step = KERNELS[code], max(1, CHUNK_ELEMENTS // block)
    for s in range(0, len(blocks), step):
        with np.errstate(all="ignore"):  # (a NaN or infinite scale, as ggml: its product)
            y = kernel(blocks[s:s + step])
        if rows.dtype == _F32:
            rows[s:s + step] = y
            continue
        with np.errstate(over="ignore"):
            z = y.astype(rows.dtype)
        over = np.isinf(z) & np.isfinite(y)
        if over.any():
            k = int(np.flatnonzero(over.reshape(-1))[0])
            raise E.UsageError(f"{what}: element {s * block + k} dequantizes to {float(y.reshape(-1)[k])!r}, "
                               f"beyond {rows.dtype.name}'s range (dequantize to float32 instead)")
        rows[s:s + step] = z
    return out


def names() -> list[str]:
    """The ggml types this module dequantizes, by name."""
    return [S.GGML_TYPES[c][0] for c in KERNELS]


def packed_codec(quant_params) -> PackedCodec | None:
    """The codec of a packed tensor whose parameters name a ggml type (``{"ggml_type": 2}``):
    its name, block, and a decoder when it is one of :data:`KERNELS` (None: not a ggml codec)."""
    q = quant_params.get(S.QUANT_TYPE_KEY) if isinstance(quant_params, dict) else None
    if not isinstance(q, (int, np.integer)) or isinstance(q, bool) or int(q) not in S.GGML_TYPES:
        return None
    code = int(q)
    name, block, per, _ = S.GGML_TYPES[code]

    def decode(data, shape, dtype="float32", what="packed tensor"):
        return dequantize(code, data, shape, dtype, what)
    return PackedCodec(name, block, per, decode if code in KERNELS else None)
