"""What a writer accepts, its reader accepts: over each writer's whole input domain, the writer
either refuses up front with a UsageError (writing nothing), or the file reads back identical
(tensors and metadata) and validates with every hash.  Half the inputs are drawn from what the
format declares it can hold (its Capabilities): those a writer must write, never refuse."""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import codec
from codec.convert import tensor_of
from codec.formats.aeroset import write_aeroset

from .test_roundtrip_formats import domain_metadata, domain_tensors, same_metadata

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
        return write_aeroset(path, tensors, metadata=meta)
    kw = {"metadata": meta} if fmt in ("aero", "mag", "oinf") else {}
    if fmt == "stb":  # (a list: ids are positions; a mapping of ids: as given)
        return codec.write(path, tensors, format="stb")
    if fmt == "aero":
        kw["uuid"] = bytes(16)
    return codec.write(path, tensors, format=fmt, **kw)


@pytest.mark.parametrize("fmt", ["aero", "aeroset", "mag", "oinf", "stb"])
@settings(max_examples=int(os.environ.get("WD_EXAMPLES", 60)), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_what_a_writer_accepts_its_reader_reads_back(fmt, data):
    held = data.draw(st.booleans(), "what the format can hold")
    if held:
        tensors = data.draw(domain_tensors(fmt), "tensors")
        meta = data.draw(domain_metadata(fmt), "metadata")
    else:
        tensors = data.draw(st.dictionaries(names, arrays, max_size=3), "tensors")
        meta = data.draw(metadata, "metadata")
        if fmt == "stb":
            tensors = list(tensors.values())
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "set" if fmt == "aeroset" else f"m.{fmt}")
        try:
            written = _write(fmt, path, tensors, meta)
        except codec.UsageError as e:
            assert not held, f"{fmt} refused what it declares it can hold: {e}"
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
            want = dict(enumerate(tensors)) if isinstance(tensors, list) else tensors
            assert sorted(r.tensors) == sorted(str(k) for k in want)
            for key, a in want.items():
                if isinstance(a, codec.Packed):  # (quantized bytes: the same bytes, shape and codec)
                    got = tensor_of(r, str(key))
                    assert isinstance(got, codec.Packed) and (got.shape, got.quant_params) == (a.shape, a.quant_params)
                    assert got.data.tobytes() == a.data.tobytes(), key
                    continue
                assert _same(r.tensor(str(key)), a), (key, a.dtype, a.shape)
            same_metadata(fmt, r, meta if fmt != "stb" else {})
