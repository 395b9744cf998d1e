"""The declared AERO records against the tables of the spec, and the generated docs."""
import re

import pytest

from codec.tools.docs import render
from codec.engine.records import record_of
from codec.schemas import aero as S

from .conftest import VECTORS

SPEC = VECTORS.parent / "specs" / "aero.md"


def spec_tables() -> dict[str, list[tuple[int, int, str]]]:
    """{section title: [(offset, size, field), ...]} from the spec's markdown tables."""
    if not SPEC.is_file():
        pytest.skip(f"SPEC MISSING: {SPEC} not found — shared/ must sit beside the checkout")
    out, title = {}, None
    for line in SPEC.read_text().splitlines():
        m = re.match(r"^##+\s+(.*)$", line)
        if m:
            title = m.group(1).strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if title and len(cells) >= 3 and cells[0].isdigit() and cells[1].isdigit():
            out.setdefault(title, []).append((int(cells[0]), int(cells[1]), cells[2]))
    return out


@pytest.mark.parametrize("title,struct", [("File Header (96 bytes)", S.FileHeader),
                                          ("TOC Header (16 bytes)", S.TocHeader),
                                          ("TOC Entry (80 bytes)", S.TocEntry)])
def test_record_layout_matches_spec_table(title, struct):
    spec = spec_tables()[title]
    rows = [(off, size, name) for off, size, name, *_ in record_of(struct).rows()]
    assert rows == spec
    assert record_of(struct).size == int(re.search(r"\((\d+) bytes\)", title).group(1))


def test_spec_dtype_and_flag_tables_match_enums():
    text = SPEC.read_text()
    for flag in S.ChunkFlags:
        assert re.search(rf"0x{flag.value:04x}\s*\|\s*{flag.name}", text, re.I), flag
    for dt in (S.DType.F16, S.DType.F32, S.DType.BF16, S.DType.F64, S.DType.BOOL):
        assert re.search(rf"\|\s*{dt.value}\s*\|\s*{S.DTYPE_NAMES[dt]}\s*\|", text), dt
    assert "| 0x8000 | packed" in text
    for name, value in (("MAX_ENTRY_COUNT", "1,000,000"), ("MAX_STRING_TABLE", "512 MB"),
                        ("MAX_METADATA_ULEN", "2 GB")):
        assert re.search(rf"\*\*{name}\*\*\s*\|\s*{value}", text)
    assert S.MAX_ENTRY_COUNT == 1_000_000 and S.MAX_STRING_TABLE == 512 << 20 and S.MAX_METADATA_ULEN == 2 << 30


def test_rendered_reference_lists_every_field_with_offset_and_constraint():
    doc = render(S)
    for struct in S.RECORDS:
        for off, size, name, typ, cons, _ in record_of(struct).rows():
            assert re.search(rf"\| {off} \| {size} \| {name} \| {re.escape(typ)} \| {re.escape(cons)} \|", doc), name
    for m in S.PAYLOADS:
        assert f"## {m.name} (payload map)" in doc
