"""The relation kinds of variable-size tables (schemas.dsl: Region with `what`, NBytes over lists, Zeroed, Extents,
Text, the Aligned condition): each finds exactly the rows that break it, names the field
the reader's findings always named, and marks those rows unreadable."""
import numpy as np

from codec import errors as E
from codec.engine import relations as R
from codec.engine.records import record_of
from codec.schemas import oinf as O
from codec.schemas.dsl import FILE_END, Aligned, Extents, Has, Lacks, NBytes, Region, Text, Zeroed

HDR = record_of(O.FileHeader)
ROW = 100  # rows are ROW bytes apart from offset 1000; field k of a row is at +8 x k
FIELDS = ("offset", "nbytes", "flags", "dtype", "rank", "dims", "key")


def _ctx(columns: dict, size=10_000, offset_data=64, declared=None) -> R.Context:
    ctx = R.Context("T", size, {"offset_data": offset_data, "file_size": declared or size}, HDR)
    ctx.declared = declared
    n = len(next(iter(columns.values())))
    cols = {k: (np.array(v, dtype=np.uint64) if k not in ("dims", "key") else v) for k, v in columns.items()}
    ctx.add_table("Row", "rows", cols, n, 1000 + ROW * n,
                  lambda i, f: 1000 + ROW * i + (8 * FIELDS.index(f) if f else 0))
    return ctx


def _run(ctx, *rels) -> R.Findings:
    return R.check(rels, ctx, b"")


def test_region_with_what_blames_the_offset_field_and_tells_a_cut_file_from_a_bad_offset():
    ctx = _ctx({"offset": [64, 0, 9_990, 2**64 - 8, 9_990], "nbytes": [8, 8, 20, 16, 4]}, size=10_000,
               declared=20_000)
    f = _run(ctx, Region("Row.offset", "Row.nbytes", "T-IN", lo="FileHeader.offset_data", what="bytes"))
    assert [(type(e), e.path, e.offset) for e in f.errors] == [
        (E.BoundsError, "rows[1].offset", 1100),      # before offset_data
        (E.TruncatedError, "rows[2].offset", 1200),   # past the bytes that exist, inside what is declared
        (E.BoundsError, "rows[3].offset", 1300)]      # wraps around
    assert f.bad == {"Row": {1, 2, 3}} and f.errors[0].rule == "T-IN"


def test_region_with_what_checks_only_where_every_condition_holds_and_skips_unreadable_rows():
    ctx = _ctx({"offset": [0, 4, 0, 0], "nbytes": [8, 8, 8, 8], "flags": [1, 1, 0, 1]})
    f = _run(ctx, Region("Row.offset", "Row.nbytes", "T-IN", lo="FileHeader.offset_data", what="bytes",
                         when=(Has("Row.flags", 1), Aligned("Row.offset", 8))))
    assert [e.path for e in f.errors] == ["rows[0].offset", "rows[3].offset"]
    f = R.Findings(bad={"Row": {0}})
    R._region(Region("Row.offset", "Row.nbytes", "T-IN", lo=FILE_END, what="bytes", when=Has("Row.flags", 1)), ctx, f)
    # (lo = FILE_END: every row with data breaks it, but row 0 was already unreadable)
    assert [e.path for e in f.errors] == ["rows[1].offset", "rows[3].offset"] and f.bad == {"Row": {0, 1, 3}}


def test_nbytes_over_lists_reports_impossible_shapes_then_sizes_where_its_condition_holds():
    ctx = _ctx({"nbytes": [24, 20, 0, 5, 7, 8], "dtype": [10, 10, 10, 99, 1, 10], "flags": [1, 1, 1, 1, 0, 1],
                "rank": [2, 2, 2, 1, 1, 70], "dims": [[2, 3], [2, 3], [0, 2**63], [5], [3], [2]]})
    f = _run(ctx, NBytes("Row.nbytes", "Row.dtype", "Row.dims", O.TYPE_SIZE, "T-SIZE", rule_shape="T-SHAPE",
                         when=Has("Row.flags", 1), rank="Row.rank", max_rank=64, names=O.TYPE_NAMES))
    assert [(type(e), e.rule, e.path) for e in f.errors] == [
        (E.StructureError, "T-SIZE", "rows[1].nbytes"), (E.RangeError, "T-SHAPE", "rows[2].dims")]
    assert f.errors[0].message == "f32[2, 3] needs 24 bytes (got 20)" and f.errors[0].expected == 24
    # an unknown dtype (row 3) and a rank over the limit (row 5) cannot be read; row 4 has no data to size
    assert f.bad == {"Row": {1, 2, 3, 5}}


def test_zeroed_names_its_blamed_field_whichever_column_is_set():
    ctx = _ctx({"offset": [0, 8, 0, 8], "nbytes": [0, 0, 4, 4], "flags": [0, 0, 0, 1]})
    f = _run(ctx, Zeroed(("Row.offset", "Row.nbytes"), "T-ZERO", when=Lacks("Row.flags", 1), blame="Row.nbytes"))
    assert [(type(e), e.path, e.offset) for e in f.errors] == [(E.StructureError, "rows[1].nbytes", 1108),
                                                               (E.StructureError, "rows[2].nbytes", 1208)]
    assert "offset and nbytes must be 0 (got 8, 0)" in f.errors[0].message and f.bad == {"Row": {1, 2}}


def test_extents_names_each_extent_out_of_range():
    ctx = _ctx({"dims": [[1, 2], [3, 0, 2**63], [4]]})
    f = _run(ctx, Extents("Row.dims", 1, 2**63 - 1, "T-DIM"))
    at = 1000 + ROW + 8 * FIELDS.index("dims")
    assert [(type(e), e.path, e.offset, e.actual) for e in f.errors] == [
        (E.RangeError, "rows[1].dims[1]", at + 8, 0), (E.RangeError, "rows[1].dims[2]", at + 16, 2**63)]
    assert f.bad == {"Row": {1}}
    assert _run(_ctx({"dims": [[1], [2, 3]]}), Extents("Row.dims", 1, 9, "T-DIM")).errors == []


def test_text_without_a_name_points_at_the_first_byte_that_does_not_decode():
    ctx = _ctx({"key": [b"ok", "é".encode() + b"\xff", b"fine"]})
    f = _run(ctx, Text("Row.key", "T-UTF8"))
    assert [(type(e), e.path, e.offset) for e in f.errors] == [
        (E.DecodeError, "rows[1].key", 1000 + ROW + 8 * FIELDS.index("key") + 2)]
    assert f.bad == {"Row": {1}}
    assert _run(_ctx({"key": [b"a", b"b"]}), Text("Row.key", "T-UTF8")).errors == []


def test_every_appended_kind_is_described_in_words():
    for rels in (O.DATA_RELATIONS, __import__("codec.schemas.mag", fromlist=["x"]).RECORD_RELATIONS):
        for r in rels:
            text = R.describe_relation(r)
            assert text and not text.startswith(type(r).__name__ + "("), text


def test_oinf_and_mag_declare_at_least_85_percent_of_their_rules():
    """The rules moved into the schemas stay there (the audit of `modelcodec schema FMT --rules`)."""
    from codec import schemas
    from codec.tools.docs import rule_audit
    for name in ("oinf", "mag"):
        rows = rule_audit(schemas.FORMATS[name])
        assert sum(r["declared"] for r in rows) / len(rows) >= 0.85, name
