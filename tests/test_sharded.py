"""Models in several files (issue 32 §4): a sharded Hugging Face checkpoint
(``model.safetensors.index.json`` and its ``model-0000X-of-0000N.safetensors`` shards) and a split
GGUF model (``NAME-0000X-of-0000N.gguf``, as gguf-split writes it) open as one model, validate
with a finding of its own rule for each way the files disagree, and are written with
``max_shard_size`` as Hugging Face and gguf-split write them -- read back by the official
``safetensors`` library and the index convention, and by gguf-py, split by split."""
from __future__ import annotations

import json
import os

import gguf
from hypothesis import HealthCheck, given, settings, strategies as st
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import codec
from codec.tools import cli

TENSORS = {"model.embed.weight": np.arange(24, dtype=np.float32).reshape(6, 4),
           "model.layers.0.w": np.arange(-8, 8, dtype=np.int32).reshape(4, 4),
           "model.layers.1.w": np.linspace(-1, 1, 10, dtype=np.float16),
           "lm_head.weight": np.arange(12, dtype=np.float64).reshape(3, 4)}


def hf_checkpoint(folder, shards: list[dict], *, weight_map=None, total_size=None) -> str:
    """A sharded checkpoint as Hugging Face writes it: each shard with safetensors' own writer
    (``{"format": "pt"}``), then the index (sorted keys, indent 2)."""
    os.makedirs(folder, exist_ok=True)
    n = len(shards)
    wm, total = {}, 0
    for i, part in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        save_file(part, os.path.join(folder, name), metadata={"format": "pt"})
        for k, a in part.items():
            wm[k] = name
            total += a.nbytes
    index = {"metadata": {"total_size": total if total_size is None else total_size},
             "weight_map": wm if weight_map is None else weight_map}
    path = os.path.join(folder, "model.safetensors.index.json")
    with open(path, "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return path


def two_shards() -> list[dict]:
    names = list(TENSORS)
    return [{k: TENSORS[k] for k in names[:2]}, {k: TENSORS[k] for k in names[2:]}]


def same(r, want: dict) -> None:
    assert sorted(r.tensors) == sorted(want)
    for k, a in want.items():
        got = r.tensor(k)
        assert got.dtype == a.dtype and got.shape == a.shape and got.tobytes() == a.tobytes(), k


def rules(rep) -> list[str]:
    return [str(v.rule) for v in rep.violations]


# ------------------------------------------------------------------------------ Hugging Face: read
def test_a_checkpoint_hugging_face_writes_opens_as_one_model_from_its_index_or_directory(tmp_path):
    index = hf_checkpoint(tmp_path / "ckpt", two_shards())
    for source in (index, str(tmp_path / "ckpt")):
        with codec.open(source) as r:
            assert r.format == "safetensors" and r.metadata == {"format": "pt"}
            same(r, TENSORS)
            assert r.tensors["lm_head.weight"].extra["file"] == "model-00002-of-00002.safetensors"
            assert dict(r.items()).keys() == TENSORS.keys()
    rep = codec.validate(index, full=True)
    assert rep.ok and rep.format == "safetensors", rep.violations
    assert cli.main(["validate", "--full", str(tmp_path / "ckpt")]) == 0
    assert codec.load(index).keys() == TENSORS.keys()


def test_shards_are_opened_when_a_tensor_in_them_is_read(tmp_path):
    """Opening reads the index only: a shard cut short afterwards is noticed by the first read
    of a tensor in it, while the other shard's tensors still read."""
    index = hf_checkpoint(tmp_path / "ckpt", two_shards())
    with codec.open(index) as r:
        second = tmp_path / "ckpt" / "model-00002-of-00002.safetensors"
        os.truncate(second, 20)
        assert np.array_equal(r["model.embed.weight"], TENSORS["model.embed.weight"])
        with pytest.raises(codec.FormatError) as e:
            r["lm_head.weight"]
        assert e.value.rule.startswith("SAFETENSORS-") and "model-00002" in str(e.value.source)


def test_a_shard_is_checked_against_the_weight_map_when_it_is_first_opened(tmp_path):
    """A shard holding a tensor the map does not put there, or lacking one it does, is refused
    at its first use, naming the tensor; the other shards read."""
    for case, name in (("tensor the map does not name", "lm_head.weight"), ("tensor not in its shard", "ghost")):
        index = broken_checkpoint(tmp_path / case.replace(" ", "-"), case)
        with codec.open(index) as r:
            assert np.array_equal(r["model.embed.weight" if "ghost" not in name else "model.layers.1.w"],
                                  TENSORS["model.embed.weight" if "ghost" not in name else "model.layers.1.w"])
            with pytest.raises(codec.FormatError, match=repr(name)) as e:
                r["model.layers.0.w" if name == "ghost" else "model.layers.1.w"]
            assert e.value.rule == "SAFETENSORS-SHARD-TENSOR"


#: each way an index and its shards can disagree, and the rule of its finding
CHECKPOINT_CASES = [
    ("missing shard", "SAFETENSORS-SHARD-MISSING"),
    ("tensor not in its shard", "SAFETENSORS-SHARD-TENSOR"),
    ("tensor in another shard", "SAFETENSORS-SHARD-TENSOR"),
    ("tensor the map does not name", "SAFETENSORS-SHARD-TENSOR"),
    ("tensor in two shards", "SAFETENSORS-SHARD-TENSOR"),
    ("total size", "SAFETENSORS-TOTAL-SIZE"),
    ("shard outside the directory", "SAFETENSORS-SHARD-PATH"),
    ("weight map not a map", "SAFETENSORS-INDEX"),
    ("index not JSON", "SAFETENSORS-INDEX"),
    ("broken shard", "SAFETENSORS-HEADER-LENGTH"),
]


def broken_checkpoint(folder, case: str) -> str:
    """A checkpoint as Hugging Face writes it, broken as ``case`` says; its index's path."""
    shards = two_shards()
    wm = {k: f"model-0000{1 if k in shards[0] else 2}-of-00002.safetensors" for k in TENSORS}
    kw: dict = {}
    if case == "tensor not in its shard":
        kw["weight_map"] = {**wm, "ghost": "model-00001-of-00002.safetensors"}
    elif case == "tensor in another shard":
        kw["weight_map"] = {**wm, "lm_head.weight": "model-00001-of-00002.safetensors"}
    elif case == "tensor the map does not name":
        kw["weight_map"] = {k: v for k, v in wm.items() if k != "lm_head.weight"}
    elif case == "total size":
        kw["total_size"] = 12345
    elif case == "shard outside the directory":
        kw["weight_map"] = {**wm, "lm_head.weight": "../elsewhere.safetensors"}
    if case == "tensor in two shards":
        shards[1]["model.embed.weight"] = TENSORS["model.embed.weight"]
        kw["weight_map"], kw["total_size"] = wm, sum(a.nbytes for a in TENSORS.values())
    index = hf_checkpoint(folder, shards, **kw)
    second = os.path.join(folder, "model-00002-of-00002.safetensors")
    if case == "missing shard":
        os.remove(second)
    elif case == "weight map not a map":
        with open(index, "w") as f:
            f.write('{"weight_map": ["a"]}')
    elif case == "index not JSON":
        with open(index, "w") as f:
            f.write('{"weight_map": ')
    elif case == "broken shard":
        with open(second, "wb") as f:
            f.write(b"\x00" * 8)
    return index


@pytest.mark.parametrize("case,rule", CHECKPOINT_CASES)
def test_each_way_an_index_and_its_shards_disagree_is_a_finding_of_its_rule(tmp_path, case, rule, capsys):
    index = broken_checkpoint(tmp_path / "ckpt", case)
    rep = codec.validate(index, full=True)
    assert rule in rules(rep), (case, rep.violations)
    assert all(isinstance(v, codec.FormatError) and v.format == "safetensors" for v in rep.violations)
    warns = rule == "SAFETENSORS-TOTAL-SIZE"  # (a warning: no reader needs it, writers have counted it differently)
    assert rep.ok == warns
    assert {rep.severity(v) for v in rep.violations if v.rule == rule} == {"warning" if warns else "error"}
    assert cli.main(["validate", index]) == (0 if warns else 1)
    assert rule in capsys.readouterr().out
    if case in ("missing shard", "shard outside the directory", "weight map not a map", "index not JSON"):
        with pytest.raises(codec.FormatError) as e:  # (what the index says cannot be used: open says so)
            codec.open(index)
        assert e.value.rule == rule


# ------------------------------------------------------------------------------ Hugging Face: write
def test_max_shard_size_writes_shards_and_the_index_as_hugging_face_names_them(tmp_path):
    path = codec.write(str(tmp_path / "out" / "model.safetensors.index.json"), TENSORS, metadata={"format": "pt"},
                       max_shard_size=150)
    assert path.endswith("model.safetensors.index.json")
    index = json.loads(open(path).read())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(shards + ["model.safetensors.index.json"])
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in TENSORS.values())
    assert list(index["weight_map"]) == list(TENSORS)
    # read back by the official library, each shard with safe_open, assembled by the index
    got = {}
    for name, shard in index["weight_map"].items():
        with safe_open(str(tmp_path / "out" / shard), framework="np") as f:
            assert f.metadata() == {"format": "pt"}
            got[name] = f.get_tensor(name)
    for name, shard in ((n, s) for s in shards for n in safe_open(str(tmp_path / "out" / s), "np").keys()):
        assert index["weight_map"][name] == shard  # (no shard holds a tensor the map puts elsewhere)
    assert all(got[k].dtype == a.dtype and np.array_equal(got[k], a) for k, a in TENSORS.items())
    for shard in shards:
        sizes = [a.nbytes for n, a in TENSORS.items() if index["weight_map"][n] == shard]
        assert sum(sizes) <= 150 or len(sizes) == 1


def test_a_name_or_a_directory_decides_the_layout_and_sizes_take_hugging_faces_units(tmp_path):
    from codec.formats.multifile import parse_size
    assert [parse_size(v) for v in ("5GB", "500MB", "2GiB", "10KB", "1000", 7, "1.5kB")] == \
        [5 * 10**9, 500 * 10**6, 2 * 2**30, 10**4, 1000, 7, 1500]
    for bad in ("0", 0, -1, "5 parsecs", "GB", 1.5, True, "x"):
        with pytest.raises(codec.UsageError, match="max_shard_size"):
            codec.write(str(tmp_path / "bad.safetensors"), TENSORS, max_shard_size=bad)
    assert not os.listdir(tmp_path)
    # a single name: one file when it fits, else shards named after it and its index
    one = codec.write(str(tmp_path / "a.safetensors"), TENSORS, max_shard_size="1KB")
    assert one.endswith("a.safetensors") and sorted(os.listdir(tmp_path)) == ["a.safetensors"]
    many = codec.write(str(tmp_path / "b.safetensors"), TENSORS, max_shard_size="100B")
    assert many == str(tmp_path / "b.safetensors.index.json")
    assert os.path.exists(tmp_path / "b-00003-of-00003.safetensors")
    # a directory (with --to): its model.safetensors.index.json
    assert cli.main(["convert", many, str(tmp_path / "dir") + "/", "--to", "safetensors", "--max-shard-size",
                     "150"]) == 0
    with codec.open(str(tmp_path / "dir")) as r:
        same(r, TENSORS)
        assert len({r.tensors[n].extra["file"] for n in r.tensors}) > 1
    with pytest.raises(codec.UsageError, match="max_shard_size"):
        codec.convert(many, str(tmp_path / "m.mag"), max_shard_size="1KB")


def test_a_checkpoint_comes_back_exactly_through_every_format(tmp_path):
    index = hf_checkpoint(tmp_path / "ckpt", two_shards())
    for i, mid in enumerate(("m.aero", "set/model.aeroset.json", "m.oinf", "m.gguf", "m.safetensors")):
        m = codec.convert(index, str(tmp_path / f"{i}-{mid}"))
        back = codec.convert(m, str(tmp_path / f"back{i}" / "model.safetensors.index.json"), max_shard_size="200B")
        with codec.open(back) as r:
            same(r, TENSORS)
            assert r.metadata == {"format": "pt"}
        assert codec.validate(back, full=True).ok


# ------------------------------------------------------------------------------ GGUF splits
def gguf_py_split(path, tensors: dict, split_max_size: int) -> str:
    w = gguf.GGUFWriter(str(path), "llama", split_max_size=split_max_size)
    w.add_uint32("llama.block_count", 2)
    for k, a in tensors.items():
        w.add_tensor(k, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


SPLIT_TENSORS = {"tok_embd.weight": np.arange(32, dtype=np.float32).reshape(4, 8),
                 "blk.0.attn.weight": np.arange(64, dtype=np.float16).reshape(8, 8),
                 "output.weight": np.arange(16, dtype=np.float32)}


def test_a_split_model_gguf_py_writes_opens_as_one_model_from_its_first_split(tmp_path):
    gguf_py_split(tmp_path / "m.gguf", SPLIT_TENSORS, 130)
    first = str(tmp_path / "m-00001-of-00003.gguf")
    assert os.path.exists(tmp_path / "m-00003-of-00003.gguf")
    with codec.open(first) as r:
        assert r.format == "gguf"
        same(r, SPLIT_TENSORS)
        assert r.metadata == {"general.architecture": "llama", "llama.block_count": 2}
        assert r.value_types["llama.block_count"] == "uint32"
    assert codec.validate(first, full=True).ok
    with codec.open(str(tmp_path / "m-00002-of-00003.gguf")) as one:  # (a later split alone: one file)
        assert list(one.tensors) == ["blk.0.attn.weight"]


def test_max_shard_size_writes_splits_as_gguf_split_does_and_gguf_py_reads_each(tmp_path):
    md = {"general.architecture": "llama", "llama.block_count": np.uint32(2)}
    first = codec.write(str(tmp_path / "m.gguf"), SPLIT_TENSORS, metadata=md, max_shard_size="130B")
    assert first == str(tmp_path / "m-00001-of-00003.gguf")
    seen = {}
    for i in range(3):
        g = gguf.GGUFReader(str(tmp_path / f"m-{i + 1:05d}-of-00003.gguf"))
        f = g.fields
        assert (f["split.no"].parts[-1][0], f["split.count"].parts[-1][0], f["split.tensors.count"].parts[-1][0]) \
            == (i, 3, 3)
        assert (f["split.no"].types, f["split.count"].types, f["split.tensors.count"].types) == \
            ([gguf.GGUFValueType.UINT16], [gguf.GGUFValueType.UINT16], [gguf.GGUFValueType.INT32])
        assert ("llama.block_count" in f) == (i == 0)
        for t in g.tensors:
            seen[t.name] = np.array(t.data).reshape(tuple(reversed(t.shape.tolist())))
    assert all(np.array_equal(seen[k], a) and seen[k].dtype == a.dtype for k, a in SPLIT_TENSORS.items())
    with codec.open(first) as r:
        same(r, SPLIT_TENSORS)
        assert r.value_types == {"general.architecture": "string", "llama.block_count": "uint32"}
    # fits: one plain file
    assert codec.write(str(tmp_path / "one.gguf"), SPLIT_TENSORS, max_shard_size="1MB") == str(tmp_path / "one.gguf")


def _splits(folder, parts: list[dict], keys: list[dict]) -> str:
    """A split model written file by file (``keys``: each split's split keys, as given)."""
    n = len(parts)
    for i, (part, k) in enumerate(zip(parts, keys)):
        os.replace(codec.write(os.path.join(folder, "one.gguf"), part, metadata=k),
                   os.path.join(folder, f"x-{i + 1:05d}-of-{n:05d}.gguf"))
    return os.path.join(folder, f"x-00001-of-{n:05d}.gguf")


def _keys(no, count=2, total=3) -> dict:
    return {"split.no": np.uint16(no), "split.count": np.uint16(count), "split.tensors.count": np.int32(total)}


#: each way the splits of a model can disagree, and the rule of its finding
SPLIT_CASES = [
    ("missing split", "GGUF-SPLIT-MISSING"),
    ("wrong split.no", "GGUF-SPLIT"),
    ("wrong split.count", "GGUF-SPLIT"),
    ("wrong split.tensors.count", "GGUF-SPLIT"),
    ("wrong key type", "GGUF-SPLIT"),
    ("no split keys", "GGUF-SPLIT"),
    ("tensor in two splits", "GGUF-SPLIT"),
    ("broken split", "GGUF-MAGIC"),
]


def broken_splits(folder, case: str) -> str:
    """A model in two splits, broken as ``case`` says; its first split's path."""
    os.makedirs(folder, exist_ok=True)
    names = list(SPLIT_TENSORS)
    parts = [{names[0]: SPLIT_TENSORS[names[0]]}, {k: SPLIT_TENSORS[k] for k in names[1:]}]
    keys = [_keys(0), _keys(1)]
    if case == "wrong split.no":
        keys[1]["split.no"] = np.uint16(0)
    elif case == "wrong split.count":
        keys[1]["split.count"] = np.uint16(3)
    elif case == "wrong split.tensors.count":
        keys = [_keys(0, total=5), _keys(1, total=5)]
    elif case == "wrong key type":
        keys[1]["split.no"] = np.uint32(1)
    elif case == "no split keys":
        keys[1] = {}
    elif case == "tensor in two splits":
        parts[1][names[0]] = SPLIT_TENSORS[names[0]]
        keys = [_keys(0, total=4), _keys(1, total=4)]
    first = _splits(folder, parts, keys)
    second = os.path.join(folder, "x-00002-of-00002.gguf")
    if case == "missing split":
        os.remove(second)
    elif case == "broken split":
        with open(second, "wb") as f:
            f.write(b"GGUX" + bytes(40))
    return first


@pytest.mark.parametrize("case,rule", SPLIT_CASES)
def test_each_way_splits_disagree_is_a_finding_of_its_rule(tmp_path, case, rule):
    first = broken_splits(tmp_path, case)
    rep = codec.validate(first, full=True)
    assert not rep.ok and rule in rules(rep), (case, rep.violations)
    assert cli.main(["validate", first]) == 1
    with pytest.raises(codec.FormatError) as e:
        codec.open(first)
    assert e.value.rule == rule


def test_a_split_model_comes_back_exactly_through_every_format(tmp_path):
    first = gguf_py_split(tmp_path / "m.gguf", SPLIT_TENSORS, 130).replace("m.gguf", "m-00001-of-00003.gguf")
    for i, mid in enumerate(("m.aero", "set/model.aeroset.json", "m.safetensors")):
        m = codec.convert(first, str(tmp_path / f"{i}-{mid}"), **({"drop_metadata": True} if "safe" in mid else {}))
        back = codec.convert(m, str(tmp_path / f"back{i}.gguf"), max_shard_size=130)
        assert back.endswith(f"back{i}-00001-of-00003.gguf")
        with codec.open(back) as r:
            same(r, SPLIT_TENSORS)
            if "safe" not in mid:
                assert r.metadata == {"general.architecture": "llama", "llama.block_count": 2}
                assert r.value_types["llama.block_count"] == "uint32"
        assert codec.validate(back, full=True).ok


def test_the_cli_converts_with_max_shard_size_and_its_help_says_so(tmp_path, capsys):
    src = codec.write(str(tmp_path / "m.aero"), TENSORS)
    assert cli.main(["convert", src, str(tmp_path / "o.gguf"), "--max-shard-size", "200"]) == 0
    assert "o-00001-of-" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["convert", "--help"])
    assert "--max-shard-size" in capsys.readouterr().out


def test_paths_the_layouts_claim_and_names_they_write(tmp_path):
    from codec import registry
    assert registry.claiming("m/model.safetensors.index.json").name == "safetensors"
    assert registry.claiming("x-00001-of-00003.gguf").name == "gguf"
    for other in ("x-00002-of-00003.gguf", "x.gguf", "m.safetensors", "https://h/m.safetensors"):
        assert registry.claiming(other) is None, other
    for url in ("https://h/m/model.safetensors.index.json", "https://h/x-00001-of-00002.gguf?dl=1"):
        assert registry.claiming(url) is not None, url  # (read as one model: tests/test_remote_sharded.py)
    assert registry.claiming(str(tmp_path)) is None
    hf_checkpoint(tmp_path, two_shards())
    assert registry.claiming(str(tmp_path)).name == "safetensors"
    d, target = registry.for_write("out/model.safetensors.index.json")
    assert (d.name, target) == ("safetensors", "out/model.safetensors.index.json")


def test_inspect_json_of_a_model_in_several_files_follows_the_schema(tmp_path, capsys):
    from .test_json_output import _conforms
    index = hf_checkpoint(tmp_path / "ckpt", two_shards())
    first = codec.write(str(tmp_path / "g.gguf"), SPLIT_TENSORS, max_shard_size=130)
    for path, fmt in ((index, "safetensors"), (first, "gguf")):
        assert cli.main(["inspect", "--json", path]) == 0
        doc = json.loads(capsys.readouterr().out)
        _conforms("inspect", doc)
        assert doc["format"] == fmt and len(doc["files"]) > 1 and len({t["file"] for t in doc["tensors"]}) > 1
        assert cli.main(["validate", "--json", "--full", path]) == 0
        _conforms("validate", json.loads(capsys.readouterr().out))
        assert cli.main(["inspect", path]) == 0
        out = capsys.readouterr().out
        assert "file=" in out and f"files     {len(doc['files'])}: " in out
        with codec.open(path) as r:  # (the byte map of every file: inspect --html)
            maps = r.byte_maps()
            assert sorted(os.path.basename(m[0]) for m in maps) == sorted(doc["files"])
        page = str(tmp_path / f"{fmt}.html")
        assert cli.main(["inspect", path, "--html", page]) == 0 and os.path.getsize(page) > 0
        capsys.readouterr()


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
@settings(max_examples=int(os.environ.get("RT_EXAMPLES", 25)), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_whatever_a_format_holds_comes_back_from_its_shards(fmt, data, tmp_path_factory):
    """Tensors and metadata of every kind the format holds (empty tensors, 0-d, big-endian ...),
    written in shards of any size, read back as one model: the same tensors and metadata."""
    from .test_roundtrip_formats import _same_tensors, domain_metadata, domain_tensors, same_metadata
    from codec.convert import tensor_of
    tensors = data.draw(domain_tensors(fmt), "tensors")
    metadata = data.draw(domain_metadata(fmt), "metadata")
    size = data.draw(st.integers(1, 64), "max_shard_size")
    d = tmp_path_factory.mktemp(fmt)
    name = "model.safetensors.index.json" if fmt == "safetensors" else "m.gguf"
    if fmt == "safetensors" and metadata and not tensors:  # (the shards hold the metadata: none here)
        with pytest.raises(codec.UsageError, match="no shard to hold its metadata"):
            codec.write(str(d / name), tensors, max_shard_size=size, metadata=metadata)
        assert not os.listdir(d)
        metadata = {}
    p = codec.write(str(d / name), tensors, max_shard_size=size, **({"metadata": metadata} if metadata else {}))
    with codec.open(p) as r:
        _same_tensors({k: tensor_of(r, k) for k in r.tensors}, tensors)
        same_metadata(fmt, r, metadata)
        assert list(r.tensors) == [str(k) for k in tensors]
    assert codec.validate(p, full=True).ok


def test_a_gguf_named_as_a_first_split_is_written_as_that_many_splits_or_refused(tmp_path):
    one = codec.write(str(tmp_path / "a-00001-of-00001.gguf"), SPLIT_TENSORS)
    with codec.open(one) as r:  # (one split, with its split keys: reads back as a split model)
        same(r, SPLIT_TENSORS)
        assert r.metadata == {}
    assert gguf.GGUFReader(one).fields["split.count"].parts[-1][0] == 1
    three = codec.write(str(tmp_path / "b-00001-of-00003.gguf"), SPLIT_TENSORS, max_shard_size=130)
    assert three == str(tmp_path / "b-00001-of-00003.gguf") and codec.validate(three).ok
    for name, size in (("c-00001-of-00002.gguf", None), ("d-00001-of-00002.gguf", 130)):
        with pytest.raises(codec.UsageError, match="the name says 2 splits"):
            codec.write(str(tmp_path / name), SPLIT_TENSORS, **({"max_shard_size": size} if size else {}))
    assert sorted(os.listdir(tmp_path)) == ["a-00001-of-00001.gguf"] + [f"b-0000{i}-of-00003.gguf" for i in (1, 2, 3)]


def test_the_check_of_a_checkpoint_in_one_shard_counts_one_file_and_one_tensor(tmp_path):
    path = hf_checkpoint(tmp_path / "m", [{"w": TENSORS["lm_head.weight"]}])
    rep = codec.validate(path)
    said = [c for c in rep.checked if "read)" in c]
    assert said and said[0].startswith("1 file (1 read) and 1 tensor: "), rep.checked
