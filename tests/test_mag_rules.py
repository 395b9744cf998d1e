"""One hostile file per MAG rule: every rule id of schemas.mag.Rule is shown to fire."""
import numpy as np
import pytest

from codec import errors as E
from codec.engine.records import record_of
from codec.formats.mag import MagReader, validate_file, write_mag
from codec.io.integrity import checksum
from codec.schemas import mag as S
from codec.schemas.mag import Rule

HDR, META, TEN = record_of(S.FileHeader), record_of(S.MetadataRecord), record_of(S.TensorRecord)


def build(metas, tensors, *, data=b"", fix_checksum=True, **head) -> bytes:
    """Records as given (dicts for the engine), then ``data``; checksum recomputed."""
    body = b"".join(META.build(m) for m in metas) + b"".join(TEN.build(t) for t in tensors)
    h = {"magic": S.MAGIC, "version": 1, "checksum": 0, "num_tensors": len(tensors), "num_meta_kv": len(metas)}
    h.update(head)
    blob = HDR.build(h) + body
    if fix_checksum:
        h["checksum"] = checksum(S.HEADER_CHECKSUM, blob, len(blob))
    return HDR.build(h) + body + data


def meta(**kw):
    return {"type": 1, "payload": 7, "key": b"m"} | kw


def ten(**kw):
    return {"dtype": 0, "rank": 1, "numel": 4, "offset": 128, "shape": [4], "key": b"t"} | kw


def good(**kw):
    blob = build([meta()], [ten(**kw)])
    return blob + bytes(128 - len(blob)) + np.arange(4, dtype=np.float32).tobytes()


CASES = {
    Rule.MAGIC: (E.MagicError, b"MAG?" + good()[4:]),
    Rule.VERSION: (E.UnsupportedVersionError, build([], [], version=2)),
    Rule.RESERVED: (E.ReservedError, build([meta(aux_reserved=b"\x00\x01\x00")], [])),
    Rule.TRUNCATED: (E.TruncatedError, good()[:20]),
    Rule.COUNT: (E.TruncatedError, build([], [], num_tensors=5)),
    Rule.CHECKSUM: (E.IntegrityError, build([meta()], [], fix_checksum=False)),
    Rule.META_TYPE: (E.EnumError, build([meta(type=3)], [])),
    Rule.KEY_LENGTH: (E.LimitError, build([meta(key=b"k" * 65536)], [])),
    Rule.KEY_UTF8: (E.DecodeError, build([meta(key=b"\xc0")], [])),
    Rule.DUPLICATE: (E.StructureError, build([meta(), meta()], [])),
    Rule.DTYPE: (E.EnumError, good(dtype=9)),
    Rule.RANK: (E.RangeError, good(rank=0, shape=[])),
    Rule.DIM: (E.RangeError, good(shape=[0], numel=0)),
    Rule.NUMEL: (E.StructureError, good(numel=5)),
    Rule.ALIGN: (E.AlignmentError, good(offset=132, numel=3, shape=[3])),
    Rule.BOUNDS: (E.TruncatedError, good(offset=192)),
    Rule.OVERLAP: (E.OverlapError, None),
}


def _overlap():
    blob = build([], [ten(key=b"a"), ten(key=b"b", offset=128)])
    return blob + bytes(128 - len(blob)) + bytes(16)


CASES[Rule.OVERLAP] = (E.OverlapError, _overlap())


#: rules whose findings are warnings, each with a file it fires on (validate --full)
WARNING_CASES = {Rule.BOOL: (E.ConstraintError, good(dtype=2, numel=4, shape=[4])[:-16] + b"\x00\x01\x02\x01")}


def test_every_rule_has_a_case():
    assert set(CASES) | set(WARNING_CASES) == set(Rule)


@pytest.mark.parametrize("rule", list(WARNING_CASES), ids=str)
def test_warning_rule_fires(rule):
    """A bool byte other than 0 or 1 reads (as True) and is a warning of validate --full."""
    cls, blob = WARNING_CASES[rule]
    with MagReader(blob) as r:
        assert r.tensor("t").view(np.uint8).tolist() == [0, 1, 2, 1]
    assert not validate_file(blob).violations
    rep = validate_file(blob, full=True)
    hits = [v for v in rep.warnings if v.rule == rule and isinstance(v, cls)]
    assert rep.ok and hits and hits[0].offset == len(blob) - 2 and "element 2" in str(hits[0]), rep.violations


def test_the_good_file_is_good():
    with MagReader(good()) as r:
        assert r.tensor("t").tolist() == [0, 1, 2, 3] and r.metadata == {"m": 7}


@pytest.mark.parametrize("rule", list(CASES), ids=str)
def test_rule_fires(rule):
    cls, blob = CASES[rule]
    with pytest.raises(E.FormatError):
        MagReader(blob)
    rep = validate_file(blob)
    hits = [v for v in rep.errors if v.rule == rule and isinstance(v, cls)]
    assert hits, [str(v) for v in rep.violations]
    assert hits[0].offset is not None and hits[0].path


def test_writer_output_matches_hand_layout(tmp_path):
    """The writer and this file's hand assembly (both through the engine) agree byte for byte."""
    p = tmp_path / "w.mag"
    write_mag(p, {"t": np.arange(4, dtype=np.float32)}, metadata={"m": 7})
    blob = p.read_bytes()
    want = build([meta()], [ten(offset=128)])
    want += bytes(128 - len(want)) + np.arange(4, dtype=np.float32).tobytes()
    assert blob == want
