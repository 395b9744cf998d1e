"""What a writer accepts, its reader accepts: over each writer's whole input domain, the writer
either refuses up front with a UsageError (writing nothing), or the file reads back identical
and validates with every hash."""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import codec
from codec.formats.aeroset import write_aeroset

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_, np.complex64, ">f4", ">i8", "<U3", "V4"]

plain = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=8)
names = st.one_of(plain, st.text(min_size=0, max_size=12), st.sampled_from(["w", "a.b", "x" * 300, "\udc80", "", "é"]))
arrays = st.builds(
    lambda dt, shape, seed: _array(dt, shape, seed),
    st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=3), st.integers(0, 9))
meta_values = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.booleans(), st.text(max_size=8),
                        st.none(), st.lists(st.integers(0, 9), max_size=3))
metadata = st.dictionaries(st.one_of(plain, st.text(max_size=8), st.integers(0, 3)), meta_values, max_size=3)


def _array(dt, shape, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dt)
    raw = rng.integers(0, 256, int(np.prod(shape)) * dt.itemsize, dtype=np.uint8).tobytes()
    a = np.frombuffer(raw, dtype=dt).reshape(shape).copy()
    if dt.kind == "b":
        a = a.view(np.uint8) % 2 == 1
    return a


def _same(got, want) -> bool:
    want = np.asarray(want)
    if got.shape != want.shape and got.size == want.size == 1:
        want = want.reshape(got.shape)
    if got.shape != want.shape:
        return False
    w = want.astype(want.dtype.newbyteorder("="))
    return got.dtype == w.dtype and got.tobytes() == w.tobytes()


def _write(fmt, path, tensors, meta):
    if fmt == "aeroset":
        return write_aeroset(path, tensors)
    kw = {"metadata": meta} if fmt in ("aero", "mag", "oinf") else {}
    if fmt == "stb":
        return codec.write(path, list(tensors.values()), format="stb")
    if fmt == "aero":
        kw["uuid"] = bytes(16)
    return codec.write(path, tensors, format=fmt, **kw)


@pytest.mark.parametrize("fmt", ["aero", "aeroset", "mag", "oinf", "stb"])
@settings(max_examples=int(os.environ.get("WD_EXAMPLES", 60)), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_what_a_writer_accepts_its_reader_reads_back(fmt, data):
    tensors = data.draw(st.dictionaries(names, arrays, max_size=3), "tensors")
    meta = data.draw(metadata, "metadata")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "set" if fmt == "aeroset" else f"m.{fmt}")
        try:
            written = _write(fmt, path, tensors, meta)
        except codec.UsageError:
            event("refused")
            assert os.listdir(d) == []
            return
        event("written")
        kw = {}
        if fmt == "stb" and getattr(written, "shape_table", None):
            kw["shape_table"] = written.shape_table
        rep = codec.validate(path, full=True, **kw)
        assert rep.ok, [str(v) for v in rep.violations]
        with codec.open(path, **kw) as r:
            want = dict(enumerate(tensors.values())) if fmt == "stb" else tensors
            assert len(r.tensors) == len(want)
            for key, a in want.items():
                name = next(iter(k for k in r.tensors if str(k) == str(key))) if fmt == "stb" else key
                assert _same(r.tensor(name), a), (key, a.dtype, a.shape)
