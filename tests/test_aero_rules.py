"""One hostile file per AERO rule: each rule id of schemas.aero.Rule is shown to fire, with its
error class, at open, on first access, or in the report of the validation level that owns it."""
import msgpack
import numpy as np
import pytest
import zstandard

import codec
from codec import errors as E
from codec.engine.records import record_of
from codec.formats.aero import AeroReader, build_container, validate_file
from codec.schemas import aero as S
from codec.schemas.aero import Rule

from .conftest import vectors_dir

VDIR = vectors_dir("aero")
HDR, TOCH, ENT = record_of(S.FileHeader), record_of(S.TocHeader), record_of(S.TocEntry)
W = np.arange(6, dtype=np.float32)


def tidx(**over):
    e = {"name": "w", "dtype": 1, "shape": [2, 3], "shard_id": 0, "data_off": 0, "data_len": 24, "flags": 0}
    e.update(over)
    return msgpack.packb({"tensors": [e]})


def base(tidx_payload=None, extra=(), wtsh=W.tobytes(), tidx_flags=4):
    return [(b"MJSN", "meta.json", 0, b'{"model_name":"t"}'),
            (b"MMSG", "manifest", 0, msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}})),
            (b"TIDX", "tensors", tidx_flags, tidx_payload if tidx_payload is not None else tidx()),
            (b"WTSH", "weights.shard0", 2, wtsh), *extra]


def patch(blob: bytes, rec, offset: int, **fields) -> bytes:
    cur = rec.parse(blob, offset)
    cur.update(fields)
    return blob[:offset] + rec.build(cur) + blob[offset + rec.size:]


def entry_at(i):
    return S.HEADER_SIZE + S.TOC_HEADER_SIZE + i * S.TOC_ENTRY_SIZE


GOOD = build_container(base())


def case_version():
    return patch(GOOD, HDR, 0, version_major=100)


def cases():
    """rule -> (stage, error class, hostile bytes)."""
    zbomb = zstandard.ZstdCompressor().compress(bytes(200 << 20))
    n = 600_000
    crowd = b"\xdd" + n.to_bytes(4, "big") + np.where(np.random.default_rng(0).integers(0, 2, n).astype(bool),
                                                      0x90, 0x80).astype(np.uint8).tobytes()
    ihsh_payload = msgpack.packb({"algo": "blake3-256", "covered_ranges": [[0, 1]], "digest": bytes(32)})
    return {
        Rule.MAGIC: ("open", E.MagicError, b"AERX" + GOOD[4:]),
        Rule.VERSION: ("open", E.UnsupportedVersionError, case_version()),
        Rule.HEADER_SIZE: ("open", E.ConstraintError, patch(GOOD, HDR, 0, header_size=97)),
        Rule.RESERVED: ("open", E.ReservedError, patch(GOOD, ENT, entry_at(1), reserved0=5)),
        Rule.FILE_FLAGS: ("open", E.ConstraintError, patch(GOOD, HDR, 0, file_flags=1)),
        Rule.TRUNCATED: ("open", E.TruncatedError, GOOD[:50]),
        Rule.TOC_BOUNDS: ("open", E.RangeError, patch(GOOD, HDR, 0, toc_offset=8)),
        Rule.TOC_LENGTH: ("open", E.StructureError, patch(GOOD, HDR, 0, toc_length=S.TOC_HEADER_SIZE + 80 * 3)),
        Rule.LIMIT_ENTRY_COUNT: ("open", E.LimitError, patch(GOOD, TOCH, 96, entry_count=S.MAX_ENTRY_COUNT + 1)),
        Rule.LIMIT_STRING_TABLE: ("open", E.LimitError, patch(GOOD, HDR, 0, string_table_length=S.MAX_STRING_TABLE + 8)),
        Rule.STRTAB_BOUNDS: ("open", E.AlignmentError, patch(GOOD, HDR, 0, string_table_offset=HDR.parse(GOOD)["string_table_offset"] + 4)),
        Rule.NAME_BOUNDS: ("open", E.BoundsError, patch(GOOD, ENT, entry_at(2), name_off=1000)),
        Rule.NAME_UTF8: ("open", E.DecodeError, _bad_utf8_name()),
        Rule.CHUNK_FLAGS: ("open", E.ReservedError, patch(GOOD, ENT, entry_at(0), chunk_flags=0x10)),
        Rule.CHUNK_BOUNDS: ("open", E.TruncatedError, GOOD[:-4]),
        Rule.CHUNK_OVERLAP: ("open", E.OverlapError, patch(GOOD, ENT, entry_at(1), chunk_offset=ENT.parse(GOOD, entry_at(0))["chunk_offset"])),
        Rule.CHUNK_ALIGN: ("open", E.AlignmentError, patch(GOOD, ENT, entry_at(0), chunk_offset=ENT.parse(GOOD, entry_at(0))["chunk_offset"] + 1)),
        Rule.CHUNK_ULEN: ("open", E.StructureError, patch(GOOD, ENT, entry_at(0), chunk_ulen=3)),
        Rule.CHUNK_DUPLICATE: ("open", E.StructureError, build_container(base(extra=[(b"MJSN", "meta.json", 0, b"{}")]))),
        Rule.NEVER_COMPRESSED: ("open", E.ConstraintError, patch(GOOD, ENT, entry_at(3), chunk_flags=3)),
        Rule.ZSTD: ("open", E.CompressionError, build_container(base(tidx_payload=b"not zstd", tidx_flags=5))),
        Rule.LIMIT_METADATA_ULEN: ("open", E.LimitError, patch(GOOD, ENT, entry_at(2), chunk_ulen=S.MAX_METADATA_ULEN + 1, chunk_flags=5)),
        Rule.LIMIT_INFLATE: ("open", E.LimitError, build_container(
            [(b"TIDX", "tensors", 5, zbomb, 200 << 20)] + [c for c in base() if c[0] != b"TIDX"])),
        # a manifest of 600 k empty arrays stored in ~76 KB: within the inflate ratio, over the
        # object budget (256 k + 2 per stored byte)
        Rule.LIMIT_DECODE: ("open", E.LimitError, build_container(
            [(b"MMSG", "manifest", 1, zstandard.ZstdCompressor().compress(crowd), len(crowd))] + [c for c in base() if c[0] != b"MMSG"])),
        Rule.CHUNK_HASH: ("open", E.IntegrityError, patch(GOOD, ENT, entry_at(2), blake3_256=bytes(32))),
        Rule.MISSING_CHUNK: ("open", E.StructureError, build_container([c for c in base() if c[0] != b"TIDX"])),
        Rule.PAYLOAD: ("open", E.SchemaError, build_container(base(tidx_payload=msgpack.packb({"tensors": [{"nom": 1}]})))),
        Rule.TIDX_DTYPE: ("access", E.EnumError, build_container(base(tidx_payload=tidx(dtype=99)))),
        Rule.TIDX_RANGE: ("access", E.RangeError, build_container(base(tidx_payload=tidx(shard_id=-1)))),
        Rule.TIDX_SHARD: ("access", E.StructureError, build_container(base(tidx_payload=tidx(shard_id=7)))),
        Rule.TIDX_LEN: ("access", E.StructureError, build_container(base(tidx_payload=tidx(shape=[2, 2])))),
        Rule.TIDX_DUPLICATE: ("open", E.StructureError, build_container(base(tidx_payload=msgpack.packb(
            {"tensors": [msgpack.unpackb(tidx())["tensors"][0]] * 2})))),
        Rule.TENSOR_BOUNDS: ("access", E.BoundsError, build_container(base(tidx_payload=tidx(data_off=8)))),
        Rule.HASH_B3: ("read", E.IntegrityError, build_container(base(tidx_payload=tidx(hash_b3="ab" * 32)))),
        Rule.IHSH: ("control", E.IntegrityError, build_container([(b"IHSH", "control.integrity", 8, ihsh_payload)] + base())),
        Rule.PHSH: ("full", E.IntegrityError, build_container(base(extra=[(b"PHSH", "weights.shard0.phsh", 8, msgpack.packb(
            {"shard_name": "weights.shard0", "page_size": 16, "digests": [bytes(32), bytes(32)]}))]))),
        Rule.PADDING: ("structure", E.ReservedError, _nonzero_gap()),
        Rule.UNKNOWN_CHUNK: ("warning", E.StructureError, build_container(base(extra=[(b"XTRA", "x", 0, b"zz")]))),
        # (validate --full: the data is read by no other level)
        Rule.BOOL: ("warning", E.ConstraintError, build_container(base(
            tidx_payload=tidx(dtype=S.DType.BOOL, shape=[6], data_len=6), wtsh=b"\0\1\1\0\7\1"))),
    }


def _bad_utf8_name() -> bytes:
    blob = bytearray(GOOD)
    st = HDR.parse(GOOD)["string_table_offset"]
    blob[st] = 0xFF  # first byte of "meta.json"
    return bytes(blob)


def _nonzero_gap() -> bytes:
    blob = bytearray(GOOD)
    mj = ENT.parse(GOOD, entry_at(0))
    blob[mj["chunk_offset"] + mj["chunk_length"]] = 1  # first padding byte after MJSN
    return bytes(blob)


CASES = cases()


def test_every_rule_has_a_case():
    assert set(CASES) == set(Rule)


@pytest.mark.parametrize("rule", list(CASES), ids=str)
def test_rule_fires(rule):
    stage, cls, blob = CASES[rule]

    def matching(rep):
        return [v for v in rep.violations if v.rule == rule and isinstance(v, cls)]
    if stage == "open":
        with pytest.raises(cls) as ei:
            AeroReader(blob)
        assert ei.value.rule == rule and ei.value.format == "aero"
        assert matching(validate_file(blob, full=True)), "validate collects what open raises"
        return
    r = AeroReader(blob)
    if stage == "access":
        with pytest.raises(cls) as ei:
            r.tensors["w"]
        assert ei.value.rule == rule
        assert matching(r.validate())
    elif stage == "read":
        with pytest.raises(cls):
            r.tensor("w")
        assert r.tensor("w", verify=False).tobytes() == W.tobytes()
        assert matching(r.validate(full=True)) and r.validate().ok
    elif stage in ("structure", "full", "control"):
        rep = r.validate(full=stage == "full", control=stage == "control")
        assert matching(rep) and not rep.ok
        if stage != "structure":
            assert r.validate().ok, "integrity findings stay out of the structure level"
    elif stage == "warning":
        rep = r.validate(full=True)
        assert rep.ok and matching(rep) and all(rep.severity(v) == "warning" for v in matching(rep))


def test_build_container_reproduces_a_reference_file_byte_for_byte():
    ref = (VDIR / "make_test_vector.aero").read_bytes()
    with AeroReader(ref) as r:
        chunks = [(c.fourcc, c.name, c.flags, bytes(r._src.buf[c.offset:c.offset + c.length]), c.ulen, c.blake3)
                  for c in r.chunks]
        uuid = r.uuid
    assert build_container(chunks, uuid) == ref


def test_version_100_is_told_apart():
    with pytest.raises(codec.UnsupportedVersionError, match="must be 0"):
        AeroReader(case_version())


def test_a_dimension_numpy_cannot_hold_is_a_range_error():
    """shape [2^63, 0] has 0 bytes, so every length check passes; numpy still cannot make it."""
    blob = build_container(base(tidx_payload=tidx(shape=[2**63, 0], data_len=0)))
    r = AeroReader(blob)
    with pytest.raises(E.RangeError) as ei:
        r.tensors["w"]
    assert ei.value.rule == Rule.TIDX_RANGE


@pytest.mark.parametrize("damage", ["msgpack", "hash"])
def test_a_damaged_manifest_does_not_hide_the_index_findings(damage):
    """The manifest (MMSG) is reported and the index is still checked: a file whose manifest
    is damaged and whose TIDX is missing or broken is reported with both, in file order; open
    refuses it with the manifest's error, as before."""
    good = msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}})
    mmsg = (b"MMSG", "manifest", 0, b"\xc1not msgpack") if damage == "msgpack" else \
        (b"MMSG", "manifest", 0, good, len(good), bytes(32))
    want = Rule.PAYLOAD if damage == "msgpack" else Rule.CHUNK_HASH
    no_index = build_container([mmsg, (b"WTSH", "weights.shard0", 2, W.tobytes())])
    bad_index = build_container([mmsg, (b"TIDX", "tensors", 0, tidx(data_len=20)),
                                 (b"WTSH", "weights.shard0", 2, W.tobytes())])
    for blob, then in ((no_index, Rule.MISSING_CHUNK), (bad_index, Rule.TIDX_LEN)):
        with pytest.raises(E.FormatError) as ei:
            AeroReader(blob)
        assert ei.value.rule == want and "MMSG" in ei.value.path
        rules = [v.rule for v in validate_file(blob, full=True).errors]
        assert rules[:2] == [want, then], rules


def test_the_header_regions_are_checked_from_their_declarations_and_stop_the_read():
    """schemas.aero.HEADER_RELATIONS: the TOC inside the file and at least its own header, the
    string table inside the file and clear of the header and of the TOC; every finding has the
    declared rule and the offset of the field it names, and nothing past the header is read."""
    h = HDR.parse(GOOD)
    toc_end = h["toc_offset"] + h["toc_length"]
    at = {f: HDR.by_name[f].offset for f in ("toc_length", "string_table_offset", "string_table_length")}
    cases = [
        (dict(toc_length=2**64 - 1), E.TruncatedError, Rule.TOC_BOUNDS, at["toc_length"]),
        (dict(toc_offset=len(GOOD) - 8, toc_length=8), E.StructureError, Rule.TOC_LENGTH, at["toc_length"]),
        (dict(string_table_offset=len(GOOD) + 8), E.TruncatedError, Rule.STRTAB_BOUNDS, at["string_table_length"]),
        (dict(string_table_offset=toc_end - 8), E.OverlapError, Rule.STRTAB_BOUNDS, at["string_table_offset"]),
        (dict(string_table_offset=64), E.OverlapError, Rule.STRTAB_BOUNDS, at["string_table_offset"]),
    ]
    for fields, cls, rule, offset in cases:
        blob = patch(GOOD, HDR, 0, **fields)
        with pytest.raises(cls) as ei:
            AeroReader(blob)
        assert (ei.value.rule, ei.value.offset) == (rule, offset), fields
        found = validate_file(blob, full=True).errors
        assert found and all(v.path.startswith("FileHeader.") for v in found), (fields, found)


def test_an_empty_string_table_overlaps_nothing():
    """An empty string table inside the TOC holds no byte of it: no STRTAB-BOUNDS finding (the
    names it cannot hold are NAME-BOUNDS findings)."""
    h = HDR.parse(GOOD)
    blob = patch(GOOD, HDR, 0, string_table_offset=h["toc_offset"] + 16, string_table_length=0)
    rules = [v.rule for v in validate_file(blob, full=True).errors]
    assert Rule.STRTAB_BOUNDS not in rules and Rule.NAME_BOUNDS in rules
