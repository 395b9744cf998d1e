"""The fuzz harnesses run (without atheris) over their seeds, random mutations and every saved
finding: nothing but typed errors may come out."""
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, vectors_dir

HARNESSES = sorted((ROOT / "fuzz").glob("fuzz_*.py"))


@pytest.mark.parametrize("harness", HARNESSES, ids=lambda p: p.stem)
def test_smoke(harness):
    fmt = harness.stem.removeprefix("fuzz_")
    if fmt not in ("safetensors", "gguf"):  # (their seeds are written by our writer: there are no vectors)
        vectors_dir("aero" if fmt == "aeroset" else fmt)  # AEROSET vectors live with AERO's
    p = subprocess.run([sys.executable, str(harness), "--smoke", "--smoke-iters", "1500"], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "0 contract violations" in p.stdout + p.stderr


@pytest.mark.parametrize("harness", HARNESSES, ids=lambda p: p.stem)
def test_saved_findings_stay_fixed(harness):
    found = sorted(Path(ROOT / "fuzz" / "findings" / harness.stem.removeprefix("fuzz_")).glob("*"))
    if not found:
        return
    p = subprocess.run([sys.executable, str(harness), "--repro", *map(str, found)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


_PASSES = """
import sys, glob, collections
sys.argv = ["x", "--smoke"]
sys.path[:0] = [{fuzz!r}, {root!r}]
import {mod} as H
import codec
seen = collections.Counter()
for p in sorted(glob.glob({glob!r})):
    data = open(p, "rb").read()
    if {prefix!r}:
        data = {prefix!r} + data
    for name, buf, how in H.passes(data):
        if name == {pass_!r}:
            seen[name] += 1
            H.HARNESS.exercise(name, buf, how)  # the harness's own contract: typed errors only
print(seen[{pass_!r}])
"""


@pytest.mark.parametrize("fmt,pass_,pattern,prefix", [
    ("mag", "count", "*.mag", b""), ("oinf", "count", "*.oinf", b""), ("stb", "count", "*.stb", b""),
    ("aeroset", "size", "*.aeroset.json", b"\x00"), ("aero", "budget", "*.aero", b""),
])
def test_budget_and_count_passes_run_over_the_vectors(fmt, pass_, pattern, prefix):
    """Each harness has a structure-aware pass aimed at the decode / allocation budgets (hostile
    counts, sizes, offsets; budget-targeted documents): it is produced for the conformance
    vectors and the harness's contract holds for every one."""
    src = "aero" if fmt == "aeroset" else fmt
    code = _PASSES.format(fuzz=str(ROOT / "fuzz"), root=str(ROOT), mod=f"fuzz_{fmt}", pass_=pass_, prefix=prefix,
                          glob=str(vectors_dir(src) / "**" / pattern))
    p = subprocess.run([sys.executable, "-c", code.replace("glob.glob(", "glob.glob(recursive=True, pathname=")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert int(p.stdout.split()[-1]) >= 1  # (AERO: one input in fuzz_aero.BUDGET_EVERY)


_GGUF_PASSES = """
import sys, collections, struct
sys.argv = ["x", "--smoke"]
sys.path[:0] = [{fuzz!r}, {root!r}]
import fuzz_gguf as H
from codec.schemas import gguf as S
seen = collections.Counter()
seeds = sorted(H.make_seeds().glob("*.gguf"))
for p in seeds:
    data = p.read_bytes()
    kv, infos = H.walk(data)
    if data[4:8] == struct.pack("<I", 3):  # (not the big-endian seed: its walk stops at once)
        for at, width, kind, _ in infos:  # the walk lands on the fields it names
            v = int.from_bytes(data[at:at + width], "little")
            assert kind != "n_dims" or 1 <= v <= S.MAX_DIMS, (p.name, at, v)
            assert kind != "ggml-type" or v in S.GGML_TYPES, (p.name, at, v)
        for at, width, kind, _ in kv:
            v = int.from_bytes(data[at:at + width], "little")
            assert kind != "value-type" or v <= 12, (p.name, at, v)
    for name, buf, how in H.passes(data):
        seen[name] += 1
        H.HARNESS.exercise(name, buf, how)  # the harness's own contract: typed errors only
print(len(seeds), sum(p.name.startswith("seed-gguf-py-") for p in seeds), seen["count"], seen["length"], seen["info"])
"""


def test_gguf_hostile_passes_run_over_its_seeds():
    """GGUF has no vectors: the harness writes its seeds (modelcodec's writer and gguf-py's), and
    its count, key/value-length and tensor-info passes are produced for them, at the fields the
    walk names, with the contract holding for every one."""
    code = _GGUF_PASSES.format(fuzz=str(ROOT / "fuzz"), root=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    n_seeds, n_reference, count, length, info = map(int, p.stdout.split()[-5:])
    assert n_reference >= 5 and n_seeds > n_reference
    assert count >= n_seeds - 1 and length >= 5 and info >= 5


_AERO_SCAN = """
import sys, glob
sys.argv = ["x", "--smoke"]
sys.path[:0] = [{fuzz!r}, {root!r}]
import fuzz_aero as H
from codec.engine import table
rows = [0]
real = table._Col.add_array
def spy(self, vals, n, base):
    rows[0] += n
    return real(self, vals, n, base)
table._Col.add_array = spy
by_threshold = {{}}
for p in sorted(glob.glob({glob!r}, recursive=True)):
    data = open(p, "rb").read()
    for name, buf, how in H.passes(data):
        H.HARNESS.exercise(name, buf, how)
    by_threshold[table.SCAN_MIN] = by_threshold.get(table.SCAN_MIN, 0) + 1
print(by_threshold.get(1, 0), by_threshold.get(H.SCAN_MIN, 0), rows[0])
"""


def test_aero_harness_sends_half_its_inputs_through_the_vectorised_index_decoder():
    """Few fuzz inputs hold the 512 entries (table.SCAN_MIN) the vectorised TIDX decoder (codec.engine.rowscan) takes
    over from: the AERO harness reads half of them with that threshold at 1, so mutations reach
    it; the other half keeps the map-by-map decoder."""
    code = _AERO_SCAN.format(fuzz=str(ROOT / "fuzz"), root=str(ROOT), glob=str(vectors_dir("aero") / "**" / "*.aero"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    scanned_inputs, plain_inputs, scanned_cells = map(int, p.stdout.split()[-3:])
    assert scanned_inputs >= 5 and plain_inputs >= 5
    assert scanned_cells > 0  # (column cells the scanner decoded)
