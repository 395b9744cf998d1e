import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT.parent / "shared" / "vectors"

# remote AEROSET reads use the disk cache by default: never the developer's ~/.cache in tests
os.environ["MODELCODEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="modelcodec-test-cache-")

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def vectors_dir(fmt: str) -> Path:
    d = VECTORS / fmt
    if not (d / "manifest.json").is_file():
        pytest.skip(f"CONFORMANCE VECTORS MISSING: {d} not found — the shared/ folder must sit beside "
                    f"the project checkout for the conformance suite to run", allow_module_level=True)
    return d


def manifest(fmt: str) -> dict:
    return json.loads((vectors_dir(fmt) / "manifest.json").read_text())
