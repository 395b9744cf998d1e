"""File-level properties of the OINF writer and reader."""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, strategies as st

import codec
from codec import errors as E
from codec.formats.oinf import (
    NP_DTYPES,
    Bitset,
    OinfReader,
    ScalarValue,
    TensorSpec,
    UninitializedTensor,
    validate_file,
    write_oinf_file,
)
from codec.schemas import oinf as S
from codec.schemas.oinf import Rule

from .conftest import vectors_dir
from .test_conformance import VERDICTS

names = st.text(st.sampled_from(S.NAME_CHARS), min_size=1, max_size=12)
TYPES = list(NP_DTYPES)


@st.composite
def tensors(draw):
    tag = draw(st.sampled_from(TYPES))
    dt = NP_DTYPES[tag]
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=4)))
    if draw(st.integers(0, 5)) == 0:
        return UninitializedTensor(S.TYPE_NAMES[tag], shape)
    n = int(np.prod(shape)) if shape else 1
    a = np.frombuffer(draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize)), dtype=dt).reshape(shape)
    if dt == np.bool_:
        a = a.view(np.uint8) % 2 == 1
    if draw(st.booleans()) and dt.itemsize > 1:
        a = a.astype(dt.newbyteorder(">"))
    return TensorSpec(a) if draw(st.booleans()) else a


@st.composite
def meta_values(draw):
    kind = draw(st.sampled_from(["scalar", "bool", "str", "bitset", "ndarray"]))
    if kind == "scalar":
        tag = draw(st.sampled_from([t for t in TYPES if t != S.ValueType.BOOL]))
        dt = NP_DTYPES[tag]
        raw = draw(st.binary(min_size=dt.itemsize, max_size=dt.itemsize))
        v = np.frombuffer(raw, dt)[0].item()
        if isinstance(v, float) and v != v:
            v = 0.0  # NaN != NaN: compared separately below
        return ScalarValue(v, S.TYPE_NAMES[tag])
    if kind == "bool":
        return draw(st.booleans())
    if kind == "str":
        return draw(names)
    if kind == "bitset":
        return Bitset(tuple(draw(st.lists(st.booleans(), max_size=70))))
    a = draw(tensors())
    a = np.zeros(3, np.int16) if isinstance(a, UninitializedTensor) else (a.array if isinstance(a, TensorSpec) else a)
    return a


def _expected_meta(v):
    if isinstance(v, ScalarValue):
        return v.value
    return v


@given(st.dictionaries(names, st.integers(0, 2**64 - 1), max_size=4), st.dictionaries(names, meta_values(), max_size=5),
       st.dictionaries(names, tensors(), max_size=6))
def test_oinf_roundtrip_any_model(sizevars, metadata, ts):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.oinf")
        write_oinf_file(p, sizevars=sizevars, metadata=metadata, tensors=ts)
        first = open(p, "rb").read()
        write_oinf_file(p, sizevars=sizevars, metadata=metadata, tensors=ts)
        assert open(p, "rb").read() == first
        with codec.open(p) as r:
            assert r.sizevars == sizevars and list(r.sizevars) == sorted(sizevars, key=str.encode)
            md = r.metadata
            assert set(md) == set(metadata)
            for k, v in metadata.items():
                got = md[k]
                if isinstance(v, np.ndarray):
                    want = v.astype(v.dtype.newbyteorder("<"))
                    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
                elif isinstance(v, ScalarValue):
                    assert r.meta_types[k] == v.dtype and got == v.value
                else:
                    assert got == v
            assert list(r.tensors) == list(ts)  # (the tensors in the order written: issue 32 §5)
            for n, t in ts.items():
                got = r.tensor(n)
                t = t.array if isinstance(t, TensorSpec) else t
                if isinstance(t, UninitializedTensor):
                    assert got == t
                else:
                    assert got.dtype == t.dtype.newbyteorder("<") and got.shape == t.shape
                    assert got.tobytes() == np.ascontiguousarray(t).astype(got.dtype).tobytes()
                    assert r.tensors[n].offset % 8 == 0
            assert r.validate(full=True).ok


def test_every_rule_is_exercised():
    covered = {rule for _, _, rule in VERDICTS["oinf"].values()}
    assert covered | {Rule.PADDING, Rule.TRUNCATED, Rule.VALUE_FLAGS, Rule.BOOL, Rule.TENSOR_FLAGS, Rule.NDIM,
                      Rule.BITSET, Rule.NDARRAY, Rule.DIM} == set(Rule)


def with_dims(tmp_path, dims) -> bytes:
    """A one-tensor file whose tensor has ``dims`` and 0 data bytes."""
    from codec.formats.oinf import TENSOR
    p = tmp_path / "d.oinf"
    write_oinf_file(p, tensors={"t": np.zeros((3, 1, 1), np.float32)})
    blob = p.read_bytes()
    with OinfReader(blob) as r:
        (off, e), = TENSOR.iter_parse(r._src.buf, r.header["offset_tensors"], 1, "tensors")
    old = TENSOR.build(e)
    new = TENSOR.build(dict(e, dims=dims, data_nbytes=0))
    assert len(new) == len(old)
    return blob[:off] + new + blob[off + len(old):]


@pytest.mark.parametrize("dims", [[2**63, 0, 1], [2**62, 2**62, 0], [0, 2**40, 2**40]])
def test_a_shape_numpy_cannot_make_is_a_range_error(tmp_path, dims):
    """0 bytes, so every size check passes, yet numpy refuses the shape (OINF fuzz findings)."""
    with pytest.raises(E.RangeError) as ei:
        OinfReader(with_dims(tmp_path, dims))
    assert ei.value.rule == Rule.DIM


def _good(tmp_path):
    p = tmp_path / "g.oinf"
    write_oinf_file(p, sizevars={"N": 3}, metadata={"b": True, "bs": Bitset((1, 0, 1)), "nd": [1, 2]},
                    tensors={"t": np.arange(3, dtype=np.float32), "z": np.ones(2, bool)})
    return bytearray(p.read_bytes())


CASES = [
    (Rule.PADDING, lambda b, r: b.__setitem__(slice(69, 70), b"\x01")),
    (Rule.VALUE_FLAGS, lambda b, r: b.__setitem__(slice(*_meta_field(r, "b", "value_flags", 1)), b"\x01")),
    (Rule.BOOL, lambda b, r: b.__setitem__(slice(*_blob(r, "b")), b"\x02")),
    (Rule.BITSET, lambda b, r: b.__setitem__(slice(*_blob(r, "bs", 4, 1)), b"\x07")),
    (Rule.TENSOR_FLAGS, lambda b, r: b.__setitem__(slice(*_tensor_field(r, "t", "flags", 1)), b"\x03")),
    (Rule.NDIM, lambda b, r: b.__setitem__(slice(*_tensor_field(r, "t", "ndim", 1)), b"\x50")),
    (Rule.NDARRAY, lambda b, r: b.__setitem__(slice(*_blob(r, "nd", 0, 1)), b"\x0d")),
]


@pytest.mark.parametrize("rule,mutate", CASES)
def test_rule_fires(tmp_path, rule, mutate):
    blob = _good(tmp_path)
    with OinfReader(bytes(blob)) as r:
        mutate(blob, r)
    with pytest.raises(E.FormatError):
        OinfReader(bytes(blob))
    assert any(v.rule == rule for v in validate_file(bytes(blob)).errors), [str(v) for v in validate_file(bytes(blob)).violations]


def _entries(r, table):
    from codec.formats.oinf import META, TENSOR
    rec = META if table == "metadata" else TENSOR
    h = r.header
    start, n = (h["offset_metadata"], h["n_metadata"]) if table == "metadata" else (h["offset_tensors"], h["n_tensors"])
    return rec, list(rec.iter_parse(r._src.buf, start, n, table))


def _meta_field(r, key, field, n):
    rec, rows = _entries(r, "metadata")
    off, e = next((o, e) for o, e in rows if e["key"] == key.encode())
    a = off + rec.field_offsets(e)[field]
    return a, a + n


def _tensor_field(r, name, field, n):
    rec, rows = _entries(r, "tensors")
    off, e = next((o, e) for o, e in rows if e["name"] == name.encode())
    a = off + rec.field_offsets(e)[field]
    return a, a + n


def _blob(r, key, skip=0, n=1):
    rec, rows = _entries(r, "metadata")
    e = next(e for o, e in rows if e["key"] == key.encode())
    return e["value_offset"] + skip, e["value_offset"] + skip + n


def test_every_truncation_and_flip_is_typed():
    seeds = [p.read_bytes() for p in sorted(vectors_dir("oinf").glob("*.oinf")) if p.stat().st_size <= 1400]
    assert seeds
    for blob in seeds:
        for cut in range(len(blob)):
            with pytest.raises(E.FormatError):
                OinfReader(blob[:cut])
        b = bytearray(blob)
        for i in range(min(len(b), 400)):
            b[i] ^= 0x41
            try:
                with OinfReader(bytes(b)) as r:
                    r.metadata
                    for n in r.tensors:
                        try:
                            got = r.tensor(n)
                            if isinstance(got, np.ndarray):
                                got.tobytes()
                        except E.FormatError:
                            pass
            except E.FormatError:
                pass
            validate_file(bytes(b))
            b[i] ^= 0x41


@pytest.mark.parametrize("kw,msg", [
    (dict(tensors={"a/b": np.zeros(1)}), "A-Za-z0-9"), (dict(tensors={"": np.zeros(1)}), "non-empty"),
    (dict(sizevars={"n": -1}), "0..2"), (dict(metadata={"s": "with space"}), "A-Za-z0-9"),
    (dict(tensors={"c": np.zeros(2, np.complex64)}), "numeric"), (dict(metadata={"o": object()}), "no OINF"),
])
def test_writer_refuses_what_oinf_cannot_hold(tmp_path, kw, msg):
    with pytest.raises(codec.UsageError, match=msg):
        write_oinf_file(tmp_path / "x.oinf", **kw)
    assert not list(tmp_path.iterdir())


def test_lazy_tensors_are_loaded_one_at_a_time(tmp_path):
    from codec.io.writer_io import LazyTensor
    live = []

    def loader(i):
        def load():
            live.append(i)
            assert len(live) - len(done) == 1, "a second lazy tensor is alive"
            return np.full((64, 64), i, np.float32)
        return load
    done = []
    ts = {f"t{i}": LazyTensor(np.float32, (64, 64), loader(i)) for i in range(5)}
    import codec.io.tensor_writer as O  # (the streaming writer looks array_pieces up)
    orig = O.array_pieces

    def pieces(a):
        gen = orig(a)

        def run():
            yield from gen()
            done.append(1)
        return run
    O.array_pieces = pieces
    try:
        write_oinf_file(tmp_path / "l.oinf", tensors=ts)
    finally:
        O.array_pieces = orig
    with codec.open(tmp_path / "l.oinf") as r:
        assert [float(r.tensor(f"t{i}")[0, 0]) for i in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(codec.UsageError, match="declared"):
        write_oinf_file(tmp_path / "b.oinf", tensors={"x": LazyTensor(np.float32, (2,), lambda: np.zeros(3, np.float32))})


def test_codec_write_and_open_with_format_oinf(tmp_path):
    codec.write(tmp_path / "w.oinf", {"a": np.arange(4, dtype=np.int16)}, sizevars={"N": 4}, metadata={"m": "x"})
    with codec.open(tmp_path / "w.oinf") as r:
        assert r.sizevars == {"N": 4} and r.metadata == {"m": "x"} and r.tensor("a").tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("value", [1e300, -3.5e38, [1.0, 1e39], np.float64(1e300)])
def test_a_float_past_f32_is_refused_not_written_as_infinity(tmp_path, value):
    with pytest.raises(codec.UsageError, match="past float32's range"):
        write_oinf_file(tmp_path / "x.oinf", metadata={"x": value})
    assert not list(tmp_path.iterdir())


def test_a_big_float_given_as_f64_reads_back_exactly(tmp_path):
    write_oinf_file(tmp_path / "x.oinf", metadata={"x": ScalarValue(1e300, "f64"), "inf": float("inf")})
    with codec.open(tmp_path / "x.oinf") as r:
        assert r.metadata["x"] == 1e300 and r.metadata["inf"] == float("inf")


def test_size_variables_stay_size_variables_when_converted_to_oinf(tmp_path):
    """OINF -> OINF keeps its size variables as such (they were written as integer metadata,
    which diff then called added); to a target without them they are integer metadata; a
    sizevars= writer option wins over the source's; unset and drop reach them too."""
    src = str(tmp_path / "s.oinf")
    write_oinf_file(src, sizevars={"D": 64, "V": 256}, metadata={"act": "relu"},
                    tensors={"w": np.ones((2, 3), np.float32)})
    out = codec.convert(src, str(tmp_path / "t.oinf"))
    with codec.open(out) as r:
        assert (r.sizevars, r.metadata) == ({"D": 64, "V": 256}, {"act": "relu"})
    assert codec.diff(src, out).equal
    with codec.open(codec.convert(src, str(tmp_path / "t.aero"))) as r:
        assert r.metadata == {"act": "relu", "D": 64, "V": 256}
    with codec.open(codec.convert(src, str(tmp_path / "o.oinf"), sizevars={"D": 8})) as r:
        assert r.sizevars == {"D": 8, "V": 256}
    with codec.open(codec.convert(src, str(tmp_path / "u.oinf"), unset_metadata=["V"])) as r:
        assert (r.sizevars, r.metadata) == ({"D": 64}, {"act": "relu"})
    with codec.open(codec.convert(src, str(tmp_path / "d.oinf"), drop_metadata=True)) as r:
        assert (r.sizevars, r.metadata) == ({}, {})
