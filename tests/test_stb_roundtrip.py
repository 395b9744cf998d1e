"""File-level properties of the STB writer and reader."""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, strategies as st

import codec
from codec import errors as E
from codec.engine.records import record_of
from codec.formats.stb import StbReader, StbTensor, validate_file, write_stb
from codec.schemas import stb as S
from codec.schemas.stb import Rule

from .conftest import vectors_dir
from .test_conformance import VERDICTS

DTYPES = [np.dtype("<f4"), np.dtype("<f2"), np.dtype("i1"), np.dtype("<i4")]


@st.composite
def tensors(draw):
    dt = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=8)))
    n = int(np.prod(shape)) if shape else 1
    a = np.frombuffer(draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize)), dtype=dt).reshape(shape)
    if draw(st.booleans()) and dt.itemsize > 1:
        a = a.astype(dt.newbyteorder(">"))
    return StbTensor(a, layout=draw(st.sampled_from(list(S.Layout))))


@given(st.lists(tensors(), max_size=10))
def test_stb_roundtrip_any_file(ts):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.stb")
        out = write_stb(p, ts)
        first = open(p, "rb").read()
        write_stb(p, ts)
        assert open(p, "rb").read() == first
        with StbReader(p, shape_table=out.shape_table) as r:  # strict: everything 64-aligned
            assert len(r.tensors) == len(ts)
            for i, t in enumerate(ts):
                got = r.tensor(i)
                assert got.shape == t.array.shape and got.dtype == t.array.dtype.newbyteorder("<")
                assert got.tobytes() == np.ascontiguousarray(t.array).astype(got.dtype).tobytes()
                assert r.tensors[str(i)].offset % 64 == 0
            assert r.validate().ok and not r.validate().warnings


def test_zero_and_256_tensors(tmp_path):
    write_stb(tmp_path / "z.stb", [])
    with codec.open(tmp_path / "z.stb") as r:
        assert len(r.tensors) == 0 and r.header["data_offset"] == 64 == r.header["file_size"]
    many = [np.full(3, i - 128, np.int8) for i in range(256)]
    write_stb(tmp_path / "m.stb", many)
    with codec.open(tmp_path / "m.stb") as r:
        assert [int(r.tensor(i)[0]) for i in range(256)] == [i - 128 for i in range(256)]
    with pytest.raises(codec.UsageError, match="at most 256"):
        write_stb(tmp_path / "x.stb", many + [many[0]])


@pytest.mark.parametrize("bad,msg", [([np.zeros(2, np.float64)], "float32"), ([np.zeros((1,) * 9, np.int8)], "rank"),
                                     ([np.zeros(2, np.uint8)], "float32")])
def test_writer_refuses_what_stb_cannot_hold(tmp_path, bad, msg):
    with pytest.raises(codec.UsageError, match=msg):
        write_stb(tmp_path / "x.stb", bad)
    assert not list(tmp_path.iterdir())


def test_big_endian_input_is_converted(tmp_path):
    a = np.arange(16, dtype=">f4")
    write_stb(tmp_path / "b.stb", [a])
    with codec.open(tmp_path / "b.stb") as r:
        assert r.tensor(0).tolist() == list(range(16))


def test_every_rule_is_exercised():
    covered = {rule for _, _, rule in VERDICTS["stb"].values()} | {Rule.COUNT, Rule.SHAPE}
    assert covered == set(Rule)


def over_256() -> bytes:
    """A header saying 257 tensors."""
    head = record_of(S.Header).build({"tensor_count": 257, "data_offset": 64 * 130, "file_size": 64 * 130})
    return head + bytes(64 * 130 - len(head))


def test_tensor_count_over_256_is_a_limit_error():
    with pytest.raises(E.LimitError) as ei:
        StbReader(over_256())
    assert ei.value.rule == Rule.COUNT


def test_every_truncation_and_flip_is_typed():
    seeds = [p.read_bytes() for p in sorted(vectors_dir("stb").glob("v*.stb")) if p.stat().st_size <= 2048]
    for blob in seeds:
        for cut in range(len(blob)):
            with pytest.raises(E.FormatError):
                StbReader(blob[:cut], strict=False)
        b = bytearray(blob)
        for i in range(min(len(b), 160)):
            b[i] ^= 0x81
            for strict in (True, False):
                try:
                    with StbReader(bytes(b), strict=strict) as r:
                        for n in r.tensors:
                            try:
                                r.tensor(n).tobytes()
                            except E.FormatError:
                                pass
                except E.FormatError:
                    pass
                validate_file(bytes(b), strict=strict)
            b[i] ^= 0x81


@pytest.mark.parametrize("shape", [(0, 2**32, 2**32, 2**32), (0, 2**63, 1, 1)])
def test_a_shape_table_entry_numpy_cannot_make_is_a_typed_error(shape):
    """Found in review by the fuzz helper: such an entry used to open fine and crash in reshape."""
    with pytest.raises(E.RangeError) as ei:
        StbReader(vectors_dir("stb") / "v12_seed_rank4_rank5_shape_table.stb", shape_table={0: shape, 1: (1, 2, 3, 4, 5)})
    assert ei.value.rule == Rule.SIZE
    with pytest.raises(codec.UsageError, match="negative"):
        StbReader(vectors_dir("stb") / "v12_seed_rank4_rank5_shape_table.stb", shape_table={0: (-1, 2, 2, 2)})


def test_codec_write_returns_the_path_for_stb_as_for_every_format(tmp_path):
    """codec.write returns the path written (a str) for every format; STB's also carries the
    shape table its rank > 3 tensors need to be read back."""
    import pickle
    a = np.arange(16, dtype=np.float32).reshape(1, 2, 2, 4)
    out = codec.write(str(tmp_path / "m.stb"), [a])
    assert isinstance(out, str) and out == str(tmp_path / "m.stb") and os.path.isfile(out)
    assert out.shape_table == [(1, 2, 2, 4)]
    again = pickle.loads(pickle.dumps(out))
    assert again == out and again.shape_table == out.shape_table
    with StbReader(out, shape_table=out.shape_table) as r:
        assert np.array_equal(r.tensor(0), a)
