"""The generic engine, exercised on every declared record and payload of every format."""
import construct as cs
import msgpack
import numpy as np
import pytest
from hypothesis import given, strategies as st

from codec import schemas, errors as E
from codec.engine import payload
from codec.engine.records import error_class, record_of
from codec.testing.strategies import payloads, records
from codec.schemas.dsl import AnyValue, Chars, Eq, Int, KnownFlags, ListOf, Map, Multiple, OneOf, Range, Str, Zero

RECORDS = [st_ for mod in schemas.FORMATS.values() for st_ in mod.RECORDS]
FIXED = [s for s in RECORDS if record_of(s).size is not None]
PAYLOADS = [p for mod in schemas.FORMATS.values() for p in getattr(mod, "PAYLOADS", ())]
rid = lambda s: f"{s.mc_format}.{s.mc_name}"  # noqa: E731


@pytest.mark.parametrize("struct", RECORDS, ids=rid)
@given(data=st.data())
def test_record_roundtrip_parse_build(struct, data):
    rec = record_of(struct)
    r = data.draw(records(struct))
    b = rec.build(r)
    assert len(b) == (rec.size or len(b)) and len(b) >= rec.min_size()
    back = rec.parse(b)
    assert back == r                       # parse(build(r)) == r
    assert rec.build(back) == b            # build(parse(b)) == b
    assert rec.check(back) == []           # derived strategies only produce valid records


@pytest.mark.parametrize("struct", RECORDS, ids=rid)
@given(data=st.data())
def test_record_bytes_roundtrip_any_bytes(struct, data):
    """build(parse(b)) == b for any bytes a record can hold (any value of every field)."""
    rec = record_of(struct)
    if rec.size is not None:
        b = data.draw(st.binary(min_size=rec.size, max_size=rec.size))
    else:
        b = rec.build(data.draw(records(struct, valid=False)))
    parsed, end = rec.parse_at(b + b"trailing", 0)
    assert end == len(b) and rec.build(parsed) == b


VARIABLE = [s for s in RECORDS if record_of(s).size is None]


def _read_all(rec, buf, n, scan: bool) -> list:
    """What iter_parse gives for ``n`` records: by the record scanner, or by construct alone."""
    steps = rec._steps
    if not scan:
        rec._steps = None
    out = []
    try:
        for at, row in rec.iter_parse(buf, 0, n, "t"):
            out.append((at, row))
    except E.FormatError as e:
        out.append((type(e).__name__, e.offset, e.path, e.rule, str(e)))
    finally:
        rec._steps = steps
    return out


@pytest.mark.parametrize("struct", VARIABLE, ids=rid)
@given(data=st.data())
def test_the_record_scanner_reads_exactly_what_construct_reads(struct, data):
    """Variable records are read by the scanner derived from their declaration (lengths given
    by a field, computed paddings): records, ends and errors identical to construct's, for
    records of any values, cut anywhere or with any byte changed."""
    rec = record_of(struct)
    assert rec._steps is not None  # (every variable record of the schemas is scanned)
    rows = data.draw(st.lists(records(struct, valid=False), min_size=1, max_size=4))
    buf = bytearray(b"".join(rec.build(r) for r in rows))
    if data.draw(st.booleans()):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    buf = bytes(buf[:data.draw(st.integers(0, len(buf)))])
    assert _read_all(rec, buf, len(rows), scan=True) == _read_all(rec, buf, len(rows), scan=False)


@pytest.mark.parametrize("struct", FIXED, ids=rid)
@given(data=st.data())
def test_numpy_view_agrees_with_construct(struct, data):
    """The derived structured dtype reads the same values as the construct parse."""
    rec = record_of(struct)
    rows = data.draw(st.lists(records(struct, valid=False), min_size=1, max_size=5))
    blob = b"".join(rec.build(r) for r in rows)
    view = rec.view(blob, 0, len(rows))
    for i, r in enumerate(rows):
        for f in rec.fields:
            got = view[f.name][i]
            got = bytes(got) if f.kind == "bytes" else got.tolist()
            assert got == r[f.name], (f.name, got, r[f.name])


def _breaking_values(f, c, current=None):
    """Values of field f that violate constraint c (derived from the declaration)."""
    if isinstance(c, Chars):
        return [b"a/b", b"\xff", b" "]
    if f.size is None and isinstance(c, Zero):  # computed-length padding: same length, not zero
        n = len(current or b"")
        return [b"\x01" * n] if n else []
    if f.kind == "bytes":
        n = f.subcon.length
        if isinstance(c, Zero):
            return [b"\x01" + bytes(n - 1), bytes(n - 1) + b"\x80"]
        if isinstance(c, Eq):
            return [bytes(x ^ 0xFF for x in c.value)]
        return []
    if f.name in getattr(f, "_derived_for", ()):  # pragma: no cover
        return []
    lo, hi = f.int_bounds()
    if isinstance(c, Eq):
        return [v for v in (c.value + 1, c.value - 1) if lo <= v <= hi]
    if isinstance(c, Zero):
        return [1, hi]
    if isinstance(c, OneOf):
        vals = set(c.values())
        return [next(v for v in range(lo, hi) if v not in vals), hi][: 2 if hi not in vals else 1]
    if isinstance(c, Range):
        out = []
        if c.hi is not None and c.hi < hi:
            out.append(c.hi + 1)
        if c.lo is not None and c.lo > lo:
            out.append(c.lo - 1)
        return out
    if isinstance(c, Multiple):
        return [c.n + 1] if c.n > 1 else []
    if isinstance(c, KnownFlags):
        unknown = ~c.mask() & hi
        return [unknown & -unknown] if unknown else []
    return []


CONSTRAINED = [(s, f.name, c) for s in RECORDS for f in record_of(s).fields for c in f.valid]


@pytest.mark.parametrize("struct,fname,c", CONSTRAINED,
                         ids=[f"{rid(s)}.{n}:{c.rule}" for s, n, c in CONSTRAINED])
@given(data=st.data())
def test_each_declared_constraint_is_enforced(struct, fname, c, data):
    """Negative tests generated from the declarations: break one field, expect that rule, at
    that field's offset, from the single-record check and from the vectorised table check."""
    rec = record_of(struct)
    f = rec.by_name[fname]
    r = data.draw(records(struct))
    bad_values = _breaking_values(f, c, r.get(fname))
    if not bad_values and f.size is None and isinstance(c, Zero):
        return  # this record's padding happens to be empty
    assert bad_values, f"no way to break {c} on {fname}"
    bad = data.draw(st.sampled_from(bad_values))
    for z in rec.zero_fill:  # computed padding follows whatever length the record ends up with
        if z.name != fname:
            r.pop(z.name, None)
    if fname in rec.derived:  # a derived count: break it through the data it sizes
        sized = rec.by_name[rec.derived[fname]]
        if bad > 70000 or bad < 0:
            return
        r[sized.name] = [0] * bad if isinstance(sized.subcon, cs.Array) else bytes(bad)
    else:
        r[fname] = bad
    blob = rec.build(r)
    got = rec.check(rec.parse(blob), offset=1000, path="X")
    hits = [v for v in got if v.rule == c.rule and v.path == f"X.{fname}"]
    assert hits, [str(v) for v in got]
    assert isinstance(hits[0], error_class(c)) and hits[0].offset == 1000 + rec.field_offsets(rec.parse(blob))[fname]
    if rec.size is None:
        return
    # same verdict from the numpy table path, with the row index in path and offset
    table = rec.view(rec.build(data.draw(records(struct))) + blob, 0, 2)
    tv = rec.check_table(table, 64, "T")
    thits = [v for v in tv if v.rule == c.rule and v.path == f"T[1].{fname}"]
    assert thits and thits[0].offset == 64 + rec.size + f.offset
    assert not [v for v in tv if v.path.startswith("T[0]")]


@pytest.mark.parametrize("struct", RECORDS, ids=rid)
@given(data=st.data())
def test_truncated_record_is_a_typed_error_naming_the_field(struct, data):
    """Every cut of a record names the field the data ends in, at that field's offset."""
    rec = record_of(struct)
    r = data.draw(records(struct))
    blob = rec.build(r)
    starts, pos = {}, 0  # field -> (start, end) inside this record
    for f in rec.fields:
        n = len(f.subcon.build(r[f.name], **r))
        starts[f.name] = (pos, pos + n)
        pos += n
    for cut in range(len(blob)):
        with pytest.raises(E.TruncatedError) as ei:
            rec.parse(blob[:cut], 0, "R")
        e = ei.value
        name = next(n for n, (a, b) in starts.items() if b > cut)
        assert e.path == f"R.{name}" and e.offset == starts[name][0], (cut, str(e))


def test_table_reports_are_capped_but_counted():
    from codec.schemas.aero import TocEntry
    rec = record_of(TocEntry)
    n = 1000
    arr = np.zeros(n, dtype=rec.dtype)
    arr["reserved0"] = 7
    out = rec.check_table(arr, 0, "toc")
    assert len([v for v in out if v.offset is not None]) == 20
    assert "980 more" in out[-1].message


@pytest.mark.parametrize("decl", PAYLOADS, ids=lambda d: d.name)
@given(data=st.data())
def test_payload_roundtrip_and_valid(decl, data):
    v = data.draw(payloads(decl))
    assert payload.check(decl, v, fmt="T", offset=0, path="P") == []
    packed = msgpack.packb(v, use_bin_type=True)
    assert msgpack.unpackb(packed, raw=False, strict_map_key=False) == v


# every list of maps a payload declares, and a list of every map whose keys the fast path decides
# (Int, Str, AnyValue, lists of Int: a reader may check such maps as one list)
LISTS = [k.type for p in PAYLOADS for k in getattr(p, "keys", ()) if isinstance(k.type, ListOf)
         and isinstance(k.type.item, Map)] + \
    [ListOf(p) for p in PAYLOADS if isinstance(p, Map) and all(
        isinstance(k.type, (Int, Str, AnyValue)) or (isinstance(k.type, ListOf) and isinstance(k.type.item, Int))
        for k in p.keys)]


@pytest.mark.parametrize("decl", LISTS, ids=lambda d: d.item.name)
@given(data=st.data())
def test_fast_path_agrees_with_exact_walk(decl, data):
    """fast_ok (vectorised, derived) never says yes where the exact check finds a violation."""
    items = data.draw(st.lists(payloads(decl.item), max_size=6))
    if items and data.draw(st.booleans()):  # break one item somehow
        i = data.draw(st.integers(0, len(items) - 1))
        k = data.draw(st.sampled_from([k.name for k in decl.item.keys]))
        items[i][k] = data.draw(st.one_of(st.integers(-2**70, 2**70), st.text(max_size=3), st.none(),
                                          st.lists(st.integers(-3, 3), max_size=2),
                                          st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=2)))
    exact = payload.check(decl, items, fmt="T", offset=0, path="L")
    assert payload.fast_ok(decl, items) == (exact == [])
