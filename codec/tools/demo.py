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
import ml_dtypes
import numpy as np

from .. import registry
from ..formats.hooks import DemoStep, Standard, fitted, flip_bit, serve, show  # noqa: F401  (the demo's vocabulary)


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


def plan(out_dir: str) -> list[DemoStep]:
    """Write every format's sample files under ``out_dir``; the steps that show them."""
    os.makedirs(out_dir, exist_ok=True)
    model = sample_mlp()
    return [step for d in registry.formats() if d.demo is not None
            for step in (d.demo(out_dir, model, d) if isinstance(d.demo, Standard) else d.demo(out_dir, model))]


