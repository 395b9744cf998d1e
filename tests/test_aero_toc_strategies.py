"""AERO's chunk TOC drawn from its declarations (``codec.testing.record_strategies.record_tables``):
files built around a drawn TOC (file header, TOC header, the drawn entries, a string table
holding the drawn names, payload bytes of the drawn lengths at the drawn offsets) validate with
no finding of any TOC, chunk, name or padding rule; breaking any one of those relations in a
drawn TOC is reported under its rule.

The payloads are random bytes (uncompressed ones with their real BLAKE3 digest): what the
payload rules say of them (a chunk that is not zstd, msgpack or JSON, a compressed chunk's
digest) is out of scope here, so only findings of those rules are allowed.  The AERO schema
declares no ``Table`` for the TOC (the reader reads it itself): the test composes one, and
says how the reader derives what the relations name (``TocEntry.key``, ``$control_end``) and
where the names live (the string table, a space of its own)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import codec
from codec.engine.records import record_of
from codec.io.integrity import blake3_bytes
from codec.testing.record_strategies import DrawnRecords, record_tables
from codec.testing.strategies import records
from codec.io.tensor_writer import align_up
from codec.schemas import aero as S
from codec.schemas.aero import ChunkFlags, Rule
from codec.schemas.dsl import Table

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BREAK_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: the TOC as a table (its start is given per draw: right after the TOC header)
TOC = Table(S.TocEntry, count="entry_count", at=S.HEADER_SIZE + S.TOC_HEADER_SIZE, path="toc", rule=Rule.TRUNCATED)
DECLS = (TOC, *S.TOC_RELATIONS, *S.CHUNK_RELATIONS, *S.PADDING_RELATIONS)
#: every relation a built file must keep (the TOC's, and those of the headers, names and padding around it)
ALL = (*S.TOC_HEADER_RELATIONS, *S.TOC_RELATIONS, *S.CHUNK_RELATIONS, *S.NAME_RELATIONS, *S.PADDING_RELATIONS)
#: the names live in the string table (placed by the file builder at the first multiple of 8 after the TOC)
CONTENTS = {"TocEntry.name": ("TocEntry.name_off", "TocEntry.name_len")}
#: what the reader derives (codec/formats/aero/reader.py: the key column, ctx.values["control_end"])
DERIVED = {
    "TocEntry.key": lambda row: (row["fourcc"], row["name"].decode()),
    "$control_end": lambda v: max(v["TocEntry.END"],
                                  align_up(v["TocEntry.END"], S.STRTAB_ALIGN) + v["FileHeader.string_table_length"]),
}
#: rules of the payloads (not of the TOC): what random payload bytes may break
PAYLOAD_RULES = {Rule.CHUNK_HASH, Rule.PAYLOAD, Rule.ZSTD, Rule.LIMIT_DECODE, Rule.TIDX_DTYPE, Rule.TIDX_RANGE,
                 Rule.TIDX_SHARD, Rule.TIDX_LEN, Rule.TIDX_DUPLICATE, Rule.TENSOR_BOUNDS, Rule.HASH_B3}


#: TOC offset -> the drawn TOCs right after a TOC header there
TOCS = {off: record_tables(DECLS, S.TocEntry, at=off + S.TOC_HEADER_SIZE, header=S.FileHeader, derived=DERIVED,
                           contents=CONTENTS) for off in (S.HEADER_SIZE, S.HEADER_SIZE + 8, S.HEADER_SIZE + 40)}


@st.composite
def aero_files(d):
    """(file header, drawn TOC, payloads) of an AERO file."""
    toc_off = d(st.sampled_from(sorted(TOCS)))
    t = d(TOCS[toc_off]).copy()
    head = d(records(S.FileHeader))
    head.update({k: v for k, v in t.header.items() if k in record_of(S.FileHeader).by_name})
    head.update(toc_offset=toc_off, toc_length=S.TOC_HEADER_SIZE + S.TOC_ENTRY_SIZE * t.n,
                string_table_offset=align_up(t.end, S.STRTAB_ALIGN))
    payloads = [d(st.binary(min_size=t.region(i)[1], max_size=t.region(i)[1])) for i in range(t.n)]
    for i, p in enumerate(payloads):
        if not t.rows[i]["chunk_flags"] & ChunkFlags.COMPRESSED_ZSTD:
            t.set(i, "blake3_256", blake3_bytes(p))
    return head, t, payloads


def _aero_bytes(head: dict, t: DrawnRecords, payloads=None, poke: int | None = None) -> bytes:
    """The file: header, TOC header and entries, the names in the string table (those that lie
    inside it), the payloads at their offsets (those that lie inside the file), zeros elsewhere."""
    st_off, st_len = head["string_table_offset"], head["string_table_length"]
    buf = bytearray(t.size)
    buf[:S.HEADER_SIZE] = record_of(S.FileHeader).build(head)
    toc_off = head["toc_offset"]
    buf[toc_off:toc_off + S.TOC_HEADER_SIZE] = record_of(S.TocHeader).build(
        {"entry_count": t.n, "reserved0": 0, "reserved1": 0})
    buf[t.at:t.end] = t.data()
    for i, name in enumerate(t.column("name")):
        off = t.rows[i]["name_off"]
        if off + len(name) <= st_len:
            buf[st_off + off:st_off + off + len(name)] = name
    for i, p in enumerate(payloads or ()):
        off, ln = t.region(i)
        if off + ln <= len(buf):
            buf[off:off + ln] = p
    if poke is not None:
        buf[poke] = 1
    return bytes(buf)


def _findings(buf: bytes) -> list:
    return codec.validate(buf, format="aero").violations


@SETTINGS
@given(f=aero_files())
def test_files_built_around_a_drawn_toc_break_no_toc_chunk_name_or_padding_rule(f):
    head, t, payloads = f
    found = _findings(_aero_bytes(head, t, payloads))
    assert {v.rule for v in found} <= PAYLOAD_RULES, [(v.rule, str(v)) for v in found if v.rule not in PAYLOAD_RULES]
    assert S.FourCC.TIDX.value in t.column("fourcc")  # (Present: drawn)
    keys = t.column("key")
    assert len(set(keys)) == len(keys)


# --------------------------------------------------------------------------- one relation broken
def _rows(t: DrawnRecords, ok) -> list[int]:
    return [i for i in range(t.n) if ok(t.rows[i])]


def _pick(rows: list, pick: int):
    return rows[pick % len(rows)] if rows else None


def _compressed(row) -> bool:
    return bool(row["chunk_flags"] & ChunkFlags.COMPRESSED_ZSTD)


def _break_name_bounds(r, t, head, pick):
    i = _pick(list(range(t.n)), pick)
    t.set(i, "name_off", head["string_table_length"] - t.rows[i]["name_len"] + 1)  # (one byte past the table)
    return r.rule


def _break_chunk_bounds(r, t, head, pick):
    i = _pick(_rows(t, lambda row: row["chunk_length"] > 0), pick)  # (empty ones may lie anywhere)
    if i is None:
        return None
    if pick % 2:  # before the end of the control region (still 16-aligned: only the bound breaks)
        t.set(i, "chunk_offset", (t.values["control_end"] - 1) // S.CHUNK_ALIGN * S.CHUNK_ALIGN)
        return r.rule_lo
    t.set(i, "chunk_offset", align_up(t.size + 1, S.CHUNK_ALIGN))  # past the end
    return r.rule


def _break_clear(r, t, head, pick):
    i = _pick(_rows(t, lambda row: row["fourcc"] in r.when.values), pick)
    if i is None:
        return None
    t.set(i, "chunk_flags", t.rows[i]["chunk_flags"] | r.bits)
    return r.rule


def _break_ulen(r, t, head, pick):
    i = _pick(_rows(t, lambda row: not _compressed(row)), pick)
    if i is None:
        return None
    t.set(i, "chunk_ulen", t.rows[i]["chunk_length"] + 1)
    return r.rule


def _break_metadata_ulen(r, t, head, pick):
    # (compressed: an uncompressed row breaks CHUNK-ULEN first, and an unusable row is not checked further)
    i = _pick(_rows(t, lambda row: row["fourcc"] in r.when.values and _compressed(row)), pick)
    if i is None:
        return None
    t.set(i, "chunk_ulen", r.most + 1)
    return r.rule


def _break_inflate(r, t, head, pick):
    i = _pick(_rows(t, _compressed), pick)
    if i is None:
        return None
    t.set(i, "chunk_ulen", r.most.base + r.most.per * t.rows[i]["chunk_length"] + 1)
    return r.rule


def _break_disjoint(r, t, head, pick):
    full = _rows(t, lambda row: row["chunk_length"] > 0)
    if len(full) < 2:
        return None
    a, b = full[pick % len(full)], full[(pick + 1) % len(full)]
    if t.rows[b]["chunk_length"] > t.rows[a]["chunk_length"]:
        a, b = b, a
    t.set(b, "chunk_offset", t.rows[a]["chunk_offset"])  # (inside a's bytes: only the overlap breaks)
    return r.rule


def _break_unique(r, t, head, pick):
    if t.n < 2:
        return None
    a, b = pick % t.n, (pick + 1) % t.n
    names = t.column("name")
    if len(names[a]) < len(names[b]):
        a, b = b, a
    t.set(a, "fourcc", t.rows[b]["fourcc"])  # (the longer name takes the shorter: it stays in the table)
    t.set(a, "name", names[b])
    t.set(a, "name_len", len(names[b]))
    return r.rule


def _break_present(r, t, head, pick):
    if S.FourCC.MMSG.value in t.column("fourcc"):  # (the reader stops at a damaged manifest before the index)
        return None
    for i in _rows(t, lambda row: row["fourcc"] == r.value):
        t.set(i, "fourcc", S.FourCC.MJSN.value)
    return r.rule


def _break_known(r, t, head, pick):
    t.set(pick % t.n, "fourcc", b"ZZZZ")
    return r.rule


def _break_text(r, t, head, pick):
    i = _pick([i for i, name in enumerate(t.column("name")) if name], pick)
    if i is None:
        return None
    t.set(i, "name", b"\xff" + t.column("name")[i][1:])  # (same length: nothing moves)
    return r.rule


def _break_toc_length(r, t, head, pick):
    head["toc_length"] -= S.TOC_ENTRY_SIZE  # (one entry short: every TOC has one, the index)
    return r.rule


def _break_strtab_padding(r, t, head, pick):
    ends = [row["name_off"] + row["name_len"] + 1 for row in t.rows]
    start = max(ends)
    if start >= head["string_table_length"]:
        return None
    head["__poke__"] = head["string_table_offset"] + start + pick % (head["string_table_length"] - start)
    return r.rule


def _break_gaps(r, t, head, pick):
    taken = set()
    for i in range(t.n):
        off, ln = t.region(i)
        taken.update(range(off, off + ln))
    gaps = [p for p in range(t.values["control_end"], t.size) if p not in taken]
    if not gaps:
        return None
    head["__poke__"] = gaps[pick % len(gaps)]
    return r.rule


def _key(r) -> tuple:
    return type(r).__name__, r.tail if type(r).__name__ == "Zeros" else r.rule


BREAK = {
    ("Region", Rule.NAME_BOUNDS): _break_name_bounds, ("Region", Rule.CHUNK_BOUNDS): _break_chunk_bounds,
    ("Clear", Rule.NEVER_COMPRESSED): _break_clear, ("Equal", Rule.CHUNK_ULEN): _break_ulen,
    ("Bound", Rule.LIMIT_METADATA_ULEN): _break_metadata_ulen, ("Bound", Rule.LIMIT_INFLATE): _break_inflate,
    ("Disjoint", Rule.CHUNK_OVERLAP): _break_disjoint, ("Unique", Rule.CHUNK_DUPLICATE): _break_unique,
    ("Present", Rule.MISSING_CHUNK): _break_present, ("Known", Rule.UNKNOWN_CHUNK): _break_known,
    ("Text", Rule.NAME_UTF8): _break_text, ("Equal", Rule.TOC_LENGTH): _break_toc_length,
    ("Zeros", "string table padding"): _break_strtab_padding, ("Zeros", "bytes after the last chunk"): _break_gaps,
}


def test_every_toc_relation_has_a_breaker():
    assert {_key(r) for r in ALL} == set(BREAK)


@pytest.mark.parametrize("relation", ALL, ids=[f"{type(r).__name__}-{r.rule}" for r in ALL])
@BREAK_SETTINGS
@given(f=aero_files(), pick=st.integers(0, 50))
def test_breaking_one_toc_relation_is_reported_by_its_rule(relation, f, pick):
    head, t, _ = f
    head, t = dict(head), t.copy()
    rule = BREAK[_key(relation)](relation, t, head, pick)
    if rule is None:
        return
    event("broken")
    poke = head.pop("__poke__", None)
    found = _findings(_aero_bytes(head, t, poke=poke))
    assert rule in {v.rule for v in found}, [(v.rule, str(v)) for v in found]


# --------------------------------------------------------------------------- refusals
def test_a_unique_column_the_reader_derives_is_refused_without_its_derivation():
    with pytest.raises(ValueError, match="derives"):
        record_tables(DECLS, S.TocEntry, header=S.FileHeader, contents=CONTENTS)


def test_zeros_between_the_rows_from_elsewhere_than_their_lower_bound_is_refused():
    from codec.schemas.dsl import FILE_END, Zeros
    decls = (*DECLS, Zeros(0, FILE_END, "X-GAPS", offset="TocEntry.chunk_offset", length="TocEntry.chunk_length"))
    with pytest.raises(ValueError, match="Zeros between"):
        record_tables(decls, S.TocEntry, header=S.FileHeader, derived=DERIVED, contents=CONTENTS)
