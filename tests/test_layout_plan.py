"""Writers place regions from the schema's declarations (codec.engine.relations.plan): the step an
offset needs comes from the same field constraints and relations the reader checks, and a writer
given a stricter declaration lays its file out by it."""
from __future__ import annotations

import construct as cs
import numpy as np
import pytest

import codec
from codec import schemas
import codec.schemas.aero
import codec.schemas.gguf
import codec.schemas.mag
import codec.schemas.oinf
import codec.schemas.stb
from codec.engine.relations.plan import after, alignment, place
from codec.schemas.dsl import Aligned, Multiple, Region, Table, Tiles, field, record

TOY = record("Toy", field("off", cs.Int64ul, "offset", Multiple(16, "TOY-A")), field("len", cs.Int64ul, "length"),
             fmt="TOY")
TABLE = Table(TOY, count=2, at=0, path="toys", rule="TOY-N")


def test_the_step_is_every_declared_alignment_at_once():
    assert alignment((TABLE,), "Toy.off") == 16                       # the field's constraint
    assert alignment((), "Toy.off", records=(TOY,)) == 16             # a record given directly
    assert alignment((), "Toy.off") == 1                              # nothing declared
    rel = (TABLE, Aligned("Toy.off", "$a", "TOY-B"))
    assert alignment(rel, "Toy.off", terms={"$a": 24}) == 48          # lcm with a term's value
    readable = Region("Toy.off", "Toy.len", "TOY-C", when=Aligned("Toy.off", 5))
    assert alignment((TABLE, readable), "Toy.off") == 80              # a row is read only if aligned
    assert alignment((TABLE, Aligned("Toy.off", 7)), "Toy.off") == 16  # a bare condition is no rule
    with pytest.raises(TypeError, match=r"\$a.*give that term's value"):
        alignment(rel, "Toy.off")


def test_place_lays_regions_in_order_at_the_declared_step():
    assert place((TABLE,), "Toy.off", [5, 0, 3, 20], 10) == ([16, 32, 32, 48], 68)
    assert place((TABLE,), "Toy.off", [5, 0, 3], 10, pad_end=True) == ([16, 32, 32], 48)
    assert place((TABLE,), "Toy.off", [], 12) == ([], 12)
    assert place((TABLE,), "Toy.off", [], 12, pad_end=True) == ([], 16)
    assert after((TABLE,), "Toy.off", 17) == 32 and after((TABLE,), "Toy.off", 32) == 32


def test_a_tiled_column_is_contiguous_and_cannot_also_be_aligned():
    tiles = Tiles("Row.begin", "Row.nbytes", "TOY-T")
    assert place((tiles,), "Row.begin", [3, 0, 5], 0) == ([0, 3, 3], 8)
    with pytest.raises(ValueError, match="tile its range, and aligned to 16"):
        place((tiles, Aligned("Row.begin", 16, "TOY-A")), "Row.begin", [3], 0)


ARRAYS = {"a": np.arange(3, dtype=np.float32), "b": np.arange(5, dtype=np.int32), "c": np.ones((2, 3), np.float16)}


def _write(fmt, path):
    from codec.formats import gguf, mag, oinf, stb
    if fmt == "stb":
        stb.write_stb(path, [stb.StbTensor(a) for a in ARRAYS.values()])
    elif fmt == "mag":
        mag.write_mag(path, ARRAYS)
    elif fmt == "oinf":
        oinf.write_oinf_file(path, ARRAYS, metadata={"k": 3})
    else:
        gguf.write_gguf(path, ARRAYS)


def _data_offsets(path) -> list[int]:
    """Where each tensor's bytes start, relative to where the format counts them from."""
    with codec.open(str(path)) as r:
        infos = [r.tensors[n] for n in r.tensors]
        base = getattr(r, "data_start", 0)
        return [i.offset - base for i in infos if i.nbytes]


@pytest.mark.parametrize("fmt, module, rules, column", [
    ("stb", schemas.stb, "RELATIONS", "Descriptor.offset"),
    ("mag", schemas.mag, "RELATIONS", "TensorRecord.offset"),
    ("oinf", schemas.oinf, "DATA_RELATIONS", "TensorEntry.data_offset"),
    ("gguf", schemas.gguf, "RELATIONS", "Tensor.offset"),
])
def test_each_writer_places_tensors_as_its_schema_declares(tmp_path, monkeypatch, fmt, module, rules, column):
    plain = tmp_path / f"plain.{fmt}"
    _write(fmt, plain)
    assert any(o % 256 for o in _data_offsets(plain))  # the format's own step is finer than 256
    monkeypatch.setattr(module, rules, getattr(module, rules) + (Aligned(column, 256, "TEST-256"),))
    p = tmp_path / f"m.{fmt}"
    _write(fmt, p)
    offsets = _data_offsets(p)
    assert len(offsets) == 3 and all(o % 256 == 0 for o in offsets), offsets
    assert codec.validate(str(p), full=True).ok
    with codec.open(str(p)) as r:
        for n, a in zip(r.tensors, ARRAYS.values()):
            assert r.tensor(n).tobytes() == a.tobytes()


def test_aero_chunks_follow_the_declared_chunk_alignment(tmp_path, monkeypatch):
    from codec.formats.aero import write_aero_file
    S = schemas.aero

    def chunk_offsets(p):
        data = p.read_bytes()
        head = S.FileHeader.parse(data)
        n = S.TocHeader.parse(data[head.toc_offset:]).entry_count
        at = head.toc_offset + S.TOC_HEADER_SIZE
        return [S.TocEntry.parse(data[at + i * S.TOC_ENTRY_SIZE:]).chunk_offset for i in range(n)]

    write_aero_file(tmp_path / "plain.aero", ARRAYS)
    assert any(o % 256 for o in chunk_offsets(tmp_path / "plain.aero"))
    monkeypatch.setattr(S, "TOC_RELATIONS", S.TOC_RELATIONS + (Aligned("TocEntry.chunk_offset", 256, "TEST-256"),))
    p = tmp_path / "m.aero"
    write_aero_file(p, ARRAYS)
    assert all(o % 256 == 0 for o in chunk_offsets(p))
    assert codec.validate(str(p), full=True).ok
    with codec.open(str(p)) as r:
        assert {n: r.tensor(n).tobytes() for n in r.tensors} == {n: a.tobytes() for n, a in ARRAYS.items()}
