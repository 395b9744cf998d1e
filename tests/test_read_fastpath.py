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


@pytest.mark.parametrize("listed", [True, False])  # (a small TIDX's columns as lists, a big one's as arrays)
def test_aero_reads_take_the_prepared_columns_and_agree_with_the_full_path(listed, tmp_path, monkeypatch):
    """An AERO tensor() (issue 35) reads each tensor from the TIDX columns prepared once: no
    per-row column lookups (Table.values / Table.value), the same arrays as the full path
    (TensorInfo, tensor_view) for plain, empty and packed tensors in several shards, with and
    without hash_b3, through a NameIndex (>= _SMALL names); hash_b3 still checked on the first
    verified read, and only then."""
    import codec
    from codec import errors as E
    from codec.engine import table
    from codec.formats.aero import reader as aero_reader
    from codec.formats.aero.reader import tensor_view
    from codec.model import Packed
    monkeypatch.setattr(aero_reader, "_LISTED", 1 << 30 if listed else 0)
    rng = np.random.default_rng(3)
    model = {f"layer.{i // 50}.w{i % 50}": rng.standard_normal((i % 5, 3)).astype(np.float32 if i % 3 else np.float16)
             for i in range(columns._SMALL + 100)}
    model["big"] = rng.integers(0, 255, 3_000_000, dtype=np.uint8)
    model["q"] = Packed(rng.integers(0, 256, 18, dtype=np.uint8), (32,), {"codec": "mine"})
    for hashed in (True, False):
        p = str(tmp_path / f"m{hashed}.aero")
        codec.write(p, model, format="aero", max_shard_bytes=1 << 20, tensor_hash=hashed, progress=False)

        def no_row_lookups(*a, **k):
            raise AssertionError("a per-row column lookup on the read path")
        with monkeypatch.context() as m, codec.open(p) as r:
            m.setattr(table.Table, "values", no_row_lookups)
            m.setattr(table.Table, "value", no_row_lookups)
            assert isinstance(r.rows, columns.NameIndex)
            for verify in (False, True, True):
                for name in model:
                    a = r.tensor(name, verify=verify)
                    want = model[name].data if name == "q" else model[name]
                    assert a.dtype == want.dtype and a.shape == want.shape and a.tobytes() == want.tobytes()
                    assert not a.flags.writeable
        with codec.open(p) as r:
            for name in ("layer.0.w0", "layer.3.w7", "big", "q"):
                t = r.tensors[name]
                full = tensor_view(t, r._src.buf, t.offset)
                assert r.tensor(name).tobytes() == full.tobytes() and r.tensor(name).shape == full.shape
    # a wrong byte: refused by every verified read until one succeeds, never by an unverified one
    p = str(tmp_path / "mTrue.aero")
    with codec.open(p) as r:
        off = r.tensors["layer.3.w7"].offset
    data = bytearray(open(p, "rb").read())
    data[off] ^= 1
    open(p, "wb").write(bytes(data))
    with codec.open(p) as r:
        assert r.tensor("layer.3.w7", verify=False).tobytes() == bytes(data[off:off + r.tensors["layer.3.w7"].nbytes])
        for _ in range(2):
            with pytest.raises(E.IntegrityError) as ei:
                r.tensor("layer.3.w7")
            assert ei.value.offset == off
        assert r.tensor("layer.3.w8").tobytes() == model["layer.3.w8"].tobytes()
        with pytest.raises(E.NotFoundError):
            r.tensor("absent")


def test_safetensors_rows_in_byte_order_as_the_exact_walk(tmp_path, monkeypatch):
    """The rows of a safetensors header the vectorised check passed are those of the exact walk:
    in the order of their bytes, ties (empty tensors at one offset) in the header's order."""
    import json
    import codec
    rng = random.Random(7)
    entries, at = [], 0
    for i in range(300):
        n = rng.choice([0, 0, 4, 8, 12])
        entries.append((f"t{i:03d}", {"dtype": rng.choice(["F32", "I32", "U8"]) if n % 4 == 0 else "U8",
                                     "shape": [n // 4] if n % 4 == 0 else [n], "data_offsets": [at, at + n]}))
        at += n
    for k, (name, e) in enumerate(entries):  # (U8 of any count; F32/I32: count = bytes / 4)
        if e["dtype"] == "U8":
            e["shape"] = [e["data_offsets"][1] - e["data_offsets"][0]]
    rng.shuffle(entries)
    head = json.dumps(dict(entries)).encode()
    head += b" " * (-len(head) % 8)
    p = tmp_path / "m.safetensors"
    p.write_bytes(len(head).to_bytes(8, "little") + head + bytes(rng.getrandbits(8) for _ in range(at)))

    def rows():
        with codec.open(p) as r:
            x = r.rows
            return x.names, x.codes, x.shapes, x.begins, x.nbytes, dict(x.index)
    fast = rows()
    from codec.engine import payload
    monkeypatch.setattr(payload, "fast_columns", lambda *a, **k: None)
    assert rows() == fast


def test_shallow_rows_are_rows_nesting_finds_at_most_two_deep():
    """The quick test of a batch of decoded rows (issue 35) says "nothing to walk" only of rows
    that nesting() finds at most 2 deep; anything else (deeper, or a container type it does not
    know exactly) is walked as before, and a row nesting past the limit is still refused."""
    import msgpack
    from codec import errors as E
    from codec.engine import table
    from codec.engine.nesting import MAX_NESTING, nesting
    from codec.schemas import aero as S

    class D(dict):
        pass

    class L(list):
        pass
    shallow = [[{"a": 1, "s": [1, 2]}], [{"a": 1}], [{"a": [1, "x", None, 2.5, b"", True]}, {"b": []}]]
    deep = [[{"a": [[1]]}], [{"a": {"b": 1}}], [D(a=1)], [{"a": L([1])}], [{"a": [L()]}], [{"a": (1,)}], [[1]],
            [{"q": [{"x": 1}]}], [{"a": 1}, {"b": [[[]]]}], [{"a": np.zeros(2)}]]
    for rows in shallow:
        assert table._shallow(rows) and max(map(nesting, rows)) <= 2
    for rows in deep:
        assert not table._shallow(rows)
    far = []
    for _ in range(MAX_NESTING):
        far = [far]
    row = {"name": "t", "dtype": 1, "shape": [1], "shard_id": 0, "data_off": 0, "data_len": 4, "future": far}
    for rows in ([row], [dict(row, name=f"t{i}") for i in range(table.SCAN_MIN + 5)]):
        raw = msgpack.packb({"tensors": rows})
        with pytest.raises(E.LimitError):
            table.unpack_table(io.BytesIO(raw), len(raw), S.Tidx, "tensors", whole=lambda: raw, fmt="aero", offset=7,
                               path="TIDX", rule=S.Rule.PAYLOAD, keep="name")
