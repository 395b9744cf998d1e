"""File-level properties of the AERO writer and reader."""
import os
import tempfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import codec
from codec.formats.aero import NP_DTYPES, TensorSpec, write_aero
from codec.schemas.aero import DType

PLAIN = [dt for code, dt in NP_DTYPES.items() if code != DType.PACKED]
names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def arrays(draw):
    dt = draw(st.sampled_from(PLAIN))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=4)))
    n = int(np.prod(shape)) if shape else 1
    raw = draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
    a = np.frombuffer(raw, dtype=dt).reshape(shape)
    if dt == np.bool_:
        a = a.view(np.uint8) % 2 == 1  # bool arrays hold 0/1 bytes only
    order = draw(st.sampled_from(["C", "F", "BE"]))
    if order == "F" and a.ndim >= 2:
        a = np.asfortranarray(a)
    elif order == "BE" and dt.itemsize > 1 and dt.kind in "iuf" and dt != ml_dtypes.bfloat16:
        a = a.astype(dt.newbyteorder(">"))
    return a


@st.composite
def packed(draw):
    raw = draw(st.binary(max_size=40))
    return TensorSpec(raw, "packed", (len(raw),), draw(st.integers(0, 3)), {"ggml_type": draw(st.integers(0, 30))})


@st.composite
def models(draw):
    ns = draw(st.lists(names, min_size=0, max_size=8, unique=True))
    tensors = {n: draw(st.one_of(arrays(), arrays(), packed())) for n in ns}
    opts = dict(
        uuid=draw(st.binary(min_size=16, max_size=16)),
        model_name=draw(st.text(max_size=10)),
        architecture=draw(st.text(max_size=10)),
        metadata=draw(st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k not in ("model_name", "architecture")),
                                      st.one_of(st.integers(-2**53, 2**53), st.text(max_size=6), st.booleans(),
                                                st.lists(st.integers(0, 9), max_size=3)), max_size=3)),
        max_shard_bytes=draw(st.one_of(st.none(), st.integers(1, 300))),
        compress=draw(st.booleans()),
        control_integrity=draw(st.booleans()),
        page_hashes=draw(st.booleans()),
        page_size=draw(st.integers(1, 200)),
        tensor_hash=draw(st.booleans()),
    )
    return tensors, opts


def _expected_bytes(t):
    if isinstance(t, TensorSpec):
        return bytes(t.data)
    a = np.ascontiguousarray(t)
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


@given(models())
def test_aero_roundtrip_any_model(model):
    tensors, opts = model
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.aero")
        write_aero(p, tensors, **opts)
        first = open(p, "rb").read()
        write_aero(p, tensors, **opts)
        assert open(p, "rb").read() == first, "writing twice must give identical bytes"
        assert os.listdir(d) == ["m.aero"], "no temp file left behind"
        with codec.open(p) as r:
            assert list(r.tensors) == list(tensors)
            for n, t in tensors.items():
                got = r.tensor(n)
                info = r.tensors[n]
                if isinstance(t, TensorSpec):
                    assert info.dtype_name == "packed" and info.shape == t.shape
                    assert info.extra["quant_id"] == t.quant_id and info.extra["quant_params"] == t.quant_params
                else:
                    assert got.dtype == t.dtype.newbyteorder("<") and got.shape == t.shape
                    assert not got.flags.writeable
                assert got.tobytes() == _expected_bytes(t)
                assert ("hash_b3" in info.extra) == opts["tensor_hash"]
            # (an empty shorthand is not given: MJSN holds only the keys given)
            assert r.metadata == {**{k: opts[k] for k in ("model_name", "architecture") if opts[k]},
                                  **opts["metadata"]}
            assert r.uuid == opts["uuid"]
            rep = r.validate(full=True)
            assert rep.ok, [str(v) for v in rep.violations]
            assert r.validate(control=True).ok
            if opts["control_integrity"]:
                assert any("IHSH" in c for c in r.validate(control=True).checked)
            if opts["page_hashes"] and tensors:
                assert any("PHSH" in c for c in rep.checked)


def test_default_uuid_is_deterministic_and_content_derived(tmp_path):
    a = {"w": np.arange(6, dtype=np.float32)}
    write_aero(tmp_path / "a.aero", a)
    write_aero(tmp_path / "b.aero", a)
    write_aero(tmp_path / "c.aero", {"w": np.arange(6, dtype=np.float32) + 1})
    ua, ub, uc = (codec.open(tmp_path / f).uuid for f in ("a.aero", "b.aero", "c.aero"))
    assert ua == ub != uc


def test_streamed_tensor_spec(tmp_path):
    """A callable source is streamed piece by piece (never materialised by the writer)."""
    big = np.arange(1 << 16, dtype=np.int32)
    calls = []

    def pieces():
        calls.append(1)
        for k in range(0, big.size, 4096):
            yield big[k:k + 4096]
    write_aero(tmp_path / "s.aero", {"s": TensorSpec(pieces, np.int32, big.shape)}, uuid=bytes(16))
    with codec.open(tmp_path / "s.aero") as r:
        assert np.array_equal(r.tensor("s"), big)
        assert r.validate(full=True).ok
    assert len(calls) == 2  # one hashing pass, one writing pass


def test_writer_failure_leaves_target_untouched(tmp_path):
    p = tmp_path / "keep.aero"
    p.write_bytes(b"old")

    def broken():
        yield np.zeros(4, np.float32)
        raise RuntimeError("source died")
    with pytest.raises(RuntimeError):
        write_aero(p, {"x": TensorSpec(broken, np.float32, (8,))}, tensor_hash=False)
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["keep.aero"]


@pytest.mark.parametrize("bad,msg", [
    ({"x": np.zeros(2, dtype=np.complex64)}, "no dtype"),
    ({"": np.zeros(2)}, "non-empty"),
    ({"x": np.zeros(2, dtype=object)}, "no dtype"),
])
def test_writer_refuses_what_aero_cannot_hold(tmp_path, bad, msg):
    with pytest.raises(codec.UsageError, match=msg):
        write_aero(tmp_path / "x.aero", bad)
    assert not list(tmp_path.iterdir())


def test_shards_split_at_cap_and_big_tensor_gets_its_own(tmp_path):
    t = {"a": np.zeros(10, np.uint8), "b": np.zeros(10, np.uint8), "big": np.zeros(500, np.uint8),
         "c": np.zeros(3, np.uint8)}
    write_aero(tmp_path / "s.aero", t, max_shard_bytes=100)
    with codec.open(tmp_path / "s.aero") as r:
        shard = {n: r.tensors[n].extra["shard_id"] for n in t}
        assert shard == {"a": 0, "b": 0, "big": 1, "c": 2}
        assert r.tensors["b"].extra["data_off"] == 64  # tensors 64-aligned inside a shard
        assert [c.name for c in r.find_chunks(b"WTSH")] == ["weights.shard0", "weights.shard1", "weights.shard2"]
        assert all(c.offset % 16 == 0 for c in r.chunks)


def test_an_empty_tensor_never_starts_a_shard(tmp_path):
    t = {"a": np.ones(100, np.uint8), "empty": np.zeros((0, 3), np.float32), "b": np.ones(100, np.uint8)}
    p = tmp_path / "e.aero"
    write_aero(p, t, uuid=bytes(16), max_shard_bytes=120)
    with codec.open(p) as r:
        shards = [c for c in r.chunks if c.fourcc == b"WTSH"]
        assert len(shards) == 2 and all(c.length for c in shards)
        assert r.tensors["empty"].extra["shard_id"] == r.tensors["a"].extra["shard_id"]
        assert r.tensor("empty").shape == (0, 3) and r.validate(full=True).ok


def test_small_and_large_tensors_mixed_hash_to_what_the_file_holds(tmp_path, monkeypatch):
    # small one-piece tensors are hashed at once and fed to the shard's hashers in batches, big
    # ones piece by piece: every chunk, page and tensor hash must still be that of the bytes
    import blake3

    from codec.formats.aero import writer as aero  # (where the writer reads _GATHER)
    monkeypatch.setattr(aero, "_GATHER", 4096)  # several batches, flushed around big tensors
    rng = np.random.default_rng(5)
    model = {}
    for i in range(300):
        n = [0, 1, 3, 700, 20_000, 300_000][i % 6] if i % 50 else 2_000_000
        model[f"t{i}"] = rng.integers(0, 255, n, dtype=np.uint8).view(np.uint8) if i % 2 else \
            rng.standard_normal(n // 4 or 1).astype(np.float32)
    model["streamed"] = TensorSpec(lambda: iter([b"\x01" * 10, b"\x02" * 6]), np.uint8, (16,))
    p = tmp_path / "mix.aero"
    write_aero(p, model, max_shard_bytes=8 << 20, page_hashes=True)
    with codec.open(p) as r:
        rep = r.validate(full=True, progress=False)
        assert rep.ok, rep.violations[:3]
        for name in ("t1", "t4", "t50", "t299", "streamed"):
            data = np.ascontiguousarray(r.tensor(name)).tobytes()
            assert r.tensors[name].extra["hash_b3"] == blake3.blake3(data).hexdigest()


def test_a_tensor_read_unverified_is_still_verified_when_asked(tmp_path):
    """The quick path of a plain tensor (issue 35) keeps every check: a tensor first read with
    verify=False is hashed on its first verified read; a wrong byte is the IntegrityError at
    that tensor's offset; a closed reader refuses tensor() by name."""
    from codec import errors as E
    p = str(tmp_path / "m.aero")
    codec.write(p, {"a": np.arange(4, dtype=np.float32), "b": np.arange(3, dtype=np.int64)}, format="aero",
                progress=False)
    with codec.open(p) as r:
        off = r.tensors["b"].offset
    data = bytearray(open(p, "rb").read())
    data[off] ^= 1
    open(p, "wb").write(bytes(data))
    r = codec.open(p)
    assert r.tensor("a").tolist() == [0, 1, 2, 3] and r.tensor("a").flags.writeable is False
    assert r.tensor("b", verify=False)[0] == 1 and r.tensor("b", verify=False)[0] == 1
    for _ in range(2):
        with pytest.raises(E.IntegrityError) as ei:
            r.tensor("b")
        assert ei.value.offset == off and "hash_b3" in ei.value.path
    r.close()
    with pytest.raises(E.UsageError, match=r"tensor\(\): the aero reader of .* is closed"):
        r.tensor("a")
