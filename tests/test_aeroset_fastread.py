"""An AEROSET's tensor(): a name is resolved to its part and cross-checked with index.aero once;
its later reads are the part's prepared-columns path (no TensorInfo, no lookup in the set)."""
from __future__ import annotations

import numpy as np
import pytest

from codec import errors as E
from codec.formats.aeroset import reader as set_reader
from codec.formats.aeroset.reader import AeroSet
from codec.formats.aeroset.writer import write_aeroset


def _set(tmp_path):
    ts = {f"t{i}": np.arange(i, i + 16 + i, dtype=np.float32).reshape(-1) for i in range(40)}
    ts["big"] = np.arange(65536, dtype=np.int16).reshape(256, 256)
    write_aeroset(tmp_path / "s", ts, max_shard_bytes=4096, max_part_shards=1)
    return ts, tmp_path / "s"


@pytest.mark.parametrize("verify", [True, False])
def test_set_tensor_repeats_without_building_a_tensor_info(tmp_path, monkeypatch, verify):
    ts, d = _set(tmp_path)
    with AeroSet(d) as full, AeroSet(d) as s:
        assert len(s.index["parts"]) > 1
        first = {n: s.tensor(n, verify=verify) for n in ts}

        def refuse(*a, **k):
            raise AssertionError("a repeated read built a TensorInfo or looked the name up again")
        monkeypatch.setattr(set_reader, "TensorInfo", refuse)
        monkeypatch.setattr(AeroSet, "_locate", refuse)
        monkeypatch.setattr(AeroSet, "read_tensors", refuse)
        for n, want in ts.items():
            a = s.tensor(n, verify=verify)
            assert a.dtype == want.dtype and a.shape == want.shape and np.array_equal(a, want)
            assert np.array_equal(a, first[n]) and not a.flags.writeable
        monkeypatch.undo()
        got = full.read_tensors(list(ts), verify=verify)  # the full path agrees
        assert all(np.array_equal(got[n], s.tensor(n, verify=verify)) for n in ts)
        with pytest.raises(E.NotFoundError):
            s.tensor("absent")
    for n in ("t3", "t4"):  # a closed set refuses a name read before as it does any other
        with pytest.raises(E.ModelcodecError) as e:
            s.tensor(n)
        assert isinstance(e.value, E.UsageError) and s.source in str(e.value)



@pytest.mark.parametrize("verify", [True, False])
def test_set_tensor_first_read_builds_no_tensor_info(tmp_path, monkeypatch, verify):
    """A first read compares the tensor's two TIDX rows (index.aero's and its part's) field by
    field: no TensorInfo is built, neither the set's nor either file's, and nothing is listed."""
    from codec.formats.aero import reader as aero_reader
    ts, d = _set(tmp_path)

    def refuse(*a, **k):
        raise AssertionError("a first read built a TensorInfo")
    monkeypatch.setattr(set_reader, "TensorInfo", refuse)
    monkeypatch.setattr(aero_reader, "TensorInfo", refuse)
    with AeroSet(d) as s:
        for n, want in ts.items():
            a = s.tensor(n, verify=verify)
            assert a.dtype == want.dtype and a.shape == want.shape and np.array_equal(a, want)
            assert not a.flags.writeable
    monkeypatch.undo()
    with AeroSet(d) as full:  # the full path agrees
        got = full.read_tensors(list(ts), verify=verify)
        with AeroSet(d) as s:
            assert all(np.array_equal(got[n], s.tensor(n, verify=verify)) for n in ts)
