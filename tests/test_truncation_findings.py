"""A truncated file is one finding: what merely follows from the missing bytes (every other
region past the end, a shard that cannot be used, padding that is really the cut-off chunk) is
attached to it as consequences, not listed on its own -- for every format."""
import numpy as np
import pytest

import codec
from codec import errors as E

TENSORS = {"w": np.arange(1000, dtype=np.float32), "b": np.ones(300, np.int32), "c": np.zeros((20, 20), np.float16)}


def _write(tmp_path, fmt) -> bytes:
    p = tmp_path / f"m.{fmt}"
    tensors = {i: a for i, a in enumerate(TENSORS.values())} if fmt == "stb" else TENSORS
    codec.write(str(p), tensors, format=fmt)
    return p.read_bytes()


@pytest.mark.parametrize("fmt", ["aero", "mag", "oinf", "stb"])
@pytest.mark.parametrize("keep", [0.5, 0.9, 0.999])
def test_a_file_cut_inside_its_data_is_one_finding(tmp_path, fmt, keep):
    data = _write(tmp_path, fmt)
    cut = tmp_path / f"cut.{fmt}"
    cut.write_bytes(data[:int(len(data) * keep)])
    rep = codec.validate(str(cut), full=True, format=fmt)
    assert not rep.ok
    assert len(rep.errors) == 1, [str(e) for e in rep.errors]
    (err,) = rep.errors
    assert isinstance(err, (E.TruncatedError, E.BoundsError))
    # what follows from it is still there, as data, with its own rule and path
    for c in err.consequences:
        assert isinstance(c, E.TruncatedError) and c.rule and c.path
    assert err.as_dict().get("consequences", []) == [c.as_dict() for c in err.consequences]
    if err.consequences:
        assert "follow" in str(err)


def test_reading_a_tensor_of_a_cut_shard_raises_the_cut_itself(tmp_path):
    data = _write(tmp_path, "aero")
    cut = tmp_path / "cut.aero"
    cut.write_bytes(data[:len(data) // 2])
    rep = codec.validate(str(cut), full=True)
    (err,) = rep.errors
    with _lenient(str(cut)) as r:
        with pytest.raises(E.TruncatedError) as ei:
            r.tensor("w")
    assert ei.value.rule == err.rule == "AERO-CHUNK-BOUNDS"


def _lenient(path):
    from codec.formats.aero import AeroReader
    return AeroReader(path, _collect=True)


def test_two_truncated_parts_of_a_set_stay_two_findings(tmp_path):
    from codec.formats.aeroset import write_aeroset
    d = tmp_path / "set"
    write_aeroset(str(d), {"a": np.arange(4000, dtype=np.float32), "b": np.arange(4000, dtype=np.int32)},
                  max_shard_bytes=16_000, max_part_shards=1)
    parts = sorted(p for p in d.iterdir() if p.name.endswith(".aero") and p.name != "index.aero")
    assert len(parts) == 2
    for p in parts:
        p.write_bytes(p.read_bytes()[:-100])
    rep = codec.validate(str(d))
    cut = [e for e in rep.errors if isinstance(e, E.TruncatedError)]
    assert len({e.source for e in cut}) == 2
