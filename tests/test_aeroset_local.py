"""AEROSET read from local directories: the manifest's sets, path safety, the atomic writer,
and generated models written as sets (remote sets: test_aeroset_remote.py)."""
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import given, strategies as st

import codec
from codec import errors as E
from codec.tools.cli import main
from codec.formats.aeroset import AeroSet, validate_file, write_aeroset
from codec.schemas.aeroset import Rule

from .conftest import manifest, vectors_dir

VDIR = vectors_dir("aero")
SETS = [v for v in manifest("aero")["vectors"] if v["file"].endswith(".aeroset.json")]


@pytest.mark.parametrize("v", SETS, ids=lambda v: v["file"])
def test_manifest_sets_read_exactly(v):
    with codec.open(VDIR / v["file"]) as s:
        assert s.format == "aeroset" and sorted(s.tensors) == sorted(t["name"] for t in v["tensors"])
        for t in v["tensors"]:
            info = s.tensors[t["name"]]
            assert info.dtype_name == t["dtype"] and list(info.shape) == t["shape"]
            assert hashlib.sha256(s.read_tensor_bytes(t["name"])).hexdigest() == t["sha256"]
        rep = s.validate(full=True)
        if v["expect"] == "valid":
            assert rep.ok, [str(x) for x in rep.violations]
        else:  # the reference writer's zero MJSN hash, in every part
            assert not rep.ok and {x.rule for x in rep.errors} == {"AERO-CHUNK-HASH"}


def _copy_set(tmp_path, name="aeroset_ref"):
    d = tmp_path / "set"
    shutil.copytree(VDIR / name, d)
    return d


def _edit_index(d, fn):
    p = d / "model.aeroset.json"
    idx = json.loads(p.read_text())
    fn(idx)
    p.write_text(json.dumps(idx))


@pytest.mark.parametrize("bad", ["../outside.aero", "/etc/passwd", "sub/../../x.aero"])
def test_paths_cannot_leave_the_set(tmp_path, bad):
    d = _copy_set(tmp_path)
    _edit_index(d, lambda i: i["parts"][0].__setitem__("path", bad))
    with pytest.raises(E.StructureError) as ei:
        AeroSet(d)
    assert ei.value.rule == Rule.PATH


def test_a_symlink_leaving_the_set_is_refused(tmp_path):
    d = _copy_set(tmp_path)
    outside = tmp_path / "elsewhere.aero"
    shutil.copy(d / "part-000.aero", outside)
    (d / "part-000.aero").unlink()
    (d / "part-000.aero").symlink_to(outside)
    with pytest.raises(E.StructureError) as ei:
        AeroSet(d)
    assert ei.value.rule == Rule.PATH


def test_a_changed_part_is_caught_by_full_validation(tmp_path):
    d = _copy_set(tmp_path)
    with open(d / "part-001.aero", "ab") as f:
        f.write(b"\0" * 16)  # zero tail: every AERO check still passes
    assert validate_file(d).ok
    rep = validate_file(d, full=True)
    # by its size alone (its sha256, of other bytes, is not a second finding)
    assert [(x.rule, x.path) for x in rep.errors] == [(Rule.PART_HASH, "index.parts[1].size_bytes")]


def _several_per_part(d):
    """A set of 9 tensors, 3 in each of its 3 parts."""
    write_aeroset(d, {f"t{i}": np.arange(64, dtype=np.float32) + i for i in range(9)}, max_shard_bytes=256,
                  max_part_shards=3)
    with AeroSet(d) as s:
        assert [p["shards"] for p in s.index["parts"]] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
        return [n for n, t in s.tensors.items() if t.extra["part"].endswith("part-001.aero")]


def _said(rep) -> list:
    return [(type(x).__name__, x.rule, x.path, x.offset, x.source) for x in rep.violations]


@pytest.mark.parametrize("change, at", [("grown", "size_bytes"), ("weight byte", "sha256"), ("magic", "sha256")])
def test_a_part_failing_its_check_is_one_finding_not_one_per_tensor(tmp_path, change, at):
    """A part holding several tensors, of another size than its entry's or of its size with other
    bytes: a full validation reports it once -- AEROSET-PART-HASH at index.parts[1].size_bytes
    (the size alone: its sha256 is not also a finding) or index.parts[1].sha256, with no byte
    offset (as every finding of the index) --, and a part that does not open (its magic changed)
    adds its own finding once, in a structure validation too, not once per tensor it holds.  A
    tensor of it is still refused with the part's typed error."""
    d = tmp_path / "set"
    names = _several_per_part(d)
    assert len(names) == 3
    part = d / "part-001.aero"
    data = bytearray(part.read_bytes())
    if change == "grown":
        data += bytes(16)  # (a zero tail: every AERO check still passes)
    else:
        data[-100 if change == "weight byte" else 0] ^= 0xFF
    part.write_bytes(bytes(data))
    rep = validate_file(d, full=True)
    found = _said(rep)
    assert len(found) == len(set(found)), found  # nothing said twice
    hashed = [v for v in rep.errors if v.rule == Rule.PART_HASH]
    assert [(v.path, v.offset, v.source) for v in hashed] == [(f"index.parts[1].{at}", None, str(d / "model.aeroset.json"))]
    others = {(v.rule, v.source) for v in rep.errors if v.rule != Rule.PART_HASH}
    assert others == {"grown": set(), "weight byte": {("AERO-CHUNK-HASH", str(part)), ("AERO-HASH-B3", str(part))},
                      "magic": {("AERO-MAGIC", str(part))}}[change]
    structure = validate_file(d)
    assert len(_said(structure)) == len(set(_said(structure)))
    assert [v.rule for v in structure.errors] == (["AERO-MAGIC"] if change == "magic" else [])
    with AeroSet(d) as s:
        for name in names:
            if change == "magic":
                with pytest.raises(E.MagicError) as ei:
                    s.tensor(name)
                assert (ei.value.rule, ei.value.path, ei.value.offset) == ("AERO-MAGIC", "FileHeader.magic", 0)
            else:  # (a local part is not hashed when read: its tensors' hash_b3 are checked)
                try:
                    s.tensor(name)
                except E.IntegrityError as e:
                    assert e.rule == "AERO-HASH-B3" and change == "weight byte"


def test_index_problems_are_typed(tmp_path):
    d = _copy_set(tmp_path)
    _edit_index(d, lambda i: i["parts"][1].__setitem__("shards", [0, 3]))
    with pytest.raises(E.StructureError) as ei:
        AeroSet(d)
    assert ei.value.rule == Rule.SHARD
    _edit_index(d, lambda i: i.__setitem__("format", {"name": "AEROSET", "version": [9, 9]}))
    with pytest.raises(E.UnsupportedVersionError):
        AeroSet(d)
    (d / "model.aeroset.json").write_text("{not json")
    with pytest.raises(E.DecodeError):
        AeroSet(d)
    for url in ("http:///model.aeroset.json", "https://:80/model.aeroset.json", "http:///x"):
        with pytest.raises(E.RemoteError) as ei:
            AeroSet(url)
        assert ei.value.rule == "HTTP-URL" and url in str(ei.value)
    # (ftp://, s3://... are fsspec URLs -- tests/test_store_s3.py; file:// is a local path)
    with pytest.raises(E.UsageError, match="gopher:// is not a filesystem"):
        AeroSet("gopher://example.invalid/model.aeroset.json")
    with pytest.raises(E.UsageError, match="/etc/none/model.aeroset.json"):
        AeroSet("file:///etc/none/model.aeroset.json")


names = st.text(st.sampled_from("abcdefgh._0123456789"), min_size=1, max_size=8)


@given(st.dictionaries(names, st.integers(0, 40), min_size=1, max_size=12), st.integers(1, 200), st.integers(1, 4),
       st.booleans())
def test_generated_model_as_a_set_reads_back(sizes, max_shard, max_part, with_base_url):
    tensors = {n: np.arange(k, dtype=np.float32) * 1.5 for n, k in sizes.items()}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set")
        write_aeroset(out, tensors, model_name="m", architecture="a", max_shard_bytes=max_shard,
                      max_part_shards=max_part, base_url="https://cdn.invalid/m" if with_base_url else None)
        first = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        write_aeroset(out, tensors, model_name="m", architecture="a", max_shard_bytes=max_shard,
                      max_part_shards=max_part, base_url="https://cdn.invalid/m" if with_base_url else None)
        assert {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)} == first, "deterministic"
        assert sorted(os.listdir(tmp)) == ["set"], "no temp directory left"
        with codec.open(out) as s:
            assert s.index["format"]["version"] == ([0, 2] if with_base_url else [0, 1])
            for n, a in tensors.items():
                assert np.array_equal(s.tensor(n), a)
            parts = s.index["parts"]
            assert all(len(p["shards"]) <= max_part for p in parts)
            assert s.validate(full=True).ok


def test_writer_failure_leaves_no_set(tmp_path):
    with pytest.raises(codec.UsageError):
        write_aeroset(tmp_path / "set", {"ok": np.zeros(3, np.float32), "bad": np.zeros(2, np.complex64)})
    assert list(tmp_path.iterdir()) == []


def test_cli_inspect_set_validate_fetch(tmp_path, capsys):
    assert main(["inspect-set", str(VDIR / "aeroset_global")]) == 0
    assert "part-002.aero" in capsys.readouterr().out
    assert main(["validate", "--full", str(VDIR / "aeroset_ref")]) == 0
    capsys.readouterr()
    out = tmp_path / "t.bin"
    assert main(["fetch-tensor", str(VDIR / "aeroset_ref"), "layer.2.weight", str(out)]) == 0
    with codec.open(VDIR / "aeroset_ref") as s:
        assert out.read_bytes() == s.read_tensor_bytes("layer.2.weight")


def test_a_missing_part_is_reported_not_raised_as_oserror(tmp_path):
    d = _copy_set(tmp_path)
    os.unlink(d / "part-001.aero")
    with AeroSet(d) as s:  # parts open lazily: the set opens
        with pytest.raises(E.StructureError) as ei:
            s.tensor("layer.2.weight")
        assert ei.value.rule == Rule.MISSING and "part-001.aero" in str(ei.value)
        assert s.tensor("layer.0.weight").size
    for full in (False, True):
        rep = validate_file(d, full=full)
        assert not rep.ok and Rule.MISSING in {v.rule for v in rep.errors}
    assert main(["validate", str(d)]) == 1


def test_a_local_index_with_url_paths_needs_remote_true(tmp_path):
    d = _copy_set(tmp_path)
    _edit_index(d, lambda i: i["global_tidx"].__setitem__("path", "http://127.0.0.1:9/index.aero"))
    with pytest.raises(codec.UsageError, match="remote=True"):
        AeroSet(d)


def _two_sets(tmp_path, b_values):
    """Set A, and set B written with the same layout but ``b_values``: B's part is swapped into A
    without its sha256/size in A's index (so only the declared agreement can catch it)."""
    a = {"w": np.arange(6, dtype=np.float32), "v": np.ones(4, np.float32)}
    write_aeroset(tmp_path / "a", a, max_part_shards=1, max_shard_bytes=24)
    write_aeroset(tmp_path / "b", b_values, max_part_shards=1, max_shard_bytes=24)
    with AeroSet(tmp_path / "a") as s:
        i = next(i for i, p in enumerate(s.index["parts"]) if s.tensors["w"].extra["part"].endswith(p["path"]))
        path = s.index["parts"][i]["path"]
    shutil.copyfile(tmp_path / "b" / path, tmp_path / "a" / path)
    _edit_index(tmp_path / "a", lambda idx: [idx["parts"][i].pop(k) for k in ("sha256", "size_bytes")])
    return tmp_path / "a", i


@pytest.mark.parametrize("b_values, says", [
    ({"w": np.arange(6, dtype=np.int32), "v": np.ones(4, np.float32)}, "dtype"),  # same bytes, other dtype
    ({"x": np.arange(6, dtype=np.float32), "v": np.ones(4, np.float32)}, "no record with name 'w'"),
])
def test_a_part_must_describe_a_tensor_as_index_aero_does(tmp_path, b_values, says):
    """AEROSET-TENSOR, declared in the schema (FILE_RELATIONS: Agrees) and checked by codec.io.links."""
    d, i = _two_sets(tmp_path, b_values)
    with AeroSet(d) as s:
        with pytest.raises(E.StructureError) as ei:
            s.tensor("w")
        assert ei.value.rule == Rule.TENSOR and says in str(ei.value), str(ei.value)
        assert ei.value.path in (f"index.parts[{i}]", "index.aero TIDX 'w'")
    rep = validate_file(d)
    assert Rule.TENSOR in {v.rule for v in rep.errors}, rep.violations


def _index_naming(d, entry):
    """A *.aeroset.json listing ``entry`` (a file of the user's) as index.aero and as a part."""
    idx = {"format": {"name": "AEROSET", "version": [0, 1]}, "model": {"name": "x"},
           "parts": [dict(entry, shards=[0])], "global_tidx": dict(entry)}
    (d / "model.aeroset.json").write_text(json.dumps(idx))


@pytest.mark.parametrize("entry", [
    {"path": "data.bin"},  # named only
    {"path": "data.bin", "size_bytes": 11},  # the right size, no sha256
    {"path": "data.bin", "size_bytes": 11, "sha256": "0" * 64},  # the right size, another sha256
])
@pytest.mark.parametrize("how", ["write_aeroset", "convert"])
def test_replacing_a_set_never_deletes_a_file_an_index_merely_names(tmp_path, entry, how):
    d = tmp_path / "out"
    d.mkdir()
    (d / "data.bin").write_bytes(b"user's data")
    _index_naming(d, entry)
    before = sorted(os.listdir(d))
    with pytest.raises(codec.UsageError, match="data.bin"):
        if how == "convert":
            src = tmp_path / "src.aero"
            codec.write(src, {"w": np.ones(3, np.float32)})
            codec.convert(src, d)
        else:
            write_aeroset(d, {"w": np.ones(3, np.float32)})
    assert (d / "data.bin").read_bytes() == b"user's data" and sorted(os.listdir(d)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out", "src.aero"] if how == "convert" else ["out"])


def test_a_set_whose_part_was_swapped_for_a_users_file_is_not_replaced(tmp_path):
    """A part of a set this writer wrote, replaced by another file of the same name and size:
    only its sha256 tells it is not the part, and it is kept."""
    d = tmp_path / "set"
    write_aeroset(d, {"w": np.arange(6, dtype=np.float32)})
    part = d / "part-000.aero"
    mine = bytes(reversed(part.read_bytes()))
    part.write_bytes(mine)
    with pytest.raises(codec.UsageError, match="part-000.aero"):
        write_aeroset(d, {"w": np.zeros(6, np.float32)})
    assert part.read_bytes() == mine and sorted(p.name for p in tmp_path.iterdir()) == ["set"]
    part.unlink()  # (a set whose listed file is gone: nothing of the user's to lose)
    write_aeroset(d, {"w": np.zeros(6, np.float32)})
    with codec.open(d) as s:
        assert np.array_equal(s.tensor("w"), np.zeros(6, np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


@pytest.mark.parametrize("fmt", [None, "aeroset", "AEROSET"])
def test_an_index_path_means_the_same_with_or_without_format(tmp_path, fmt):
    t = {"w": np.arange(4, dtype=np.float32)}
    out = codec.write(tmp_path / "d" / "model.aeroset.json", t, format=fmt)
    assert os.path.isdir(out) and os.path.samefile(out, tmp_path / "d")
    assert (tmp_path / "d" / "model.aeroset.json").is_file()
    with codec.open(tmp_path / "d" / "model.aeroset.json") as s:
        assert np.array_equal(s.tensor("w"), t["w"])
    d = tmp_path / "other"
    codec.convert(tmp_path / "d", d / "model.aeroset.json", format=fmt)
    assert (d / "model.aeroset.json").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["d", "other"]


def test_full_validation_hashes_each_file_while_it_checks_it(tmp_path, monkeypatch):
    """A part's sha256 is taken on a thread of its own while the part's AERO check reads it (the
    two share the cores), and its findings are the same: a part changed in its last byte."""
    import threading

    from codec.formats import aero as A
    from codec.io import links
    d = tmp_path / "s"
    write_aeroset(str(d), {f"t{i}": np.full(5000, i, np.float32) for i in range(6)}, max_shard_bytes=40000,
                  max_part_shards=2, progress=False)
    checking, seen = threading.Event(), []
    digest_source, validate = links.digest_source, A.AeroReader.validate_file.__func__

    def hashing(decl, src):
        seen.append(threading.current_thread() is not threading.main_thread())
        assert checking.wait(10)  # (the check of this file runs meanwhile)
        return digest_source(decl, src)

    def checked(cls, *a, **kw):
        checking.set()
        try:
            return validate(cls, *a, **kw)
        finally:
            checking.clear()
    monkeypatch.setattr(links, "digest_source", hashing)
    monkeypatch.setattr(A.AeroReader, "validate_file", classmethod(checked))
    assert validate_file(str(d), full=True).ok
    n = len(json.loads((d / "model.aeroset.json").read_text())["parts"]) + 1  # (and index.aero)
    assert seen == [True] * n
    part = d / "part-001.aero"
    raw = bytearray(part.read_bytes())
    raw[-1] ^= 1
    part.write_bytes(bytes(raw))
    rep = validate_file(str(d), full=True)
    assert [(x.rule, x.path) for x in rep.errors if x.rule == Rule.PART_HASH] == [
        (Rule.PART_HASH, "index.parts[1].sha256")]


def test_part_and_read_tensors_name_a_wrong_argument(tmp_path):
    """A part index that is not an integer, and names given as one str (which would be read
    letter by letter) or None, are UsageErrors naming the argument -- of a set and of a sharded
    checkpoint alike (a negative file number took the last file)."""
    import codec
    from codec import errors as E
    t = {"w": np.arange(6, dtype=np.float32), "b": np.ones(3, np.int8)}
    s = codec.open(codec.write(str(tmp_path / "set") + "/", t, format="aeroset"))
    with s:
        with pytest.raises(E.UsageError, match=r"part\(i\): i must be an integer, not str"):
            s.part("0")
        for names in ("wb", None, 3):
            with pytest.raises(E.UsageError, match=rf"read_tensors\(names\): names must be a list of tensor names, not {type(names).__name__}"):
                s.read_tensors(names)
        assert s.read_tensors(iter(["b", "w"])).keys() == {"b", "w"}
    codec.write(str(tmp_path / "m.safetensors"), t, max_shard_size="20B")
    with codec.open(str(tmp_path / "m.safetensors.index.json")) as m:
        for k in (-1, "0", len(m.listed)):
            with pytest.raises(E.UsageError, match=r"no file .* \(part\(k\) takes 0 to "):
                m.part(k)


def test_remote_on_a_local_set_without_base_url_says_how_to_read_it(tmp_path, capsys):
    """The message names both ways out, the Python keyword and the CLI flag: a base_url, or
    reading the files beside the index (the CLI has no --base-url)."""
    from codec.tools.cli import main
    d = codec.write(str(tmp_path / "set") + "/", {"w": np.arange(6, dtype=np.float32)}, format="aeroset")
    with pytest.raises(E.UsageError, match=r"give base_url=\.\.\.; without remote=True, CLI --remote, its files are read beside"):
        codec.open(d, remote=True)
    assert main(["validate", "--remote", d]) == 1
    assert "without remote=True, CLI --remote" in capsys.readouterr().err
