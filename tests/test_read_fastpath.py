"""The open path's fast pieces against their plain definitions: the name index (one sort of
hash/row keys), a bounded reader that inflates ahead on a worker thread, and the string gather
of the vectorised TIDX decoder."""
from __future__ import annotations

import io
import random

import numpy as np
import pytest
import zstandard

from codec.engine import columns, payload, rowscan
from codec.io.bounded import BoundedReader
from codec.io.integrity import new_hasher


class _SameHash(str):
    def __hash__(self):
        return 7


def test_name_index_maps_every_name_and_refuses_repeats():
    n = columns._SMALL * 3
    names = [f"layer.{i // 16}.t{i % 16}" for i in range(n)]
    ix = columns.name_index(names)
    assert isinstance(ix, columns.NameIndex)
    assert all(ix[names[i]] == i for i in random.Random(1).sample(range(n), 500))
    assert list(ix) == names and len(ix) == n
    assert "absent" not in ix and ix.get(5) is None and ix.get([1]) is None
    with pytest.raises(KeyError):
        ix["absent"]
    assert columns.name_index(names + [names[17]]) is None


def test_name_index_hash_collisions():
    names = [_SameHash(f"a{i}") for i in range(columns._SMALL + 10)]
    ix = columns.name_index(names)
    assert ix is not None and all(ix[x] == i for i, x in enumerate(names))
    assert columns.name_index(names + [_SameHash("a3")]) is None


def _reads(rd, sizes):
    out = []
    for k in sizes:
        try:
            out.append(("ok", rd.read(k)))
        except Exception as e:  # noqa: BLE001 (the same error either way is the point)
            out.append(("err", type(e).__name__, str(e)))
            break
    return out


@pytest.mark.parametrize("limit_delta", [0, -1, -5000, 3])
@pytest.mark.parametrize("ahead", [1, 7, 4096, 1 << 16])
def test_bounded_reader_ahead_is_the_same_reader(ahead, limit_delta):
    rng = random.Random(ahead + limit_delta)
    data = bytes(rng.getrandbits(8) for _ in range(20_000)) * 3
    z = zstandard.ZstdCompressor().compress(data)
    limit = len(data) + limit_delta
    sizes = [rng.choice([1, 100, 4096, 10_000, 1 << 20]) for _ in range(40)]
    got = []
    for a in (0, ahead):
        src = zstandard.ZstdDecompressor().stream_reader(z, read_across_frames=True)
        rd = BoundedReader(src, limit, new_hasher(1), ahead=a)
        r = _reads(rd, sizes)
        rd.drain()
        got.append((r, rd.count, rd.over, rd.hasher.digest()))
    assert got[0] == got[1]


def test_bounded_reader_ahead_raises_where_the_stream_fails():
    data = bytes(range(256)) * 400
    z = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    z[-1] ^= 0xFF  # a bad frame checksum: the stream fails at its end
    errs = []
    for a in (0, 1000):
        src = zstandard.ZstdDecompressor().stream_reader(bytes(z), read_across_frames=True)
        rd = BoundedReader(src, len(data), new_hasher(1), ahead=a,
                                   on_error=lambda e: ValueError(f"zstd: {e}"))
        errs.append(_reads(rd, [5000] * 40)[-1][:2])
    assert errs[0] == errs[1] == ("err", "ValueError")


def test_bounded_reader_ahead_ignores_buffers():
    rd = BoundedReader(io.BytesIO(b"x").getbuffer(), 1, ahead=4)
    assert rd.read(5) == b"x" and rd.read(5) == b""


def test_strings_match_a_plain_decode():
    rng = random.Random(5)
    pool = [b"", b"abc", "h\u00e9llo".encode(), b"a\nb", b"\xff\xfe", b"\n"]
    for _ in range(300):
        data, starts, lens = bytearray(), [], []
        for _ in range(rng.randint(1, 40)):
            data += bytes(rng.randint(0, 3))
            data.append(0xA0)
            s = rng.choice(pool + [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12)))])
            starts.append(len(data))
            lens.append(len(s))
            data += s
        w = np.zeros(len(data) + rowscan.PAD, np.uint8)
        w[:len(data)] = np.frombuffer(bytes(data), np.uint8)
        got = rowscan.strings(w, np.array(starts), np.array(lens))
        raw = [bytes(data[a:a + n]) for a, n in zip(starts, lens)]
        try:
            want = ([x.decode("utf-8") for x in raw], all(x.isascii() for x in raw))
        except UnicodeDecodeError:
            assert got[0] is None
        else:
            assert got == want
