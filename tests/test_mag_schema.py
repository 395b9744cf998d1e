"""The declared MAG records against the tables of specs/mag.md."""
import re

import pytest

from codec.engine.records import record_of
from codec.schemas import mag as S

from .conftest import VECTORS

SPEC = VECTORS.parent / "specs" / "mag.md"
SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}


def spec_rows(title: str) -> list[tuple[str, str]]:
    if not SPEC.is_file():
        pytest.skip(f"SPEC MISSING: {SPEC} not found — shared/ must sit beside the checkout")
    rows, inside = [], False
    for line in SPEC.read_text().splitlines():
        if line.startswith("### "):
            inside = line[4:].strip() == title
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if inside and len(cells) == 3 and re.fullmatch(r"[a-z_]+", cells[0]) and cells[0] != "name":
            rows.append((cells[0], cells[1]))
    return rows


def spec_layout(title):
    """[(name, size or None for variable)] from the spec table."""
    out = []
    for name, typ in spec_rows(title):
        m = re.fullmatch(r"(u\d+)(?:\[(\w+)\])?", typ)
        base, count = SIZES[m.group(1)], m.group(2)
        out.append((name, base * int(count) if count and count.isdigit() else (None if count else base)))
    return out


@pytest.mark.parametrize("title,struct", [("File Header", S.FileHeader), ("Metadata Record", S.MetadataRecord),
                                          ("Tensor Record", S.TensorRecord)])
def test_record_matches_spec_table(title, struct):
    """Same fields in the same order with the same sizes; the spec's packed ``aux`` u32 is
    declared as its bit fields (byte-aligned), which must add up to 4 bytes."""
    rec = record_of(struct)
    ours = [(f.name, f.size) for f in rec.fields]
    spec = spec_layout(title)
    assert spec, title
    i = 0
    for name, size in spec:
        if name == "aux" and ours[i][0] != "aux":
            group = 0
            while group < 4:
                group += ours[i][1]
                i += 1
            assert group == 4
            continue
        assert ours[i] == (name, size), (name, ours[i])
        i += 1
    assert i == len(ours)


def test_limits_match_spec():
    text = SPEC.read_text()
    assert "Max key length: 2^16 - 1" in text and S.MAX_KEY_LENGTH == 2**16 - 1
    assert "Max tensor rank: 255" in text and S.MAX_RANK == 255
    assert "Min tensor rank: 1" in text and S.MIN_RANK == 1
