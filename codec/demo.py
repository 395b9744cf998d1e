"""``modelcodec demo``: write sample models in every format, then inspect and validate them.

The sample data is built in (seeded random weights), so it runs on a fresh machine with no
downloads.  Each format's descriptor says what it shows (``FormatDescriptor.demo``: it writes
its files and returns the steps to run, e.g. a deliberately corrupted file and what it
reports, or a set read over HTTP from a minimal Range-capable server on 127.0.0.1 started by
:func:`serve` for the demo); the command line runs the steps (this module knows no format and
does not import the command line).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np

from . import registry


def sample_mlp(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "embed.weight": rng.standard_normal((256, 64), dtype=np.float32),
        "layer.0.weight": rng.standard_normal((64, 64), dtype=np.float32),
        "layer.0.bias": np.zeros(64, dtype=np.float32),
        "layer.1.weight": rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16),
        "layer.1.bias": np.zeros(64, dtype=np.float16),
        "head.weight": rng.standard_normal((10, 64)).astype(np.float16),
        "position_ids": np.arange(128, dtype=np.int64),
        "mask": rng.random(32) > 0.5,
        "scale": np.array(0.125, dtype=np.float64),
    }


@dataclass
class DemoStep:
    """One step of the demo: a command line to run (``argv``, whose exit status must be
    ``expect``), or a check run in-process (``call() -> (ok, line to print)``)."""
    title: str
    argv: list | None = None
    expect: int = 0
    call: Callable[[], tuple[bool, str]] | None = None


def show(path: str, *, expect: int = 0, note: str = "") -> list[DemoStep]:
    """Inspect a file, then validate it with every hash (exit status ``expect``)."""
    return [DemoStep(f"$ modelcodec inspect {path}", ["inspect", path]),
            DemoStep(f"$ modelcodec validate --full {path}{note}", ["validate", "--full", path], expect)]


def fitted(model: dict, caps) -> dict:
    """The sample as a format holds it, from what it declares (:class:`registry.Capabilities`):
    an element type it lacks becomes the first it has of the same kind (floats: float32,
    float16; integers: int32, int16, int8; bool: int8, uint8), a rank under its least gets
    leading 1s."""
    out = {}
    for name, a in model.items():
        if a.dtype.name not in caps.dtypes:
            kind = ("float32", "float16") if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16 else \
                ("int8", "uint8") if a.dtype == np.bool_ else ("int32", "int16", "int8")
            a = a.astype(next(t for t in kind if t in caps.dtypes))
        out[name] = a.reshape((1,) * (caps.min_rank - a.ndim) + a.shape)
    return out


@dataclass(frozen=True)
class Standard:
    """The demo of a format with nothing special to show: the sample, :func:`fitted` to the
    format, written with ``metadata``, then inspected and validated."""
    metadata: dict

    def __call__(self, out_dir: str, model: dict, d) -> list[DemoStep]:
        p = os.path.join(out_dir, "tiny-mlp" + d.extensions[0])
        d.writer(p, fitted(model, d.capabilities), metadata=self.metadata)
        return show(p)


def plan(out_dir: str) -> list[DemoStep]:
    """Write every format's sample files under ``out_dir``; the steps that show them."""
    os.makedirs(out_dir, exist_ok=True)
    model = sample_mlp()
    return [step for d in registry.formats() if d.demo is not None
            for step in (d.demo(out_dir, model, d) if isinstance(d.demo, Standard) else d.demo(out_dir, model))]


def flip_bit(src: str, dst: str, offset: int) -> None:
    """A copy of ``src`` with one bit of the byte at ``offset`` flipped."""
    data = bytearray(open(src, "rb").read())
    data[offset] ^= 0x10
    with open(dst, "wb") as f:
        f.write(data)


def serve(directory: str):
    """A context manager serving ``directory`` over HTTP on 127.0.0.1 (single-range
    requests); it yields the base URL (:mod:`codec.demo_http`, imported only for a demo that
    needs it)."""
    from .demo_http import serve as http_serve
    return http_serve(directory)
