"""``modelcodec demo``: write sample models in every format, then inspect and validate them.

The sample data is built in (seeded random weights), so it runs on a fresh machine with no
downloads.  It also writes one deliberately corrupted file to show what a broken file reports,
and an AEROSET that it reads from its directory and over HTTP (a minimal Range-capable server
on 127.0.0.1, started for the demo and stopped after it).
"""
from __future__ import annotations

import os
import re
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

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

    set_dir = os.path.join(out_dir, "tiny-mlp-set")
    from .formats.aeroset import write_aeroset
    write_aeroset(set_dir, model, model_name="tiny-mlp", architecture="mlp", max_shard_bytes=16 * 1024,
                  max_part_shards=2)

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
    ok &= _demo_set(set_dir, say, quiet)
    say(f"\ndemo files are in {os.path.abspath(out_dir)}" + ("" if ok else "\nDEMO FAILED"))
    return 0 if ok else 1


def _demo_set(set_dir: str, say, quiet: bool) -> bool:
    """The AEROSET: inspected and validated locally, then read over HTTP Range requests."""
    from .cache import RangeCache
    from .formats.aeroset import AeroSet
    if quiet:
        ok = AeroSet.validate_file(set_dir, full=True).ok
    else:
        say(f"\n$ modelcodec inspect-set {set_dir}")
        cli.main(["inspect-set", set_dir])
        say(f"\n$ modelcodec validate --full {set_dir}")
        ok = cli.main(["validate", "--full", set_dir]) == 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    srv.directory = os.path.dirname(os.path.abspath(set_dir))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/{os.path.basename(set_dir)}/model.aeroset.json"
    try:
        say(f"\n# the same set served over HTTP ({url})")
        with AeroSet(set_dir) as local, AeroSet(url, cache=RangeCache(os.path.join(set_dir + "-cache"))) as remote:
            got = remote.read_tensors(list(local.tensors))
            same = all(got[n].tobytes() == local.tensor(n).tobytes() for n in local.tensors)
            say(f"read {len(got)} tensors remotely with {remote.store.http.stats['range_requests']} Range requests: "
                f"{'identical to the local copy' if same else 'DIFFERENT FROM THE LOCAL COPY'}")
            ok &= same
        if not quiet:
            say(f"\n$ modelcodec validate --full {url}")
            ok &= cli.main(["validate", "--full", url]) == 0
    finally:
        srv.shutdown()
        srv.server_close()
    return ok


class _RangeHandler(SimpleHTTPRequestHandler):
    """Static files with single ``Range: bytes=a-b`` support (the stdlib's server has none)."""
    protocol_version = "HTTP/1.1"

    def translate_path(self, path):
        self.directory = self.server.directory
        return super().translate_path(path)

    def send_head(self):
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        path = self.translate_path(self.path)
        if m is None or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        a, b = int(m[1]), min(int(m[2]), size - 1)
        if a > b:
            self.send_error(416)
            return None
        f = open(path, "rb")
        f.seek(a)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        self.send_header("Content-Length", str(b - a + 1))
        self.end_headers()
        self._left = b - a + 1
        return f

    def copyfile(self, source, outputfile):
        left = getattr(self, "_left", None)
        if left is None:
            return super().copyfile(source, outputfile)
        while left > 0:
            buf = source.read(min(left, 1 << 16))
            if not buf:
                break
            outputfile.write(buf)
            left -= len(buf)

    def log_message(self, *args):
        pass


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
