"""Caller mistakes are UsageErrors with a clear message, never AttributeError, KeyError,
TypeError, UnicodeError or ValueError from deep inside; nothing is written."""
import os

import numpy as np
import pytest

import codec
from codec.formats.aeroset import write_aeroset

A = np.zeros(4, np.float32)
MASKED = np.ma.masked_array(A, mask=[1, 0, 0, 0])


def _write(fmt, path, tensors, **kw):
    if fmt == "aeroset":
        return write_aeroset(path, tensors, **kw)
    if fmt == "stb":
        return codec.write(path, list(tensors.values()), format="stb", **kw)
    return codec.write(path, tensors, format=fmt, **kw)


MISTAKES = {
    "surrogate name": ({"a\udc80": A}, {}, "Unicode|A-Za-z0-9"),
    "non-str name": ({7: A}, {}, "str|A-Za-z0-9|name"),
    "masked array": ({"w": MASKED}, {}, "masked array"),
    "ragged list": ({"w": [[1, 2], [3]]}, {}, "cannot make an array|inhomogeneous|no dtype|numeric|stores"),
    "non-str metadata key": ({"w": A}, {"metadata": {1: 2}}, "key|name"),
    "surrogate metadata key": ({"w": A}, {"metadata": {"k\ud800": 2}}, "Unicode|A-Za-z0-9|JSON"),
}
FORMATS = ["aero", "aeroset", "mag", "oinf", "stb"]


def _applies(fmt, mistake) -> bool:
    """STB has no names (ids are positions) and no metadata; write_aeroset takes no metadata."""
    if fmt == "stb":
        return mistake in ("masked array", "ragged list")
    return not (fmt == "aeroset" and "metadata" in mistake)


@pytest.mark.parametrize("fmt,mistake", [(f, m) for f in FORMATS for m in MISTAKES if _applies(f, m)])
def test_writer_mistakes_are_usage_errors(tmp_path, fmt, mistake):
    tensors, kw, message = MISTAKES[mistake]
    target = tmp_path / ("set" if fmt == "aeroset" else f"x.{fmt}")
    with pytest.raises(codec.UsageError, match=message):
        _write(fmt, target, tensors, **kw)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("bad", [123, None, 1.5, object()])
def test_open_and_validate_of_a_non_source_are_usage_errors(bad):
    with pytest.raises(codec.UsageError, match="path or a bytes-like"):
        codec.open(bad)
    with pytest.raises(codec.UsageError, match="path or a bytes-like"):
        codec.validate(bad)


@pytest.mark.parametrize("fmt", ["aero", "mag", "oinf", "stb", "aeroset"])
def test_a_closed_reader_says_so(tmp_path, fmt):
    target = tmp_path / ("set" if fmt == "aeroset" else f"x.{fmt}")
    _write(fmt, target, {"w": A})
    r = codec.open(target)
    name = next(iter(r.tensors))
    kept = r.tensor(name)
    r.close()
    with pytest.raises(codec.UsageError, match="is closed"):
        r.tensor(name)
    with pytest.raises(codec.UsageError, match="is closed"):
        r[name]
    with pytest.raises(codec.UsageError, match="is closed"):
        r.validate()
    assert kept.tobytes() == A.tobytes()  # arrays handed out before close stay valid


def test_options_reach_the_detected_format(tmp_path):
    """STB's shape_table goes to the STB reader (it used to be routed to AEROSET); an option the
    detected format does not take is a UsageError naming the format and the option."""
    p = tmp_path / "x.stb"
    written = codec.write(p, [np.zeros((2, 1, 2, 2), np.float32)], format="stb")
    with codec.open(p, shape_table=written.shape_table) as r:
        assert r.tensor(0).shape == (2, 1, 2, 2)
    assert codec.validate(p, full=True, shape_table=written.shape_table).ok
    a = tmp_path / "x.aero"
    codec.write(a, {"w": A}, format="aero")
    for call in (lambda: codec.open(a, shape_table=[]), lambda: codec.validate(a, shape_table=[])):
        with pytest.raises(codec.UsageError, match="aero reader takes no option 'shape_table'"):
            call()
    codec.write(tmp_path / "set" / "m.aeroset.json", {"w": A})
    with pytest.raises(codec.UsageError, match="aeroset reader takes no option 'shape_table'"):
        codec.open(tmp_path / "set", shape_table=[])
