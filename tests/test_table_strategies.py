"""Tables of binary records drawn from the relations a schema declares
(``codec.testing.record_strategies.record_tables``): whole files built from them read with no finding and every
tensor reads back the bytes drawn for it; breaking any one declared relation in a drawn table is
reported under that relation's rule."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import codec
from codec.engine.records import record_of
from codec.io.integrity import checksum
from codec.testing.record_strategies import DrawnRecords, record_tables
from codec.testing.strategies import records
from codec.io.tensor_writer import align_up
from codec.schemas import mag, oinf, stb
from codec.schemas.dsl import FILE_END

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BREAK_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAG_RELATIONS = mag.RELATIONS + mag.RECORD_RELATIONS


# --------------------------------------------------------------------------- whole files
def _place(body: bytes, size: int, t: DrawnRecords, blobs) -> bytearray:
    """``body`` (header and tables), zeros to ``size``, each row's blob at its region."""
    buf = bytearray(body.ljust(size, b"\0"))
    for i, blob in enumerate(blobs or ()):
        off, _ = t.region(i)
        buf[off:off + len(blob)] = blob
    return buf


@st.composite
def _blobs(d, t: DrawnRecords):
    return [d(st.binary(min_size=t.region(i)[1], max_size=t.region(i)[1])) for i in range(t.n)]


@st.composite
def mag_files(d):
    """(header, metadata table, tensor table, tensor bytes) of a MAG file."""
    meta = d(record_tables(MAG_RELATIONS, mag.MetadataRecord, header=mag.FileHeader))
    tens = d(record_tables(MAG_RELATIONS, mag.TensorRecord, at=meta.end, header=mag.FileHeader))
    head = d(records(mag.FileHeader))
    head.update(meta.header)
    head.update(tens.header)
    return head, meta, tens, d(_blobs(tens))


def _mag_bytes(head, meta: DrawnRecords, tens: DrawnRecords, blobs=None) -> bytes:
    hrec = record_of(mag.FileHeader)
    body = hrec.build(head) + meta.data() + tens.data()
    buf = _place(body, tens.size, tens, blobs)
    end = len(body)
    head = dict(head, checksum=checksum(mag.HEADER_CHECKSUM, buf, end))
    buf[:hrec.size] = hrec.build(head)
    return bytes(buf)


@st.composite
def stb_files(d):
    """(header, descriptor table, tensor bytes) of an STB file."""
    t = d(record_tables(stb.RELATIONS, stb.Descriptor, header=stb.Header))
    head = d(records(stb.Header))
    head.update(t.header)
    return head, t, d(_blobs(t))


def _stb_bytes(head, t: DrawnRecords, blobs=None) -> bytes:
    return bytes(_place(record_of(stb.Header).build(head) + t.data(), t.size, t, blobs))


OINF_RELATIONS = oinf.RELATIONS + oinf.DATA_RELATIONS


@st.composite
def oinf_files(d):
    """(header, size-variable table, metadata table (empty: a value's bytes follow its type,
    which no relation declares), tensor table, tensor bytes) of an OINF file; the tables are
    drawn in file order, each after the header offsets the ones before fixed."""
    sv = d(record_tables(OINF_RELATIONS, oinf.SizeVar, at=oinf.HEADER_SIZE, header=oinf.FileHeader))
    md = d(record_tables(OINF_RELATIONS, oinf.MetadataEntry, at=sv.header["offset_metadata"], header=oinf.FileHeader,
                         known=sv.header, max_rows=0))
    known = {**sv.header, **md.header}
    te = d(record_tables(OINF_RELATIONS, oinf.TensorEntry, at=known["offset_tensors"], header=oinf.FileHeader,
                         known=known))
    head = d(records(oinf.FileHeader))
    head.update(known)
    head.update(te.header)
    blobs = [d(st.binary(min_size=ln, max_size=ln) if te.rows[i]["dtype"] != oinf.ValueType.BOOL else
               st.lists(st.sampled_from(b"\0\1"), min_size=ln, max_size=ln).map(bytes))  # (bool bytes are 0 or 1)
             for i, (_, ln) in enumerate(map(te.region, range(te.n)))]
    return head, sv, md, te, blobs


def _oinf_bytes(head, sv: DrawnRecords, md: DrawnRecords, te: DrawnRecords, blobs=None) -> bytes:
    head = dict(head)
    poke = head.pop("__poke__", None)
    buf = bytearray(max(te.size, te.end))
    for at, data in ((0, record_of(oinf.FileHeader).build(head)), (sv.at, sv.data()), (md.at, md.data()),
                     (te.at, te.data())):
        buf[at:at + len(data)] = data
    for i, blob in enumerate(blobs or ()):
        off, _ = te.region(i)
        buf[off:off + len(blob)] = blob
    if poke is not None:
        buf[poke] = 1
    return bytes(buf)


def _read_back(buf: bytes, fmt: str, names, blobs, count: int | None = None) -> None:
    assert codec.validate(buf, format=fmt).violations == []
    with codec.open(buf, format=fmt) as r:
        assert len(r) == (len(blobs) if count is None else count)
        for name, blob in zip(names, blobs):
            assert np.asarray(r.tensor(name)).tobytes(order="A") == blob


@SETTINGS
@given(f=mag_files())
def test_mag_files_built_from_drawn_tables_read_back_their_tensors(f):
    head, meta, tens, blobs = f
    _read_back(_mag_bytes(head, meta, tens, blobs), "mag", [k.decode() for k in tens.column("key")], blobs)


@SETTINGS
@given(f=stb_files())
def test_stb_files_built_from_drawn_tables_read_back_their_tensors(f):
    head, t, blobs = f
    _read_back(_stb_bytes(head, t, blobs), "stb", [str(i) for i in t.column("tensor_id")], blobs)


@SETTINGS
@given(f=oinf_files())
def test_oinf_files_built_from_drawn_tables_read_back_their_tensors(f):
    head, sv, md, te, blobs = f
    buf = _oinf_bytes(head, sv, md, te, blobs)
    has = [i for i in range(te.n) if te.rows[i]["flags"] & oinf.TensorFlags.HAS_DATA]
    _read_back(buf, "oinf", [te.rows[i]["name"].decode() for i in has], [blobs[i] for i in has], count=te.n)
    with codec.open(buf, format="oinf") as r:
        assert r.sizevars == {row["name"].decode(): row["value"] for row in sv.rows}


# --------------------------------------------------------------------------- one relation broken
def _col(term: str) -> str:
    return term.partition(".")[2]


def _step(t: DrawnRecords, column: str) -> int:
    from codec.schemas.dsl import Multiple
    return max([1] + [c.n for c in t.record.by_name[column].valid if isinstance(c, Multiple)])


def _full(t: DrawnRecords, length: str) -> list[int]:
    return [i for i in range(t.n) if t.column(length)[i] > 0]


def _break_unique(r, t, head, pick):
    if t.n < 2:
        return None
    a, b = pick % t.n, (pick + 1) % t.n
    col = _col(r.column)
    size = lambda v: len(v) if isinstance(v, (bytes, list)) else 0  # noqa: E731
    if size(t.rows[a][col]) < size(t.rows[b][col]):
        a, b = b, a
    t.set(a, col, t.rows[b][col])  # (the longer value takes the shorter: no table grows past its bound)
    return r.rule


def _break_text(r, t, head, pick):
    rows = [i for i in range(t.n) if t.rows[i][_col(r.column)]]
    if not rows:
        return None
    i = rows[pick % len(rows)]
    t.set(i, _col(r.column), b"\xff" + t.rows[i][_col(r.column)][1:])  # (same length: nothing moves)
    return r.rule


def _break_nbytes(r, t, head, pick):
    length = _col(r.length)
    rows = _full(t, length) if getattr(r, "when", None) is not None else list(range(t.n))  # (sized: the rows it holds for)
    if not rows:
        return None
    i = rows[pick % len(rows)]
    t.set(i, length, t.column(length)[i] + 1)
    return r.rule


def _break_zeroed(r, t, head, pick):
    rows = [i for i in range(t.n) if not any(t.column(_col(c))[i] for c in r.columns)]  # (the rows it holds for)
    if not rows:
        return None
    t.set(rows[pick % len(rows)], _col(r.blame or r.columns[0]), 8)
    return r.rule


def _break_zeros(r, t, head, pick):
    if head[_col(r.end)] <= t.end:
        return None
    head["__poke__"] = t.end + pick % (head[_col(r.end)] - t.end)
    return r.rule


def _break_extents(r, t, head, pick):
    rows = [i for i in range(t.n) if len(t.rows[i][_col(r.dims)])]
    if not rows or r.lo == 0:
        return None
    i = rows[pick % len(rows)]
    t.set(i, _col(r.dims), [r.lo - 1] + list(t.rows[i][_col(r.dims)])[1:])
    return r.rule


def _break_region(r, t, head, pick):
    off, ln = _col(r.offset), _col(r.length)
    rows = _full(t, ln) if r.empty_anywhere or r.when is not None else list(range(t.n))  # (the rows it holds for)
    if not rows:
        return None
    i, step = rows[pick % len(rows)], _step(t, off)
    if pick % 2 and r.lo is not None:  # before its lower bound (still aligned: only the bound breaks)
        lo = t.end if r.lo == f"{t.record.name}.END" else head[_col(r.lo)]
        if lo < step or not t.column(ln)[i]:
            return None
        t.set(i, off, (lo - 1) // step * step)
        return getattr(r, "rule_lo", None) or r.rule
    assert r.hi == FILE_END
    t.set(i, off, align_up(t.size + 1, step))  # past the end
    return r.rule


def _break_disjoint(r, t, head, pick):
    off, ln = _col(r.offset), _col(r.length)
    full = _full(t, ln)
    if len(full) < 2:
        return None
    a, b = full[pick % len(full)], full[(pick + 1) % len(full)]
    if t.column(ln)[b] > t.column(ln)[a]:
        a, b = b, a
    t.set(b, off, t.column(off)[a])  # (inside a's bytes: only the overlap breaks)
    return r.rule


def _break_ordered(r, t, head, pick):
    free = [x for x in r.terms if isinstance(x, str) and _col(x) in head and x != FILE_END]
    if not free:
        return None
    head[_col(free[0])] = 0  # (the terms before it are the table's end: > 0)
    return r.rule


BREAK = {"Unique": _break_unique, "Text": _break_text, "NBytes": _break_nbytes,
         "Extents": _break_extents, "Region": _break_region,
         "Disjoint": _break_disjoint, "Ordered": _break_ordered, "Zeroed": _break_zeroed, "Zeros": _break_zeros}


def _rules(buf: bytes, fmt: str) -> list[str]:
    return [v.rule for v in codec.validate(buf, format=fmt).violations]


def _over(relations, record) -> list:
    from codec.testing.record_strategies import _names
    name = record_of(record).name
    return [r for r in relations if type(r).__name__ in BREAK and any(x.startswith(name + ".") for x in _names(r))]


def test_every_relation_over_the_drawn_tables_has_a_breaker():
    from codec.testing.record_strategies import _names
    kinds = {type(r).__name__ for rel, rec in ((MAG_RELATIONS, mag.MetadataRecord), (MAG_RELATIONS, mag.TensorRecord),
                                               (stb.RELATIONS, stb.Descriptor), (OINF_RELATIONS, oinf.SizeVar),
                                               (OINF_RELATIONS, oinf.TensorEntry)) for r in rel
             if getattr(r, "rule", None) and any(x.startswith(record_of(rec).name + ".") for x in _names(r))}
    assert kinds <= set(BREAK) | {"Table", "Records"}, kinds - set(BREAK)


MAG_BROKEN = [(rec, r) for rec in (mag.MetadataRecord, mag.TensorRecord) for r in _over(MAG_RELATIONS, rec)]
STB_BROKEN = _over(stb.RELATIONS, stb.Descriptor)


@pytest.mark.parametrize("record,relation", MAG_BROKEN, ids=[f"{type(r).__name__}-{r.rule}" for _, r in MAG_BROKEN])
@BREAK_SETTINGS
@given(f=mag_files(), pick=st.integers(0, 50))
def test_mag_breaking_one_declared_relation_is_reported_by_its_rule(record, relation, f, pick):
    head, meta, tens, _ = f
    head = dict(head)
    t = (meta if record is mag.MetadataRecord else tens).copy()
    rule = BREAK[type(relation).__name__](relation, t, head, pick)
    if rule is None:
        return
    event("broken")
    if record is mag.MetadataRecord:  # the tensor table follows it (moved when its size changed)
        meta, tens = t, tens.copy()
        tens.at = meta.end
    else:
        tens = t
    assert rule in _rules(_mag_bytes(head, meta, tens), "mag")


@pytest.mark.parametrize("relation", STB_BROKEN, ids=[f"{type(r).__name__}-{r.rule}" for r in STB_BROKEN])
@BREAK_SETTINGS
@given(f=stb_files(), pick=st.integers(0, 50))
def test_stb_breaking_one_declared_relation_is_reported_by_its_rule(relation, f, pick):
    head, t, _ = f
    t, head = t.copy(), dict(head)
    rule = BREAK[type(relation).__name__](relation, t, head, pick)
    if rule is not None:
        event("broken")
        assert rule in _rules(_stb_bytes(head, t), "stb")


OINF_BROKEN = [(rec, r) for rec in (oinf.SizeVar, oinf.TensorEntry) for r in _over(OINF_RELATIONS, rec)]


@pytest.mark.parametrize("record,relation", OINF_BROKEN, ids=[f"{type(r).__name__}-{r.rule}" for _, r in OINF_BROKEN])
@BREAK_SETTINGS
@given(f=oinf_files(), pick=st.integers(0, 50))
def test_oinf_breaking_one_declared_relation_is_reported_by_its_rule(record, relation, f, pick):
    head, sv, md, te, _ = f
    head = dict(head)
    t = (sv if record is oinf.SizeVar else te).copy()
    rule = BREAK[type(relation).__name__](relation, t, head, pick)
    if rule is not None:
        event("broken")
        assert rule in _rules(_oinf_bytes(head, *((t, md, te) if record is oinf.SizeVar else (sv, md, t))), "oinf")


# --------------------------------------------------------------------------- the other kinds, on a toy table
def _toy():
    import construct as cs

    from codec.schemas.dsl import Affine, Bound, Clear, Equal, Has, In, Lacks, Member, NBytes, Ordered, Table, Tiles, Zeroed, field, record
    head = record("ToyHeader", field("count", cs.Int32ul, "rows"), field("data_at", cs.Int64ul, "data start"),
                  fmt="TOY", size=12)
    row = record("ToyRow", field("kind", cs.Int8ul, "element type"), field("flags", cs.Int8ul, "bits"),
                 field("rank", cs.Int8ul, "dimensions"), field("spare", cs.Int8ul, "free"),
                 field("dims", cs.Array(2, cs.Int32ul), "extents"), field("offset", cs.Int64ul, "data"),
                 field("nbytes", cs.Int64ul, "data size"), field("limit", cs.Int32ul, "<= 3 + 2 x rank"),
                 field("copy", cs.Int32ul, "= rank with flag 1"), field("extra", cs.Int64ul, "0 without flag 1"),
                 fmt="TOY", size=44)
    decls = (
        Table(row, count="count", at=12, path="rows", rule="TOY-TRUNCATED"),
        Member("ToyRow.kind", (1, 2, 7), "TOY-KIND"),
        Clear("ToyRow.flags", 0x80, "TOY-FLAG", when=In("ToyRow.kind", (2,))),
        NBytes("ToyRow.nbytes", "ToyRow.kind", "ToyRow.dims", {1: 1, 2: 2, 7: 4}, "TOY-NBYTES", rank="ToyRow.rank",
               max_rank=2),
        Bound("ToyRow.limit", Affine(3, 2, "ToyRow.rank"), "TOY-BOUND"),
        Equal("ToyRow.copy", "ToyRow.rank", "TOY-EQUAL", when=Has("ToyRow.flags", 1)),
        Zeroed(("ToyRow.extra",), "TOY-ZEROED", when=Lacks("ToyRow.flags", 1)),
        Ordered(("ToyRow.END", "ToyHeader.data_at", FILE_END), "TOY-ORDER"),
        Tiles("ToyRow.offset", "ToyRow.nbytes", "TOY-TILES", start="ToyHeader.data_at", end=FILE_END),
    )
    return head, row, decls


TOY_HEAD, TOY_ROW, TOY = _toy()


def _toy_findings(t: DrawnRecords, head: dict, size: int | None = None) -> list[str]:
    from codec.engine import relations
    hrec = record_of(TOY_HEAD)
    buf = (hrec.build(head) + t.data()).ljust(t.size if size is None else size, b"\0")
    ctx = relations.Context("TOY", len(buf), hrec.parse(buf), hrec)
    return [e.rule for e in relations.check(TOY, ctx, buf).errors]


def _toy_break(rule: str, t: DrawnRecords, pick: int) -> int | None:
    """Break the toy relation of ``rule`` in one row of ``t`` (the file size, or None)."""
    rows = {"TOY-KIND": range(t.n), "TOY-FLAG": [i for i in range(t.n) if t.rows[i]["kind"] == 2],
            "TOY-NBYTES": range(t.n), "TOY-BOUND": range(t.n),
            "TOY-EQUAL": [i for i in range(t.n) if t.rows[i]["flags"] & 1],
            "TOY-ZEROED": [i for i in range(t.n) if not t.rows[i]["flags"] & 1]}.get(rule)
    if rule == "TOY-TILES":
        return t.size + 1  # something after the last row
    if not rows:
        return None
    i = list(rows)[pick % len(rows)]
    r = t.rows[i]
    change = {"TOY-KIND": ("kind", 3), "TOY-FLAG": ("flags", r["flags"] | 0x80), "TOY-NBYTES": ("nbytes", r["nbytes"] + 1),
              "TOY-BOUND": ("limit", 4 + 2 * r["rank"]), "TOY-EQUAL": ("copy", r["rank"] + 1),
              "TOY-ZEROED": ("extra", 1)}[rule]
    t.set(i, *change)
    return t.size


@SETTINGS
@given(t=record_tables(TOY, TOY_ROW, header=TOY_HEAD))
def test_drawn_toy_tables_satisfy_member_clear_nbytes_bound_equal_zeroed_ordered_tiles(t):
    head = {"count": t.n, **t.header}
    assert _toy_findings(t, head) == []
    assert sum(t.region(i)[1] for i in range(t.n)) == t.size - head["data_at"]  # (tiled: no gap, nothing after)


@pytest.mark.parametrize("rule", ["TOY-KIND", "TOY-FLAG", "TOY-NBYTES", "TOY-BOUND", "TOY-EQUAL", "TOY-ZEROED",
                                  "TOY-TILES"])
@BREAK_SETTINGS
@given(t=record_tables(TOY, TOY_ROW, header=TOY_HEAD), pick=st.integers(0, 50))
def test_breaking_one_toy_relation_is_reported_by_its_rule(rule, t, pick):
    t = t.copy()
    size = _toy_break(rule, t, pick)
    if size is not None:
        event("broken")
        assert rule in _toy_findings(t, {"count": t.n, **t.header}, size)


# --------------------------------------------------------------------------- refusals
def test_a_relation_the_strategy_cannot_satisfy_is_refused():
    from codec.schemas.dsl import Zeros
    decls = (*stb.RELATIONS, Zeros(0, FILE_END, "X-GAPS", offset="Descriptor.offset", length="Descriptor.size_bytes"))
    with pytest.raises(ValueError, match="Zeros between"):
        record_tables(decls, stb.Descriptor, header=stb.Header)


def test_a_record_no_table_declares_is_refused():
    with pytest.raises(ValueError, match="no Table or Records"):
        record_tables(stb.RELATIONS, mag.TensorRecord)
