"""The C++17 reader (cpp/): generated from the schemas, and reading what the Python reader reads."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_header_is_current():
    """cpp/include/aero/generated.hpp is exactly what `python -m codec.cgen` makes from the schemas."""
    r = subprocess.run([sys.executable, "-m", "codec.cgen", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
