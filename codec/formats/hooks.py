"""What a format contributes to the tools, in the vocabulary the tools read: the steps of its
``modelcodec demo`` (:class:`DemoStep`, :func:`show`, :class:`Standard`) and the C++ header
section the generator writes from its schema (:class:`CgenSpec`).

A format's descriptor (:class:`codec.registry.FormatDescriptor`) hands these to the tools
(``demo``, ``cgen``) without importing them: formats sit below the tools.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field as _dc_field
from typing import Any, Callable

import ml_dtypes
import numpy as np


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


def flip_bit(src: str, dst: str, offset: int) -> None:
    """A copy of ``src`` with one bit of the byte at ``offset`` flipped."""
    data = bytearray(open(src, "rb").read())
    data[offset] ^= 0x10
    with open(dst, "wb") as f:
        f.write(data)


def serve(directory: str):
    """A context manager serving ``directory`` over HTTP on 127.0.0.1 (single-range
    requests); it yields the base URL (:mod:`codec.io.http_server`, imported only for a demo that
    needs it)."""
    from ..io.http_server import serve as http_serve
    return http_serve(directory)


@dataclass
class CgenSpec:
    """What one format contributes to one generated header: ``target`` (path from the project
    root), the C++ ``section`` namespace its schema goes to, the schema module, and ``extra``:
    format-specific tables (name -> {int key: str value}) computed by the format module (e.g.
    the common dtype names its reader gives)."""
    target: str
    section: str
    schema: Any
    extra: dict = _dc_field(default_factory=dict)
    order: int = 0
