"""The one-line rendering of each rule's error, pinned: every shared invalid vector's verdict, every
case of the AERO, MAG, safetensors and GGUF rule tables, and the OINF, STB, AEROSET, KHANARY and HTTP
rules' cases of their own tests (built here under tmp_path; the HTTP ones served by the local server
of tests/servers.py), rendered as a user sees it (``FMT path @ 0xOFFSET: message [RULE]``, without
the file name), must equal tests/golden/rule_errors.txt; every rule id of every format, KHANARY's
and HTTP's must appear in it.  A change of wording, path or offset shows here; when it is meant,
regenerate the file with ``MODELCODEC_UPDATE_GOLDEN=1 python -m pytest tests/test_rule_renderings.py``
and review the diff."""
import os
import struct

import numpy as np

import codec
from codec import schemas, errors as E
from codec.formats.aeroset import AeroSet
from codec.formats.khanary import (
    BinFileTable,
    GlyphError,
    GlyphFitError,
    decode,
    encode,
)
from codec.formats.oinf import OinfReader
from codec.formats.stb import StbReader
from codec.schemas import aeroset as AEROSET, gguf as GGUF, http as HTTP, khanary as KHANARY
from codec.schemas.khanary import Glyph

from .conftest import ROOT, vectors_dir
from .servers import FaultServer
from .test_aero_rules import CASES as AERO_CASES
from .test_aeroset_local import _copy_set, _edit_index, _two_sets
from .test_aeroset_remote import FAST
from .test_conformance import VERDICTS
from .test_gguf import CASES as GGUF_CASES, _gguf
from .test_mag_rules import CASES as MAG_CASES, WARNING_CASES as MAG_WARNING_CASES
from .test_oinf_roundtrip import CASES as OINF_CASES, _good as oinf_good, with_dims as oinf_with_dims
from .test_sharded import CHECKPOINT_CASES, SPLIT_CASES, broken_checkpoint, broken_splits
from .test_safetensors import CASES as SAFETENSORS_CASES, WARNING_CASES as SAFETENSORS_WARNING_CASES
from .test_stb_khanary import EXPECT_INVALID as KHANARY_WORDS, KNU, mutated, MUTATED as KHANARY_MUTATED
from .test_stb_khanary import VDIR as STB_VDIR, table as khanary_table
from .test_stb_roundtrip import over_256

GOLDEN = ROOT / "tests" / "golden" / "rule_errors.txt"


def _line(e: E.FormatError) -> str:
    where = f" @ 0x{e.offset:x}" if e.offset is not None else ""
    path = f" {e.path}" if e.path else ""
    return f"{type(e).__name__}: {e.format.upper()}{path}{where}: {e.message} [{e.rule}]"


def _finding(source, fmt: str, cls, rule) -> E.FormatError:
    """The error a user meets first for that rule: raised at open, else listed by validation
    (structure, full, then control level)."""
    try:
        codec.open(source, format=fmt).close()
    except E.FormatError as e:
        if isinstance(e, cls) and e.rule == rule:
            return e
    for level in (dict(), dict(full=True), dict(control=True)):
        rep = codec.validate(source, format=fmt, **level)
        for v in rep.violations:
            for x in (v, *v.consequences):
                if isinstance(x, cls) and x.rule == rule:
                    return x
    raise AssertionError(f"{fmt}: no {cls.__name__}[{rule}]")


def _caught(fn, cls, rule) -> E.FormatError:
    """The error a call the user makes raises (for rules checked on access, outside a file's
    opening and validation, or by an API that is not a file reader)."""
    try:
        fn()
    except E.FormatError as e:
        if isinstance(e, cls) and e.rule == rule:
            return e
        raise AssertionError(f"{cls.__name__}[{rule}] expected, got {type(e).__name__}[{e.rule}]: {e}") from e
    raise AssertionError(f"no {cls.__name__}[{rule}]")


def _oinf_mutant(tmp_path, mutate) -> bytes:
    blob = oinf_good(tmp_path)
    with OinfReader(bytes(blob)) as r:
        mutate(blob, r)
    return bytes(blob)


def _stb_tensor(path, tid):
    with StbReader(path) as r:
        r.tensor(tid)


def _run_word(word):
    with khanary_table() as t:
        t.run(word)


def _aeroset(tmp_path, label, edit=None) -> os.PathLike:
    """The manifest's reference set copied under ``tmp_path/label``, its index edited by ``edit``."""
    d = _copy_set(tmp_path / label)
    if edit is not None:
        _edit_index(d, edit)
    return d


def _aeroset_unreadable_index(tmp_path):
    d = _aeroset(tmp_path, "json")
    (d / "model.aeroset.json").write_text("{not json")
    return d


def _aeroset_missing_part(tmp_path):
    d = _aeroset(tmp_path, "missing")
    os.unlink(d / "part-001.aero")
    return d


def _aeroset_grown_part(tmp_path):
    d = _aeroset(tmp_path, "grown")
    with open(d / "part-001.aero", "ab") as f:
        f.write(b"\0" * 16)
    return d


def _aeroset_foreign_part(tmp_path):
    (tmp_path / "foreign").mkdir()
    d, _ = _two_sets(tmp_path / "foreign", {"x": np.arange(6, dtype=np.float32), "v": np.ones(4, np.float32)})
    return d


def _extra_cases(tmp_path) -> list[tuple[str, str, E.FormatError]]:
    """(rule, label, error) of the rules no vector and no table above reaches: the GGUF, OINF,
    STB, AEROSET, KHANARY and HTTP cases of their own tests, built here under ``tmp_path``."""
    out = []

    def found(label, source, fmt, cls, rule):
        out.append((str(rule), label, _finding(source, fmt, cls, rule)))

    def caught(label, fn, cls, rule):
        out.append((str(rule), label, _caught(fn, cls, rule)))

    for blob, rule, cls in GGUF_CASES:
        found("gguf case", blob, "gguf", cls, rule)
    found("gguf case", b"GGUX" + struct.pack("<IQQ", 3, 0, 0), "gguf", E.MagicError, "GGUF-MAGIC")
    found("gguf case", _gguf(n_kv=2**62), "gguf", E.TruncatedError, "GGUF-TRUNCATED")
    for rule, mutate in OINF_CASES:
        found("oinf case", _oinf_mutant(tmp_path, mutate), "oinf", E.FormatError, rule)
    found("oinf case", oinf_with_dims(tmp_path, [2**63, 0, 1]), "oinf", E.RangeError, "OINF-DIM")
    found("stb case", over_256(), "stb", E.LimitError, "STB-COUNT")
    caught("stb/v12_seed_rank4_rank5_shape_table.stb tensor(0)",
           lambda: _stb_tensor(STB_VDIR / "v12_seed_rank4_rank5_shape_table.stb", 0), E.StructureError, "STB-4-SHAPE")
    found("aeroset case", _aeroset_unreadable_index(tmp_path), "aeroset", E.DecodeError, "AEROSET-INDEX")
    found("aeroset case", _aeroset(tmp_path, "version", lambda i: i.__setitem__(
        "format", {"name": "AEROSET", "version": [9, 9]})), "aeroset", E.UnsupportedVersionError, "AEROSET-FORMAT")
    found("aeroset case", _aeroset(tmp_path, "size", lambda i: i["parts"][0].__setitem__("size_bytes", 2**63)),
          "aeroset", E.FormatError, "AEROSET-LIMIT")
    found("aeroset case", _aeroset(tmp_path, "path", lambda i: i["parts"][0].__setitem__("path", "../outside.aero")),
          "aeroset", E.StructureError, "AEROSET-PATH")
    found("aeroset case", _aeroset_missing_part(tmp_path), "aeroset", E.StructureError, "AEROSET-MISSING")
    found("aeroset case", _aeroset(tmp_path, "shard", lambda i: i["parts"][1].__setitem__("shards", [0, 3])),
          "aeroset", E.StructureError, "AEROSET-SHARD")
    found("aeroset case", _aeroset_foreign_part(tmp_path), "aeroset", E.StructureError, "AEROSET-TENSOR")
    found("aeroset case", _aeroset_grown_part(tmp_path), "aeroset", E.IntegrityError, "AEROSET-PART-HASH")
    for i, (case, rule) in enumerate(CHECKPOINT_CASES):  # (a model in several files)
        found(f"sharded safetensors: {case}", broken_checkpoint(str(tmp_path / f"ckpt{i}"), case), "safetensors",
              E.FormatError, rule)
    for i, (case, rule) in enumerate(SPLIT_CASES):
        found(f"split gguf: {case}", broken_splits(str(tmp_path / f"split{i}"), case), "gguf", E.FormatError, rule)
    for word, rule in KHANARY_WORDS.items():
        caught(f"khanary word {word}", lambda w=word: _run_word(int(w, 16)), GlyphError, rule)
    for mutate, rule in KHANARY_MUTATED:
        caught("khanary word", lambda m=mutate: decode(mutated(m)), GlyphError, rule)
    caught("khanary encode", lambda: encode(Glyph.G_LOAD_BIN_TENSOR, 0, 16), GlyphFitError, KHANARY.Rule.FIT)
    entry = dict(KNU["bin_file_table"]["1"])
    caught("khanary table", lambda: BinFileTable({1: entry | {"size": 1}}, STB_VDIR).reader(1), GlyphError,
           KHANARY.Rule.BIN_CHECK)
    caught("khanary table", lambda: BinFileTable({1: "../outside.stb"}, STB_VDIR).reader(1), GlyphError,
           KHANARY.Rule.BIN_PATH)
    caught("aeroset url", lambda: AeroSet("http:///model.aeroset.json"), E.RemoteError, HTTP.Rule.URL)
    return out


def _read_remote(url, name, **kw):
    with AeroSet(url, cache=False, http=FAST, **kw) as s:
        s.tensor(name)


def _http_cases(tmp_path, monkeypatch) -> list[tuple[str, str, str]]:
    """(rule, label, rendering) of the transport's rules: the reference set served by the local
    misbehaving server of tests/servers.py (its modes as in test_aeroset_remote.py); the server's
    address is written as <server>."""
    _copy_set(tmp_path / "served")
    (tmp_path / "big").mkdir()
    codec.write(str(tmp_path / "big" / "v.gguf"), {"w": np.zeros(4, np.float32)},
                metadata={"tokens": [f"t{i}" for i in range(20_000)]})  # as test_remote_single.py: ~240 KB
    out = []
    with FaultServer(tmp_path) as faults:
        def url(mode):
            return f"{faults.url}/{mode}/served/set/model.aeroset.json"

        def caught(label, fn, cls, rule):
            out.append((str(rule), label, _line(_caught(fn, cls, rule)).replace(faults.url, "<server>")))

        caught("aeroset served with HTTP 500", lambda: _read_remote(url("always-500"), "layer.2.weight"),
               E.RemoteError, HTTP.Rule.REQUEST)
        caught("aeroset served with shifted ranges", lambda: _read_remote(url("bad-range"), "layer.2.weight"),
               E.RemoteError, HTTP.Rule.RANGE)
        caught("aeroset served, max_tensor_bytes=1", lambda: _read_remote(url("ok"), "layer.2.weight",
                                                                            max_tensor_bytes=1),
               E.LimitError, HTTP.Rule.TENSOR_LIMIT)
        with monkeypatch.context() as m:
            m.setattr(AEROSET, "MAX_INDEX_BYTES", 100)
            caught("aeroset served, MAX_INDEX_BYTES=100", lambda: _read_remote(url("ok"), "layer.2.weight"),
                   E.LimitError, HTTP.Rule.LIMIT)
        with monkeypatch.context() as m:
            m.setattr(GGUF, "REMOTE_FIRST_READ", 4096)
            m.setattr(GGUF, "REMOTE_HEADER_LIMIT", 64 * 1024)
            caught("gguf served, REMOTE_HEADER_LIMIT=64 KiB",
                   lambda: codec.open(f"{faults.url}/ok/big/v.gguf", http=FAST).close(), E.LimitError,
                   "GGUF-HEADER-LIMIT")
    return out


def _renderings(tmp_path, monkeypatch) -> list[str]:
    out = []
    for fmt, table in VERDICTS.items():
        for name, (_, cls, rule) in table.items():
            out.append(f"{rule}\t{fmt}/{name}\t" + _line(_finding(vectors_dir(fmt) / name, fmt, cls, rule)))
    for rule, (_, cls, blob) in AERO_CASES.items():
        out.append(f"{rule}\taero case\t" + _line(_finding(blob, "aero", cls, rule)))
    for rule, (cls, blob) in {**MAG_CASES, **MAG_WARNING_CASES}.items():
        out.append(f"{rule}\tmag case\t" + _line(_finding(blob, "mag", cls, rule)))
    for blob, rule, cls in SAFETENSORS_CASES + SAFETENSORS_WARNING_CASES:
        out.append(f"{rule}\tsafetensors case\t" + _line(_finding(blob, "safetensors", cls, rule)))
    for rule, label, e in _extra_cases(tmp_path):
        out.append(f"{rule}\t{label}\t" + _line(e))
    for rule, label, line in _http_cases(tmp_path, monkeypatch):
        out.append(f"{rule}\t{label}\t{line}")
    return sorted(out)


def test_every_rule_error_renders_as_pinned(tmp_path, monkeypatch):
    # a few messages name a directory (the set's, the bin file table's): this machine's part of
    # it is written as <tmp> or <vectors> (and a local server's address as <server>), so the
    # file is the same everywhere
    got = "\n".join(_renderings(tmp_path, monkeypatch)) + "\n"
    got = got.replace(str(tmp_path), "<tmp>").replace(str(vectors_dir("stb").parent), "<vectors>")
    if os.environ.get("MODELCODEC_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(got, encoding="utf-8")
    want = GOLDEN.read_text(encoding="utf-8")
    assert got.splitlines() == want.splitlines()
    assert all("\n" not in line for line in got.splitlines())  # one line each
    assert str(ROOT) not in got and "/tmp/" not in got  # no other path of this machine


# Rules with no pinned rendering, each with the reason no local case can trigger it.
UNPINNED: dict[str, str] = {
}


def test_every_rule_of_every_format_has_a_pinned_rendering():
    rules = {str(r) for mod in schemas.FORMATS.values() for r in mod.Rule}
    rules |= {str(r) for r in KHANARY.Rule} | {str(r) for r in HTTP.Rule}
    pinned = {line.split("\t", 1)[0] for line in GOLDEN.read_text(encoding="utf-8").splitlines()}
    assert set(UNPINNED) <= rules and not set(UNPINNED) & pinned, "stale allow-list entries"
    assert sorted(rules - pinned - set(UNPINNED)) == []
