"""Mutated AERO files and AEROSETs for the C++ reader's sanitizer run (tests/test_cpp.py), made with
the fuzz harnesses' own mutators: ``fuzz/_common.mutate`` (bit flips, random bytes, truncation,
interesting integers, splices...) and each harness's passes -- the input as mutated, with its
hashes repaired (``fuzz_aero.fixup``: the mutation then reaches TIDX/MMSG/IHSH/PHSH logic instead
of stopping at a chunk hash), and, one input in 16, a budget-targeted metadata document.

    python tests/cpp_mutants.py OUT_DIR N_FILES N_SETS SEED

writes OUT_DIR/list.txt: one ``file<TAB>PATH`` or ``set<TAB>PATH`` line per input (the format of
``aero_dump --batch``).  Run as a script: the harness modules expect ``--smoke`` in ``sys.argv``
(no atheris)."""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(out: Path, n_files: int, n_sets: int, seed: int) -> None:
    sys.argv = [sys.argv[0], "--smoke"]
    sys.modules["atheris"] = None  # (no coverage instrumentation: only the mutators are wanted here)
    sys.path[:0] = [str(ROOT / "fuzz"), str(ROOT)]
    import _common as C
    import fuzz_aero as H

    vectors = ROOT.parent / "shared" / "vectors" / "aero"
    seeds = [p.read_bytes() for p in sorted(vectors.rglob("*.aero"))]
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    k = 0
    while k < n_files:
        data = C.mutate(rng, rng.choice(seeds), seeds, H.HARNESS.interesting)
        for name, buf, _how in H.passes(data):
            p = out / f"m{k:05d}-{name}.aero"
            p.write_bytes(buf)
            lines.append(f"file\t{p}")
            k += 1
    # sets: a copy of a conformance set with its index JSON or one of its files mutated
    bases = [vectors / "aeroset_global", vectors / "aeroset_ref"]
    for j in range(n_sets):
        d = out / f"s{j:04d}"
        shutil.copytree(rng.choice(bases), d)
        files = sorted(d.iterdir())
        victim = rng.choice(files)
        data = C.mutate(rng, victim.read_bytes(), [], H.HARNESS.interesting)
        if victim.suffix == ".aero" and rng.random() < 0.5:
            data = H.fixup(data) or data
        victim.write_bytes(data)
        if victim.suffix == ".aero" and rng.random() < 0.5:
            rehash(d, victim.name, data)  # (the mutation then reaches past the index's sha256)
        index = d / "model.aeroset.json"
        lines.append(f"set\t{index if index.exists() else d}")
    (out / "list.txt").write_text("\n".join(lines) + "\n")


def rehash(d: Path, name: str, data: bytes) -> None:
    """Every index JSON of the set ``d`` lists file ``name`` with the sha256 and size of ``data``."""
    for index in d.glob("*.aeroset.json"):
        doc = json.loads(index.read_text())
        for ref in [doc.get("global_tidx"), *doc.get("parts", [])]:
            if isinstance(ref, dict) and ref.get("path") == name:
                ref.update(sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
        index.write_text(json.dumps(doc))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
