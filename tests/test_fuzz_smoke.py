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
