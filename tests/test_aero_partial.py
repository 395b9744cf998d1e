"""AERO files opened from byte ranges only (how a remote part is opened): the same outcome as
opening the whole file — same tensors, or the same typed error — with at most three reads,
never outside the file, whatever the file and however little the first read brings."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from codec import errors as E
from codec.formats import aero as A
from codec.formats.aero import AeroReader, open_partial, write_aero

from .conftest import vectors_dir

VDIR = vectors_dir("aero")
FILES = sorted(VDIR.glob("*.aero")) + sorted((VDIR / "invalid").glob("*.aero"))
PREFIXES = [64, 100, 200, 1024, A.OPEN_PREFIX]


def _outcome(make):
    try:
        r = make()
    except E.ModelcodecError as e:
        return ("error", type(e).__name__, getattr(e, "rule", None))
    with r:
        try:
            return ("ok", sorted((n, t.dtype.str, t.shape, t.offset, t.nbytes)
                                 for n, t in ((n, r.tensors[n]) for n in r.tensors)))
        except E.ModelcodecError as e:
            return ("error at first tensor", type(e).__name__, getattr(e, "rule", None))


def _partial(data: bytes, prefix: int, log: list):
    def read(spans):
        log.append(spans)
        for a, n in spans:
            assert 0 <= a and 0 <= n and a + n <= len(data), (a, n, len(data))
        return [data[a:a + n] for a, n in spans]
    return lambda: open_partial("mem", len(data), read, prefix=prefix)


def _same(data: bytes, prefix: int):
    log: list = []
    assert _outcome(_partial(data, prefix, log)) == _outcome(lambda: AeroReader(data))
    assert len(log) <= 3


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_vectors_open_the_same_from_ranges(path, prefix):
    _same(path.read_bytes(), prefix)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(FILES), st.sampled_from(PREFIXES), st.data())
def test_mutated_files_open_the_same_from_ranges(path, prefix, data):
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "set"]))
        if kind == "cut" and len(raw) > 1:
            del raw[data.draw(st.integers(1, len(raw) - 1)):]
        elif raw:
            i = data.draw(st.integers(0, min(len(raw) - 1, 2000)))  # the control region, mostly
            raw[i] = data.draw(st.integers(0, 255)) if kind == "set" else raw[i] ^ (1 << data.draw(st.integers(0, 7)))
    _same(bytes(raw), prefix)


def test_only_the_control_region_and_metadata_are_read(tmp_path):
    """A big file: the first read brings header, TOC, string table and metadata; tensor bytes
    are never read, and asking for them is a NotLocalError, not wrong bytes."""
    p = tmp_path / "m.aero"
    write_aero(p, {f"w{i}": np.full((512, 512), i, np.float32) for i in range(8)})
    data = p.read_bytes()
    log: list = []
    with _partial(data, A.OPEN_PREFIX, log)() as r:
        assert sorted(r.tensors) == [f"w{i}" for i in range(8)]
        assert r.validate().ok
        with pytest.raises(E.NotLocalError):
            r.tensor("w3")
        with pytest.raises(E.UsageError):
            r.validate(full=True)
    assert len(log) == 1 and log[0] == [(0, A.OPEN_PREFIX)]
    log.clear()
    with _partial(data, 64, log)() as r:  # header only at first: two more reads, no weights
        assert len(r.tensors) == 8
    assert len(log) == 3 and sum(n for spans in log for _, n in spans) < 64 * 1024


def test_the_interface_other_files_read_a_part_through(tmp_path):
    """What AEROSET uses of a part: its index rows, the bytes the reader holds, hash checks."""
    import blake3
    p = tmp_path / "m.aero"
    write_aero(p, {f"w{i}": np.full((512, 512), i, np.float32) for i in range(3)})
    data = p.read_bytes()
    with _partial(data, A.OPEN_PREFIX, [])() as r:
        t = r.tensors["w1"]
        assert r.size == len(data) and sorted(r.rows) == ["w0", "w1", "w2"]
        assert r.entries.value(r.rows["w1"], "data_len") == t.nbytes
        assert r.held(0, 16) == data[:16] and r.held(t.offset, t.nbytes) is None  # (not read: not handed out)
        r.check_hash_b3("w1", blake3.blake3(data[t.offset:t.offset + t.nbytes]).hexdigest())
        with pytest.raises(E.IntegrityError) as ei:
            r.check_hash_b3("w1", "0" * 64)
        assert ei.value.rule == "AERO-HASH-B3"
