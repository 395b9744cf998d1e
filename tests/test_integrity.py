"""codec.io.integrity.scan_hashes: one pass over a range gives its BLAKE3 and the BLAKE3 of every
span inside it, whatever the spans (crossing pieces, overlapping, empty, partly outside)."""
import blake3
import numpy as np
import pytest

from codec.io import integrity
from codec.io.sources import Source


@pytest.mark.parametrize("piece", [7, 64, 1000, 1 << 20])
def test_one_pass_gives_the_range_hash_and_every_span_hash(monkeypatch, piece):
    monkeypatch.setattr(integrity, "PIECE", piece)
    data = np.random.default_rng(piece).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    src = Source(data)
    start, length = 100, 4000
    spans = [(100, 0), (100, 1), (150, 700), (120, 3000), (4099, 1), (3000, 1100), (50, 100), (700, 0), (4100, 50),
             (2000, 10)]
    released = []
    monkeypatch.setattr(src, "release", lambda a, n: released.append((a, n)))
    seen = []
    whole, hexes = integrity.scan_hashes(src, start, length, spans, seen.append)
    assert whole == blake3.blake3(data[start:start + length]).digest()
    for (a, n), got in zip(spans, hexes):
        lo, hi = max(a, start), min(a + n, start + length)  # only the bytes inside the range are read
        assert got == blake3.blake3(data[lo:hi] if hi > lo else b"").hexdigest(), (a, n)
    assert sorted(released) == [(p, min(piece, start + length - p)) for p in range(start, start + length, piece)]
    assert sum(seen) == length + sum(n for _, n in spans)


@pytest.mark.parametrize("piece", [7, 1000, 1 << 20])
def test_a_range_without_spans_is_hashed_whole_and_its_pages_released(monkeypatch, piece):
    monkeypatch.setattr(integrity, "PIECE", piece)
    data = np.random.default_rng(piece).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    src = Source(data)
    released, seen = [], []
    monkeypatch.setattr(src, "release", lambda a, n: released.append((a, n)))
    whole, hexes = integrity.scan_hashes(src, 100, 4000, [], seen.append)
    assert whole == blake3.blake3(data[100:4100]).digest() and hexes == []
    assert released == [(p, min(piece, 4100 - p)) for p in range(100, 4100, piece)] and sum(seen) == 4000
