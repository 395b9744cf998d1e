"""The relations engine (codec.engine.relations) evaluates the schema's declared rules between fields
over whole tables: each kind finds exactly the rows that break it, with offset, path, rule and
the compared values, and marks them unreadable."""
import numpy as np
from hypothesis import given, settings, strategies as st

from codec import errors as E
from codec.engine import relations as R
from codec.engine.records import record_of
from codec.schemas import stb as S
from codec.schemas.dsl import FILE_END, DeclaresSize, NBytes, Ordered, Region, Table, Unique

HDR, DESC = record_of(S.Header), record_of(S.Descriptor)
TABLE = Table(S.Descriptor, count="tensor_count", at=S.HEADER_SIZE, path="tensors", rule="T-TABLE")


def _file(rows: list[dict], data_offset=None, file_size=None, pad=0) -> bytes:
    n = len(rows)
    do = S.HEADER_SIZE + S.DESCRIPTOR_SIZE * n if data_offset is None else data_offset
    body = b"".join(DESC.build({"tensor_id": 0, "dtype": 0, "rank": 1, "layout": 0, "offset": do, "size_bytes": 4,
                                "dims": [1, 0, 0], **r}) for r in rows)
    size = S.HEADER_SIZE + len(body) + pad
    head = HDR.build({"magic": S.MAGIC, "version": 1, "flags": 0, "tensor_count": n, "reserved0": 0, "reserved1": 0,
                      "data_offset": do, "file_size": size if file_size is None else file_size})
    return head + body + bytes(pad)


def _check(buf: bytes, *rels) -> R.Findings:
    ctx = R.Context("STB", len(buf), HDR.parse(buf, 0), HDR)
    return R.check((rels[0],) + rels[1:] if isinstance(rels[0], Table) else (TABLE,) + rels, ctx, buf)


def test_a_region_past_the_end_and_one_that_wraps_around_are_found():
    buf = _file([{"offset": 64, "size_bytes": 32}, {"offset": 64, "size_bytes": 2**64 - 8},
                 {"offset": 2**64 - 8, "size_bytes": 16}, {"offset": 96, "size_bytes": 32}], pad=64)
    f = _check(buf, Region("Descriptor.offset", "Descriptor.size_bytes", "T-END"))
    assert [e.path for e in f.errors] == ["tensors[1].size_bytes", "tensors[2].size_bytes"]
    assert all(e.rule == "T-END" and isinstance(e, E.BoundsError) for e in f.errors)
    assert f.errors[0].offset == S.HEADER_SIZE + S.DESCRIPTOR_SIZE + DESC.by_name["size_bytes"].offset
    assert f.errors[0].expected == len(buf) and f.bad == {"Descriptor": {1, 2}}


def test_a_region_before_its_lower_bound_breaks_the_start_rule():
    buf = _file([{"offset": 0}, {"offset": 64}], data_offset=64, pad=64)
    f = _check(buf, Region("Descriptor.offset", "Descriptor.size_bytes", "T-END", lo="Header.data_offset",
                           rule_lo="T-START"))
    assert [(e.rule, e.path, e.actual) for e in f.errors] == [("T-START", "tensors[0].offset", 0)]


def test_a_region_clear_of_another_region_of_its_row_finds_the_overlap_but_not_an_empty_one():
    ctx = R.Context("T", 256)
    ctx.add_table("Span", "spans", {"a": np.array([64, 72, 60, 100], np.uint64), "n": np.array([8, 8, 0, 8], np.uint64),
                                    "b": np.array([60, 64, 60, 96], np.uint64),
                                    "m": np.array([8, 8, 8, 2**64 - 1], np.uint64)}, 4, 0, lambda i, f: 100 + 10 * i)
    f = R.check((Region("Span.a", "Span.n", "T-END", clear_of=("Span.b", "Span.m")),), ctx, b"")
    # [64, 72) overlaps [60, 68); [72, 80) only touches [64, 72); an empty row overlaps nothing;
    # [100, 108) overlaps [96, 96 + 2^64 - 1), whose end wraps around in 64 bits
    assert [(type(e).__name__, e.path, e.offset, e.rule, e.actual) for e in f.errors] == [
        ("OverlapError", "spans[0].a", 100, "T-END", [64, 72]), ("OverlapError", "spans[3].a", 130, "T-END", [100, 108])]
    assert f.bad == {"Span": {0, 3}}


def test_a_region_of_header_fields_is_a_region_of_one_row():
    buf = _file([{}], pad=8)
    h = HDR.parse(buf, 0)
    at = HDR.by_name["data_offset"].offset
    for data_offset, want in ((S.HEADER_SIZE, []), (len(buf) - 2, []),
                              (len(buf) - 1, [("TruncatedError", "Header.data_offset", at, "past the end of the file")]),
                              (4, [("OverlapError", "Header.data_offset", at, "starts inside the Header")])):
        ctx = R.Context("STB", len(buf), dict(h, data_offset=data_offset), HDR)
        f = R.check((Region("Header.data_offset", 2, "T-REG", lo="Header.END", lo_is_end=True),), ctx, buf)
        assert [(type(e).__name__, e.path, e.offset) for e in f.errors] == [w[:3] for w in want], data_offset
        assert all(w[3] in e.message for e, w in zip(f.errors, want))


def test_uniqueness_blames_every_later_occurrence():
    buf = _file([{"tensor_id": i} for i in (3, 1, 3, 2, 1, 3)], pad=8)
    f = _check(buf, Unique("Descriptor.tensor_id", "T-UNIQ"))
    assert [e.path for e in f.errors] == ["tensors[2].tensor_id", "tensors[4].tensor_id", "tensors[5].tensor_id"]
    assert "already used by tensors[0]" in f.errors[0].message and f.bad == {"Descriptor": {2, 4, 5}}


def test_nbytes_checks_dtype_times_shape_and_skips_what_it_cannot_judge():
    rows = [{"dtype": 0, "rank": 2, "dims": [2, 3, 9], "size_bytes": 24},    # float32[2, 3]: ok
            {"dtype": 1, "rank": 1, "dims": [5, 0, 0], "size_bytes": 12},    # float16[5] needs 10
            {"dtype": 9, "rank": 1, "dims": [5, 0, 0], "size_bytes": 12},    # unknown dtype: skipped
            {"dtype": 0, "rank": 5, "dims": [1, 0, 0], "size_bytes": 12},    # rank over max_rank: skipped
            {"dtype": 0, "rank": 0, "dims": [0, 0, 0], "size_bytes": 4},     # a scalar: ok
            {"dtype": 0, "rank": 3, "dims": [0, 2**31, 2**31], "size_bytes": 0}]  # no array has it
    buf = _file(rows, pad=8)
    f = _check(buf, NBytes("Descriptor.size_bytes", "Descriptor.dtype", "Descriptor.dims", S.DTYPE_ITEMSIZE, "T-NB",
                           rank="Descriptor.rank", max_rank=3, names=S.DTYPE_NAMES))
    assert [(type(e).__name__, e.path) for e in f.errors] == [("StructureError", "tensors[1].size_bytes"),
                                                               ("RangeError", "tensors[5].dims")]
    assert (f.errors[0].expected, f.errors[0].actual) == (10, 12) and f.bad == {"Descriptor": {1, 5}}


def test_declared_size_and_order():
    buf = _file([{}], file_size=10_000)
    f = _check(buf, DeclaresSize("file_size", "T-SIZE"), Ordered(("Descriptor.END", "Header.data_offset", FILE_END),
                                                                 "T-ORDER"))
    assert isinstance(f.errors[0], E.TruncatedError) and f.errors[0].path == "Header.file_size"
    assert not f.errors[1:]  # data_offset lies between the table's end and the end of the data
    f = _check(_file([{}], data_offset=8), Ordered(("Descriptor.END", "Header.data_offset", FILE_END), "T-ORDER"))
    (e,) = f.errors
    assert e.path == "Header.data_offset" and e.actual == 8 and e.expected[0] == 64
    assert isinstance(_check(_file([{}], file_size=10), DeclaresSize("file_size", "T")).errors[0], E.StructureError)


def test_a_table_that_does_not_fit_stops_the_check():
    buf = _file([{}, {}])[:70]
    f = _check(buf, Unique("Descriptor.tensor_id", "T-UNIQ"))
    assert f.stopped and [e.rule for e in f.errors] == ["T-TABLE"]


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({"tensor_id": st.integers(0, 5), "offset": st.integers(0, 2**64 - 1),
                                            "size_bytes": st.integers(0, 2**64 - 1)}), max_size=12),
       pad=st.integers(0, 300))
def test_every_relation_agrees_with_a_row_by_row_reading(rows, pad):
    buf = _file(rows, pad=pad)
    f = _check(buf, Region("Descriptor.offset", "Descriptor.size_bytes", "T-END", lo="Header.data_offset",
                           rule_lo="T-START"), Unique("Descriptor.tensor_id", "T-UNIQ"))
    do, size, seen, want = S.HEADER_SIZE + S.DESCRIPTOR_SIZE * len(rows), len(buf), set(), set()
    for i, r in enumerate(rows):
        if r["offset"] + r["size_bytes"] > size:
            want.add(("T-END", i))
        if r["offset"] < do:
            want.add(("T-START", i))
        if r["tensor_id"] in seen:
            want.add(("T-UNIQ", i))
        seen.add(r["tensor_id"])
    got = {(e.rule, int(e.path.split("[")[1].split("]")[0])) for e in f.errors}
    assert got == want
    assert f.bad.get("Descriptor", set()) == {i for _, i in want}


@settings(max_examples=150, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)), max_size=12))
def test_disjoint_finds_every_row_that_starts_inside_an_earlier_one(spans):
    from codec.schemas.dsl import Disjoint
    rows = [{"offset": o, "size_bytes": n} for o, n in spans]
    buf = _file(rows, pad=8)
    f = _check(buf, Disjoint("Descriptor.offset", "Descriptor.size_bytes", "T-OVL"))
    order = sorted((o, i) for i, (o, n) in enumerate(spans) if n)
    want, reach = set(), None
    for o, i in order:
        if reach is not None and o < reach:
            want.add(i)
        reach = max(reach or 0, o + spans[i][1])
    assert {int(e.path.split("[")[1].split("]")[0]) for e in f.errors} == want


def test_present_finds_a_table_without_the_row_every_reader_needs():
    from codec.schemas.dsl import Present
    buf = _file([{"dtype": 1}, {"dtype": 2}])
    rel = Present("Descriptor.dtype", 3, "T-HAS", at=S.HEADER_SIZE, what="descriptor of dtype 3")
    (e,) = _check(buf, rel).errors
    assert (type(e), e.rule, e.path, e.offset, e.message) == (E.StructureError, "T-HAS", "tensors", S.HEADER_SIZE,
                                                               "no descriptor of dtype 3")
    assert not _check(_file([{"dtype": 1}, {"dtype": 3}]), rel).errors
    assert _check(_file([]), rel).errors  # (an empty table has none)


def test_known_warns_of_every_unknown_value_and_leaves_the_rows_readable():
    from codec.schemas.dsl import Known
    f = _check(_file([{"dtype": 1}, {"dtype": 9}, {"dtype": 2}, {"dtype": 8}]),
               Known("Descriptor.dtype", (1, 2), "T-KNOWN"))
    assert [(e.path, e.offset) for e in f.errors] == [
        ("tensors[1].dtype", S.HEADER_SIZE + S.DESCRIPTOR_SIZE + DESC.by_name["dtype"].offset),
        ("tensors[3].dtype", S.HEADER_SIZE + 3 * S.DESCRIPTOR_SIZE + DESC.by_name["dtype"].offset)]
    from codec.engine.severity import warning_rules
    assert warning_rules([Known("Descriptor.dtype", (1, 2), "T-KNOWN")]) == {"T-KNOWN"}  # a warning, by its kind
    assert all(isinstance(e, E.StructureError) and e.rule == "T-KNOWN" for e in f.errors) and not f.bad


def test_zeros_over_rows_finds_non_zero_bytes_outside_every_row_and_after_the_last():
    from codec.schemas.dsl import Zeros
    d = S.HEADER_SIZE + 3 * S.DESCRIPTOR_SIZE  # the data: 64 bytes after the table
    rows = [{"offset": d, "size_bytes": 8}, {"offset": d + 24, "size_bytes": 4},
            {"offset": d + 12, "size_bytes": 2**64 - 1}]
    rel = Zeros("Header.data_offset", FILE_END, "T-PAD", offset="Descriptor.offset", length="Descriptor.size_bytes",
                tail="the tail")
    buf = bytearray(_file(rows, data_offset=d, pad=64))
    buf[d + 2] = buf[d + 16] = buf[-1] = 7  # inside row 0, inside row 2 (it reaches past the end)
    assert not _check(bytes(buf), rel).errors
    rows[2]["size_bytes"] = 4  # row 2 now ends at d + 16: [d + 16, d + 24) and [d + 28, end) are gaps
    buf = bytearray(_file(rows, data_offset=d, pad=64))
    buf[d + 9] = buf[d + 17] = buf[-1] = 7
    f = _check(bytes(buf), rel)
    assert [(type(e), e.offset, e.path, e.rule) for e in f.errors] == [
        (E.ReservedError, d + 9, "gap before tensors[2]", "T-PAD"),
        (E.ReservedError, d + 17, "gap before tensors[1]", "T-PAD"),
        (E.ReservedError, len(buf) - 1, "the tail", "T-PAD")]


def test_text_decodes_every_row_and_reports_each_that_is_not_utf8_without_nul():
    from codec.schemas.dsl import Text
    ctx = R.Context("T", 100)
    ctx.add_table("Name", "names", {"bytes": [b"ok", None, b"\xff", b"a\x00b"]}, 4, 100, lambda i, f: 10 * i)
    f = R.check([Text("Name.bytes", "T-UTF8", name="Name.text")], ctx, bytes(100))
    assert [(type(e), e.offset, e.path, e.rule) for e in f.errors] == [
        (E.DecodeError, 20, "names[2].text", "T-UTF8"), (E.DecodeError, 30, "names[3].text", "T-UTF8")]
    assert ctx.value("Name.text") == ["ok", None, "\ufffd", "a\x00b"]
