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


# --------------------------------------------------------------------------- SHA-256 fed warm
@pytest.mark.parametrize("n", [0, 1, integrity.WARM_PIECE - 1, integrity.WARM_PIECE, integrity.WARM_PIECE + 1,
                               3 * integrity.WARM_PIECE + 7])
def test_a_warm_digest_is_hashlibs(n):
    import hashlib
    raw = np.random.default_rng(n).bytes(n)
    views = [raw, bytearray(raw), memoryview(raw), np.frombuffer(raw, np.uint8)]
    if n >= 8:
        views.append(np.frombuffer(raw[:n // 8 * 8], np.float32).reshape(2, -1))  # (2-D, not bytes)
    for data in views:
        h, want = integrity.sha256(), hashlib.sha256()
        for _ in range(2):
            h.update(data)
            want.update(data)
        assert h.hexdigest() == want.hexdigest() and h.digest() == want.digest()
        c = h.copy()
        c.update(b"x")
        assert h.hexdigest() == want.hexdigest() != c.hexdigest()
    assert (h.name, h.digest_size) == ("sha256", 32)


def test_a_listed_file_is_hashed_whole_from_its_start(tmp_path):
    import hashlib
    from codec.io import links
    from codec.schemas import aeroset as S
    for n in (0, integrity.WARM_PIECE, 2 * integrity.WARM_PIECE + 3):
        p = tmp_path / f"f{n}"
        p.write_bytes(np.random.default_rng(n).bytes(n))
        assert links.digest_file(S.FILES, str(p)) == (hashlib.sha256(p.read_bytes()).hexdigest(), n)
        f = open(p, "rb")
        f.read(5)  # (a file handed over part read: hashed from its start all the same)
        assert links.digest_file(S.FILES, str(p), f) == (hashlib.sha256(p.read_bytes()).hexdigest(), n)
        assert f.closed


def test_a_small_piece_is_not_held_up_by_the_big_one_before_it():
    """Feeding a header or a bias after a big tensor does not wait for the big one's hashing (it
    did: the SHA-256 of a set's part ran in step with the copy); the order of the bytes hashed
    is kept, and a small buffer the caller reuses at once is hashed as it was fed."""
    import hashlib
    import threading
    release, seen = threading.Event(), []

    class Slow:
        def __init__(self):
            self.h = hashlib.sha256()

        def update(self, piece):
            if memoryview(piece).nbytes >= integrity.BackgroundFeed.INLINE:
                assert release.wait(10)  # (the big piece's hashing waits until the test says)
            seen.append(bytes(piece)[:1])
            self.h.update(piece)

    big = bytes([1]) * integrity.BackgroundFeed.INLINE
    small = bytearray(b"\x02" * 100)
    s = Slow()
    feed = integrity.BackgroundFeed(s)
    feed.update(big)
    feed.update(small)  # returns at once: the big piece is still being hashed
    small[:] = b"\x03" * 100  # (reused by the caller)
    feed.update(small)
    assert not release.is_set() and seen == []
    release.set()
    feed.drain()
    feed.__exit__(None, None, None)
    assert seen == [b"\x01", b"\x02", b"\x03"]
    assert s.h.hexdigest() == hashlib.sha256(big + b"\x02" * 100 + b"\x03" * 100).hexdigest()
