"""Read, then write: metadata read from a file goes back into a writer with its types (issue
32 §4b), a reader's metadata of any format is accepted by the JSON writers, and the metadata a
user sees is the file's own (the kept types are not a key of it; §5)."""
import os

import numpy as np
import pytest

import codec
from codec.engine import values

W = {"w": np.arange(64, dtype=np.float32).reshape(2, 32)}
#: GGUF metadata of many value types (llama.cpp checks e.g. that block_count is a UINT32)
TYPED = {"general.architecture": "llama", "general.name": "tiny", "llama.block_count": np.uint32(30),
         "llama.context_length": np.uint32(2048), "u8": np.uint8(3), "i16": np.int16(-2), "f64": np.float64(0.5),
         "f32": np.float32(0.25), "ok": True, "big": np.uint64(7),
         "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>"],
         "tokenizer.ggml.scores": np.array([0.0, -1.5, 2.0], np.float32),
         "nested": [np.array([1, 2], np.uint16), np.array([3], np.uint16)]}


def _gguf(tmp_path, name="a.gguf", metadata=TYPED):
    p = str(tmp_path / name)
    codec.write(p, W, metadata=metadata)
    return p


def test_gguf_metadata_read_then_written_keeps_every_value_type(tmp_path):
    with codec.open(_gguf(tmp_path)) as r:
        types = r.value_types
        assert types["llama.block_count"] == "uint32" and types["u8"] == "uint8" and types["f64"] == "float64"
        codec.write(str(tmp_path / "b.gguf"), W, metadata=r.metadata)
    with codec.open(str(tmp_path / "b.gguf")) as b:
        assert b.value_types == types


def test_a_changed_value_takes_its_own_type_when_the_kept_one_cannot_hold_it(tmp_path):
    with codec.open(_gguf(tmp_path)) as r:
        md = r.metadata
    md["u8"] = 1000                  # no longer a uint8: the smallest type that holds it
    md["llama.block_count"] = 31     # still a uint32
    md["i16"] = np.int64(5)          # a numpy scalar keeps its own type
    codec.write(str(tmp_path / "b.gguf"), W, metadata=md)
    with codec.open(str(tmp_path / "b.gguf")) as b:
        t = b.value_types
    assert (t["u8"], t["llama.block_count"], t["i16"]) == ("int32", "uint32", "int64")


@pytest.mark.parametrize("target", ["m.aero", "set/model.aeroset.json"])
def test_the_aero_writers_take_a_gguf_readers_metadata_and_give_its_types_back(tmp_path, target):
    with codec.open(_gguf(tmp_path)) as r:
        want, types = r.metadata, r.value_types
        out = str(tmp_path / target)
        codec.write(out, W, metadata=r.metadata)
    with codec.open(out) as a:
        md = a.metadata
        assert values.TYPES_KEY not in md and values.TYPES_KEY not in a.keys()
        assert a.value_types == {**types, **a.value_types} and md.value_types == a.value_types
        assert list(md)[:len(want)] == list(want)
        for k, v in want.items():  # arrays of numbers come back as GGUF gives them: numpy arrays
            assert type(md[k]) is type(v) or (isinstance(v, (int, float, bool, np.generic))
                                               and values.plain(md[k]) == values.plain(v)), k
        codec.write(str(tmp_path / "c.gguf"), W, metadata=md)
    with codec.open(str(tmp_path / "c.gguf")) as c:
        assert {k: c.value_types[k] for k in types} == types


def test_numpy_metadata_is_json_for_aero(tmp_path):
    """A plain dict of numpy values (no reader behind it) is written, each value's type kept."""
    p = str(tmp_path / "m.aero")
    codec.write(p, W, metadata={"n": np.uint8(4), "a": np.arange(3, dtype=np.int16), "nan": np.float32("nan")})
    with codec.open(p) as r:
        assert r.value_types == {"n": "uint8", "a": "array[int16]", "nan": "float32"}
        assert r.metadata["a"].dtype == np.int16 and np.isnan(r.metadata["nan"])


def test_gguf_to_aero_fills_the_architecture_and_name(tmp_path):
    src = _gguf(tmp_path)
    for target in ("m.aero", "set/model.aeroset.json"):
        out = codec.convert(src, str(tmp_path / target))
        with codec.open(out) as r:
            md = r.metadata
        assert md["architecture"] == "llama" and md["model_name"] == "tiny"
        assert md["general.architecture"] == "llama"  # (the file's own keys stay)
    back = codec.convert(str(tmp_path / "m.aero"), str(tmp_path / "back.gguf"))
    with codec.open(back) as r:
        assert r.metadata["general.architecture"] == "llama" and r.value_types["llama.block_count"] == "uint32"


def test_aero_to_gguf_fills_general_architecture(tmp_path):
    p = str(tmp_path / "m.aero")
    codec.write(p, W, model_name="tiny", architecture="mlp")
    with codec.open(codec.convert(p, str(tmp_path / "m.gguf"))) as r:
        assert r.metadata["general.architecture"] == "mlp" and r.metadata["general.name"] == "tiny"


def test_load_reads_only_the_names_given(tmp_path):
    p = str(tmp_path / "m.aero")
    codec.write(p, {"a": np.ones(3, np.float32), "b": np.zeros(2, np.int8), "c": np.arange(4)})
    got = codec.load(p, names=["c", "a"])
    assert list(got) == ["c", "a"] and got["c"].tolist() == [0, 1, 2, 3]
    with pytest.raises(codec.NotFoundError):
        codec.load(p, names=["nope"])
    with pytest.raises(codec.UsageError, match="names"):
        codec.load(p, names="a")


def test_save_and_write_with_swapped_arguments_say_so(tmp_path):
    p = str(tmp_path / "m.aero")
    with pytest.raises(codec.UsageError, match="swapped"):
        codec.save(p, W)
    with pytest.raises(codec.UsageError, match="swapped"):
        codec.write(W, p)
    assert not (tmp_path / "m.aero").exists()


def test_fetch_tensor_to_npy_writes_a_file_np_load_reads(tmp_path):
    from codec.tools import cli
    p = str(tmp_path / "m.aero")
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    codec.write(p, {"w": a})
    assert cli.main(["fetch-tensor", p, "w", str(tmp_path / "w.npy")]) == 0
    b = np.load(str(tmp_path / "w.npy"))
    assert b.dtype == a.dtype and b.shape == a.shape and (b == a).all()
    assert cli.main(["fetch-tensor", p, "w", str(tmp_path / "w.bin")]) == 0
    assert (tmp_path / "w.bin").read_bytes() == a.tobytes()


def test_a_set_holds_a_models_metadata_once(tmp_path):
    """A tokenizer's vocabulary goes to index.aero only: not into the JSON index nor each part."""
    import json
    tokens = [f"tok{i:05d}" for i in range(5000)]
    big = {"general.architecture": "llama", "tokenizer.ggml.tokens": tokens}
    out = codec.write(str(tmp_path / "set"), {f"w{i}": np.full(4096, i, np.float32) for i in range(4)},
                      format="aeroset", model_name="tiny", metadata=big, max_shard_bytes=16384, max_part_shards=1)
    index = (tmp_path / "set" / "model.aeroset.json").read_text()
    assert "tok00001" not in index and json.loads(index)["model"] == {"name": "tiny"}
    with codec.open(out) as s:
        assert len(s.index["parts"]) == 4
        assert s.metadata["tokenizer.ggml.tokens"] == tokens and s.metadata["model_name"] == "tiny"
        for i in range(4):
            assert s.part(i).metadata == {"model_name": "tiny"}
    assert sum(b"tok00001" in p.read_bytes() for p in (tmp_path / "set").iterdir()) == 1


@pytest.mark.parametrize("target", ["m.aero", "m.gguf", "m.stb", "m.safetensors", "m.mag", "m.oinf",
                                    "set/model.aeroset.json"])
def test_every_reader_is_a_mapping_with_the_same_keys_as_its_tensors(tmp_path, target):
    from collections.abc import Mapping
    ids = target.endswith(".stb")
    t = {3: np.arange(4, dtype=np.float32), 5: np.ones(2, np.float32)} if ids else \
        {"a": np.arange(4, dtype=np.float32), "b": np.ones(2, np.float32)}
    codec.write(str(tmp_path / target), t)
    with codec.open(str(tmp_path / target)) as r:
        assert isinstance(r, Mapping)
        for k in list(r) + list(t):  # every key the listing gives, and those written, take both ways
            assert k in r and k in r.tensors
            assert r[k].tobytes() == r.tensor(k).tobytes()
            assert r.tensors[k].shape == r[k].shape
        assert r.get("nope") is None and r.get("nope", 1) == 1 and r.get(list(r)[0]) is not None
        assert list(r.keys()) == list(r) and len(r.values()) == 2
        assert [k for k, _ in r.items()] == list(r)
        assert r == t and not (r == {k: v + 1 for k, v in t.items()}) and r != {}


def test_oinf_keeps_the_tensor_order_written(tmp_path):
    t = {"zeta": np.ones(2, np.float32), "alpha": np.zeros(3, np.int8), "mid": np.arange(4, dtype=np.int32)}
    codec.write(str(tmp_path / "m.oinf"), t, metadata={"b": 1, "a": 2})
    with codec.open(str(tmp_path / "m.oinf")) as r:
        assert list(r) == ["zeta", "alpha", "mid"]
    codec.convert(str(tmp_path / "m.oinf"), str(tmp_path / "m.aero"))
    codec.convert(str(tmp_path / "m.aero"), str(tmp_path / "n.oinf"))
    with codec.open(str(tmp_path / "n.oinf")) as r:
        assert list(r) == ["zeta", "alpha", "mid"]


def test_an_aero_without_mjsn_shows_no_empty_name_or_architecture(tmp_path):
    from codec.formats.aero import index_only
    (tmp_path / "i.aero").write_bytes(index_only([]))
    with codec.open(str(tmp_path / "i.aero")) as r:
        assert r.metadata == {}
    (tmp_path / "j.aero").write_bytes(index_only([], model_name="tiny"))
    with codec.open(str(tmp_path / "j.aero")) as r:
        assert r.metadata == {"model_name": "tiny"}


def test_common_keys_go_there_and_back_without_a_copy_left(tmp_path):
    p = _gguf(tmp_path)
    with codec.open(p) as r:
        want = list(r.metadata.items()), r.value_types
    back = codec.convert(codec.convert(p, str(tmp_path / "m.aero")), str(tmp_path / "back.gguf"))
    with codec.open(back) as r:
        assert [k for k, _ in r.metadata.items()] == [k for k, _ in want[0]] and r.value_types == want[1]
    a = str(tmp_path / "a.aero")
    codec.write(a, W, model_name="tiny", architecture="mlp", metadata={"x": 1})
    again = codec.convert(codec.convert(a, str(tmp_path / "a.gguf")), str(tmp_path / "again.aero"))
    with codec.open(again) as r:
        assert dict(r.metadata) == {"model_name": "tiny", "architecture": "mlp", "x": 1}


def test_every_readers_metadata_goes_to_aero_with_its_types(tmp_path):
    from codec.formats.oinf import Bitset, ScalarValue
    src = str(tmp_path / "m.oinf")
    codec.write(src, W, metadata={"bs": Bitset([1, 0, 1]), "sv": ScalarValue(3, "u8"), "s": "hi",
                                  "arr": np.arange(3, dtype=np.int16)})
    with codec.open(src) as r:
        codec.write(str(tmp_path / "m.aero"), W, metadata=r.metadata)
    with codec.open(str(tmp_path / "m.aero")) as a:
        assert a.value_types == {"arr": "array[int16]", "bs": "array[bool]", "s": "string", "sv": "uint8"}
        assert a.metadata["bs"].tolist() == [True, False, True] and a.metadata["arr"].dtype == np.int16
    for other in ("m.mag", "m.safetensors", "m.stb"):
        md = {"m.mag": {"n": 3, "lr": 0.5}, "m.safetensors": {"fmt": "pt"}, "m.stb": {}}[other]
        codec.write(str(tmp_path / other), {3: W["w"]} if other == "m.stb" else W, metadata=md) \
            if md else codec.write(str(tmp_path / other), {3: W["w"]})
        with codec.open(str(tmp_path / other)) as r:
            codec.write(str(tmp_path / "o.aero"), W, metadata=r.metadata)
        with codec.open(str(tmp_path / "o.aero")) as a:
            assert {k: values.plain(v) for k, v in a.metadata.items()} == md


def test_a_split_gguf_read_then_written_keeps_every_value_type(tmp_path):
    t = {f"w{i}": np.ones(1024, np.float32) for i in range(4)}
    p = codec.write(str(tmp_path / "m.gguf"), t, metadata=TYPED, max_shard_size=5000)
    with codec.open(p) as r:
        types = r.value_types
        q = codec.write(str(tmp_path / "n.gguf"), t, metadata=r.metadata, max_shard_size=5000)
    with codec.open(q) as r:
        assert r.value_types == types and types["llama.block_count"] == "uint32"


@pytest.mark.parametrize("ext", ["gguf", "oinf", "mag"])
@pytest.mark.parametrize("bad", [None, {"a": 1}, 2 ** 70])
def test_a_metadata_value_a_writer_refuses_is_named_by_its_key(tmp_path, ext, bad):
    with pytest.raises(codec.UsageError, match="metadata 'the_bad_one'"):
        codec.save({"w": np.zeros(3, np.float32)}, tmp_path / f"m.{ext}", metadata={"fine": 1, "the_bad_one": bad})
    assert not os.listdir(tmp_path)
