"""``modelcodec demo``: write sample models in every format, then inspect and validate them.

The sample data is built in (seeded random weights), so it runs on a fresh machine with no
downloads.  It also writes one deliberately corrupted file to show what a broken file reports.
"""
from __future__ import annotations

import os
import shutil

import ml_dtypes
import numpy as np

import codec
from . import cli


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


def run(out_dir: str, quiet: bool = False) -> int:
    os.makedirs(out_dir, exist_ok=True)
    say = (lambda *a: None) if quiet else print
    model = sample_mlp()
    files = []
    p = os.path.join(out_dir, "tiny-mlp.aero")
    codec.write(p, model, format="aero", uuid=bytes(16), model_name="tiny-mlp", architecture="mlp",
                metadata={"license": "CC0", "note": "modelcodec demo"})
    files.append(p)
    p = os.path.join(out_dir, "tiny-mlp-sharded.aero")
    codec.write(p, model, format="aero", uuid=bytes(range(16)), model_name="tiny-mlp", architecture="mlp",
                max_shard_bytes=32 * 1024, control_integrity=True, page_hashes=True, page_size=16 * 1024)
    files.append(p)
    p = os.path.join(out_dir, "tiny-mlp.mag")
    codec.write(p, {n: a for n, a in _mag_model(model).items()}, format="mag",
                metadata={"n_layers": 2, "lr": 3e-4, "tied": False})
    files.append(p)
    p = os.path.join(out_dir, "tiny-mlp.stb")
    codec.write(p, _stb_model(model), format="stb")
    files.append(p)
    p = os.path.join(out_dir, "tiny-mlp.oinf")
    from .formats.oinf import UninitializedTensor, write_oinf_file
    write_oinf_file(p, sizevars={"D": 64, "V": 256}, metadata={"activation": "relu", "lr": 3e-4, "tied": False},
                    tensors={**{n.replace("_", "."): a for n, a in _mag_model(model).items()},
                             "kv.cache": UninitializedTensor("f16", (2, 64))})
    files.append(p)
    bad = os.path.join(out_dir, "corrupted.aero")
    shutil.copyfile(files[0], bad)
    with codec.open(files[0]) as r:
        off = r.tensors["layer.0.weight"].offset + 5
    with open(bad, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x10]))

    ok = True
    for p in files:
        say(f"\n$ modelcodec inspect {p}")
        cli.main(["inspect", p]) if not quiet else None
        say(f"\n$ modelcodec validate --full {p}")
        rc = cli.main(["validate", "--full", p]) if not quiet else _silent_validate(p)
        ok &= rc == 0
    say(f"\n$ modelcodec validate --full {bad}   # one flipped bit in layer.0.weight")
    rc = cli.main(["validate", "--full", bad]) if not quiet else _silent_validate(bad)
    ok &= rc == 1
    say(f"\ndemo files are in {os.path.abspath(out_dir)}" + ("" if ok else "\nDEMO FAILED"))
    return 0 if ok else 1


def _mag_model(model: dict) -> dict:
    """MAG holds float32, float16, bool and int32 tensors of rank >= 1."""
    out = {}
    for n, a in model.items():
        if a.dtype == ml_dtypes.bfloat16 or a.dtype == np.float64:
            a = a.astype(np.float32)
        elif a.dtype == np.int64:
            a = a.astype(np.int32)
        out[n] = a.reshape(1) if a.ndim == 0 else a
    return out


def _stb_model(model: dict) -> list:
    """STB holds float32, float16, int8 and int32; tensor ids are positions; the head is
    stored column-major to show the layout flag."""
    from .formats.stb import StbTensor
    out = []
    for n, a in model.items():
        if a.dtype in (ml_dtypes.bfloat16, np.float64):
            a = a.astype(np.float32)
        elif a.dtype in (np.int64, np.bool_):
            a = a.astype(np.int32)
        out.append(StbTensor(a, layout=1 if n == "head.weight" else 0))
    return out


def _silent_validate(p: str) -> int:
    with codec.open(p) as r:
        return 0 if r.validate(full=True).ok else 1
