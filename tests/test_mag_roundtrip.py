"""File-level properties of the MAG writer and reader."""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, strategies as st

import codec
from codec import errors as E
from codec.formats.mag import MagReader, validate_file, write_mag
from codec.schemas.mag import Rule

from .conftest import vectors_dir

DTYPES = [np.dtype("<f4"), np.dtype("<f2"), np.dtype("?"), np.dtype("<i4")]
keys = st.text(st.characters(min_codepoint=1, max_codepoint=0x10FFFF, blacklist_categories=("Cs",)),
               min_size=0, max_size=10)


@st.composite
def arrays(draw):
    dt = draw(st.sampled_from(DTYPES))
    rank = draw(st.one_of(st.integers(1, 8), st.sampled_from([16, 40, 64])))
    shape = [1] * rank
    for k in draw(st.lists(st.integers(0, rank - 1), max_size=3)):
        shape[k] = draw(st.integers(1, 4))
    n = int(np.prod(shape))
    raw = draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
    a = np.frombuffer(raw, dtype=dt).reshape(shape)
    if dt == np.bool_:
        a = a.view(np.uint8) % 2 == 1
    if draw(st.booleans()) and dt.itemsize > 1:
        a = a.astype(dt.newbyteorder(">"))
    return a


metas = st.dictionaries(keys, st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.booleans()),
                        max_size=6)


@given(st.dictionaries(keys, arrays(), max_size=6), metas)
def test_mag_roundtrip_any_model(tensors, metadata):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.mag")
        write_mag(p, tensors, metadata=metadata)
        first = open(p, "rb").read()
        write_mag(p, tensors, metadata=metadata)
        assert open(p, "rb").read() == first
        with codec.open(p) as r:
            assert r.format == "mag" and list(r.tensors) == list(tensors)
            assert r.metadata == {k: (int(v) if isinstance(v, bool) else v) for k, v in metadata.items()}
            for n, a in tensors.items():
                got = r.tensor(n)
                assert r.tensors[n].shape == a.shape and got.dtype == a.dtype.newbyteorder("<")
                assert got.tobytes() == np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
                assert r.tensors[n].offset % 64 == 0
            assert r.validate(full=True).ok


def _sample(tmp_path):
    p = tmp_path / "s.mag"
    write_mag(p, {"a": np.arange(10, dtype=np.float32), "b": np.ones((2, 3), np.int32), "ключ": np.zeros(3, bool)},
              metadata={"lr": 0.5, "n": 3, "flag": True})
    return p.read_bytes()


def test_a_flipped_byte_in_the_checksummed_range_is_a_checksum_error(tmp_path):
    blob = bytearray(_sample(tmp_path))
    with MagReader(bytes(blob)) as r:
        end = r.records_end
    for i in range(12, end):
        for x in (0x01, 0x80, 0xFF):
            blob[i] ^= x
            with pytest.raises(E.IntegrityError) as ei:
                MagReader(bytes(blob))
            assert ei.value.rule == Rule.CHECKSUM, (i, x, str(ei.value))
            rep = validate_file(bytes(blob))
            assert rep.errors[0].rule == Rule.CHECKSUM
            blob[i] ^= x


def test_every_truncation_and_flip_is_typed(tmp_path):
    seeds = [_sample(tmp_path)] + [p.read_bytes() for p in sorted(vectors_dir("mag").glob("valid_*.mag"))
                                   if p.stat().st_size < 4096]
    for blob in seeds:
        for cut in range(len(blob)):
            try:
                with MagReader(blob[:cut]) as r:
                    for n in r.tensors:
                        r.tensor(n).tobytes()
            except codec.FormatError:
                assert not validate_file(blob[:cut]).ok
        b = bytearray(blob)
        for i in range(min(len(b), 300)):
            b[i] ^= 0x5A
            try:
                with MagReader(bytes(b)) as r:
                    r.metadata
                    for n in r.tensors:
                        r.tensor(n).tobytes()
            except codec.FormatError:
                pass
            validate_file(bytes(b))
            b[i] ^= 0x5A


@pytest.mark.parametrize("bad,msg", [
    ({"x": np.zeros((), np.float32)}, "rank"),
    ({"x": np.zeros((0, 2), np.float32)}, "an extent of 0"),
    ({"x": np.zeros(2, np.float64)}, "float32"),
    ({"x": np.zeros(2, np.int64)}, "float32"),
])
def test_writer_refuses_what_mag_cannot_hold(tmp_path, bad, msg):
    with pytest.raises(codec.UsageError, match=msg):
        write_mag(tmp_path / "x.mag", bad)
    assert not list(tmp_path.iterdir())


def test_writer_refuses_bad_metadata(tmp_path):
    with pytest.raises(codec.UsageError, match="int, float and bool"):
        write_mag(tmp_path / "x.mag", {}, metadata={"s": "text"})
    with pytest.raises(codec.UsageError, match="MAX_KEY_LENGTH"):
        write_mag(tmp_path / "x.mag", {}, metadata={"k" * 70000: 1})
    with pytest.raises(codec.UsageError, match="i64"):
        write_mag(tmp_path / "x.mag", {}, metadata={"big": 2**63})


def test_version_100_is_told_apart(tmp_path):
    blob = bytearray(_sample(tmp_path))
    blob[4] = 100
    with pytest.raises(codec.UnsupportedVersionError, match="newer, different"):
        MagReader(bytes(blob))


def test_a_rank_past_numpys_limit_reads_without_its_size_1_axes():
    """numpy holds 64 dimensions: a MAG tensor of rank 70 (magnetron's limit is 255) comes back
    without its size-1 axes (the same bytes); its listed shape is the file's."""
    from .test_mag_rules import build, ten
    shape = [1] * 68 + [2, 2]
    at = -(-len(build([], [ten(rank=70, shape=shape)])) // 64) * 64
    blob = build([], [ten(rank=70, shape=shape, offset=at)])
    with MagReader(blob + bytes(at - len(blob)) + np.arange(4, dtype=np.float32).tobytes()) as r:
        assert r.tensors["t"].shape == tuple(shape)
        got = r.tensor("t")
        assert got.shape == (2, 2) and got.tolist() == [[0, 1], [2, 3]]
