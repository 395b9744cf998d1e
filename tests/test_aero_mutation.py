"""Hostile input: every single-byte change and every truncation of real files gives a clean
read or a typed FormatError — never another exception."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import codec
from codec.formats.aero import AeroReader, validate_file, write_aero

from .conftest import vectors_dir

VDIR = vectors_dir("aero")
SEEDS = sorted(p for p in VDIR.rglob("*.aero") if "invalid" not in p.parts)


def exercise(data: bytes) -> str:
    """Everything a user can do with a reader; returns 'ok' or the error class name."""
    try:
        with AeroReader(data) as r:
            r.metadata, r.describe(), r.quant_descriptors
            for name in list(r.tensors):
                try:
                    r.tensor(name).tobytes()
                except codec.NotLocalError:
                    assert r.index_only
                except codec.FormatError:
                    pass
            r.validate(full=True)
            r.validate(control=True)
        return "ok"
    except codec.FormatError as e:
        rep = validate_file(data, full=True)  # the collecting path must not crash either
        assert not rep.ok and all(isinstance(v, codec.FormatError) for v in rep.violations)
        assert e.format == "aero" and e.rule and isinstance(e.path, str)
        return type(e).__name__


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: str(p.relative_to(VDIR)))
def test_every_truncation_is_typed(path):
    data = path.read_bytes()
    for cut in range(len(data)):
        assert exercise(data[:cut]) != "ok" or cut == len(data)


@pytest.mark.parametrize("path", SEEDS[:6], ids=lambda p: str(p.relative_to(VDIR)))
def test_every_single_byte_flip_is_typed(path):
    data = bytearray(path.read_bytes())
    for i in range(len(data)):
        for x in (0xFF, 0x01):
            data[i] ^= x
            exercise(bytes(data))
            data[i] ^= x


@given(st.data())
def test_random_mutations_of_written_files(data):
    t = {"a": np.arange(20, dtype=np.float32), "b": np.ones((3, 3), np.int16), "c": np.zeros(0, np.uint8)}
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.aero")
        write_aero(p, t, uuid=bytes(16), max_shard_bytes=data.draw(st.sampled_from([None, 64])),
                   control_integrity=True, page_hashes=True, page_size=32)
        blob = bytearray(open(p, "rb").read())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    exercise(bytes(blob))


def test_a_flip_that_validate_misses_never_changes_what_is_read(tmp_path):
    """With hashes everywhere (chunk BLAKE3, hash_b3, IHSH, PHSH), a single flipped byte is
    reported by open or validate --full, or else it changed nothing a reader returns (e.g. the
    fourcc of the IHSH entry itself, or a zstd frame detail that decodes to the same bytes)."""
    p = tmp_path / "m.aero"
    t = {"a": np.arange(40, dtype=np.float32), "b": np.arange(7, dtype=np.int8)}
    write_aero(p, t, uuid=bytes(16), control_integrity=True, page_hashes=True, page_size=64,
               metadata={"k": "v"})
    blob = bytearray(p.read_bytes())

    def observed(r):
        return ({n: r.tensor(n).tobytes() for n in r.tensors}, r.metadata, r.manifest)
    with AeroReader(p) as r:
        want = observed(r)
    silent = 0
    for i in range(len(blob)):
        blob[i] ^= 0x40
        try:
            with AeroReader(bytes(blob)) as r:
                if r.validate(full=True).ok:
                    silent += 1
                    assert observed(r) == want, f"flip at {i} changed the data and nothing noticed"
        except codec.FormatError:
            pass
        blob[i] ^= 0x40
    assert silent < 16, f"{silent} flips went unreported"
