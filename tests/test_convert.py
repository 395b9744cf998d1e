"""codec.convert / modelcodec convert: between every pair of formats every tensor comes out
bit-identical, and whatever the target cannot hold stops the conversion before anything is
written, with one line naming the tensor and the reason."""
import os

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.tools import cli

#: tensors every format can hold (STB keys tensors by id, so the names are ids)
COMMON = {"0": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "1": np.arange(-5, 5, dtype=np.int32),
          "2": np.linspace(-2, 2, 8, dtype=np.float16).reshape(2, 2, 2)}
TARGETS = {"aero": "m.aero", "mag": "m.mag", "oinf": "m.oinf", "stb": "m.stb", "aeroset": "set/model.aeroset.json",
           "safetensors": "m.safetensors"}


def _same(path, want: dict):
    with codec.open(path) as r:
        assert list(r.tensors) == list(want)
        for name, a in want.items():
            got = r.tensor(name)
            assert got.dtype == a.dtype and got.shape == a.shape and got.tobytes() == a.tobytes(), name


#: metadata each format can hold, written with the source (STB keeps none)
METADATA = {"aero": {"act": "relu", "n": 3, "lr": 0.5}, "aeroset": {"act": "relu", "n": 3, "lr": 0.5},
            "mag": {"n": 3, "lr": 0.5}, "oinf": {"act": "relu", "n": 3, "lr": 0.5}, "stb": {},
            "safetensors": {"act": "relu"}, "gguf": {"act": "relu", "n": 3, "lr": 0.5}}
PAIRS = {**TARGETS, "gguf": "m.gguf"}
#: models in several files (issue 32 §4): written in shards of at most 64 bytes (COMMON: 48, 40 and
#: 16 bytes -> two files), read as one model -- the format, and the writer's options
LAYOUTS = {"safetensors-sharded": ("safetensors", {"max_shard_size": 64}),
           "gguf-split": ("gguf", {"max_shard_size": "64B"})}
PAIRS.update({"safetensors-sharded": "sharded/model.safetensors.index.json", "gguf-split": "split/m.gguf"})


def _files(path) -> int:
    """How many files a model written as ``path`` takes (several for a sharded layout)."""
    with codec.open(path) as r:
        return len({r.tensors[n].extra.get("file") for n in r.tensors})


def _keeps(caps, v) -> bool:
    """Whether a target of these capabilities holds the metadata value ``v`` (its documented kinds)."""
    import re
    return {"json": True, "typed-arrays": True, "scalars": isinstance(v, (bool, int, float)),
            "typed": isinstance(v, (bool, int, float)) or (isinstance(v, str) and re.fullmatch(caps.text or ".*", v)),
            "text": isinstance(v, str), "none": False}[caps.metadata]


def _plain_metadata(path) -> dict:
    """A model's metadata as plain values, without what says nothing (empty values, kept types)."""
    from codec.engine import values
    with codec.open(path) as r:
        md = {k: values.plain(v) for k, v in r.metadata.items()}
    return {k: v for k, v in md.items() if v not in ("", None) and k != values.TYPES_KEY}


@pytest.mark.parametrize("src_key", sorted(PAIRS))
@pytest.mark.parametrize("dst_key", sorted(PAIRS))
def test_every_pair_converts_bit_identically_with_its_metadata(tmp_path, src_key, dst_key):
    """Every tensor comes out bit-identical; the metadata comes along wherever the target can
    hold every entry (each key back with its value), else the conversion is refused naming an
    entry, and goes through with --drop-metadata."""
    from codec import registry
    (src_fmt, src_opts), (dst_fmt, dst_opts) = (LAYOUTS.get(f, (f, {})) for f in (src_key, dst_key))
    src = str(tmp_path / "src" / PAIRS[src_key])
    os.makedirs(os.path.dirname(src), exist_ok=True)
    written = codec.write(src, COMMON if src_fmt != "stb" else {int(k): v for k, v in COMMON.items()},
                          **({"metadata": METADATA[src_fmt]} if METADATA[src_fmt] else {}), **src_opts)
    src = written if isinstance(written, str) else src  # (a split model: its first split)
    assert _files(src) == (2 if src_opts else 1)
    want = _plain_metadata(src)
    assert {k: want[k] for k in METADATA[src_fmt]} == METADATA[src_fmt]
    dst = str(tmp_path / "dst" / PAIRS[dst_key])
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    caps = registry.get(dst_fmt).capabilities
    if all(_keeps(caps, v) for v in want.values()):
        out = codec.convert(src, dst, **dst_opts)
        got = _plain_metadata(out)
        assert {k: got.get(k) for k in want} == want
    else:
        with pytest.raises(codec.UsageError, match=r"metadata '[^']+'.*--drop-metadata"):
            codec.convert(src, dst, **dst_opts)
        assert not os.listdir(os.path.dirname(dst))
        out = codec.convert(src, dst, drop_metadata=True, **dst_opts)
    _same(out, COMMON)
    assert _files(out) == (2 if dst_opts else 1)
    assert codec.validate(out, full=True).ok


def test_a_dtype_the_target_lacks_stops_before_writing(tmp_path):
    src = str(tmp_path / "a.aero")
    codec.write(src, {"w": np.ones(3, np.float32), "i": np.arange(4, dtype=np.int64)})
    dst = tmp_path / "b.mag"
    with pytest.raises(codec.UsageError, match=r"tensor 'i': MAG cannot hold it: int64 .*--cast int64="):
        codec.convert(src, str(dst), drop_metadata=True)
    assert not dst.exists() and not [f for f in os.listdir(tmp_path) if "modelcodec" in f]
    codec.convert(src, str(dst), cast=["int64=int32"], drop_metadata=True)
    with codec.open(str(dst)) as r:
        assert r.tensor("i").dtype == np.int32 and r.tensor("i").tolist() == [0, 1, 2, 3]


def test_casts_are_lossless_or_refused(tmp_path):
    src = str(tmp_path / "a.aero")
    codec.write(src, {"big": np.array([1, 2**40], np.int64), "f": np.array([0.5, 0.1], np.float32)})
    with pytest.raises(codec.UsageError, match=r"'big': casting int64 to int32 would change its values \(element 1"):
        codec.convert(src, str(tmp_path / "b.oinf"), cast={"int64": "int32"})
    with pytest.raises(codec.UsageError, match=r"'f': casting float32 to float16"):
        codec.convert(src, str(tmp_path / "c.aero"), cast={"float32": "float16"})
    assert not (tmp_path / "b.oinf").exists() and not (tmp_path / "c.aero").exists()
    with pytest.raises(codec.UsageError, match="must be one of"):
        codec.convert(src, str(tmp_path / "c.aero"), cast=["int64=int128"])


def test_names_and_metadata_the_target_cannot_hold(tmp_path):
    src = str(tmp_path / "a.aero")
    codec.write(src, {"layer.0.w": np.ones(2, np.float32)}, model_name="tiny")
    with pytest.raises(codec.UsageError, match=r"tensor id 0\.\.255 \(--rename index"):
        codec.convert(src, str(tmp_path / "b.stb"), drop_metadata=True)
    with pytest.raises(codec.UsageError, match="metadata 'model_name'.*--drop-metadata"):
        codec.convert(src, str(tmp_path / "b.stb"), rename="index")
    out = codec.convert(src, str(tmp_path / "b.stb"), rename="index", drop_metadata=True)
    _same(out, {"0": np.ones(2, np.float32)})
    # metadata every target keeps travels; OINF size variables become integer entries
    o = str(tmp_path / "s.oinf")
    codec.write(o, {"w": np.ones(2, np.float32)}, sizevars={"B": 4}, metadata={"lr": 0.5, "act": "relu"})
    with codec.open(codec.convert(o, str(tmp_path / "s.aero"))) as r:
        assert r.metadata["B"] == 4 and r.metadata["act"] == "relu" and r.metadata["lr"] == 0.5


def test_load_save_and_the_cli(tmp_path, capsys):
    p = codec.save({"w": np.arange(3, dtype=np.float32)}, str(tmp_path / "a.oinf"))
    got = codec.load(p)
    assert list(got) == ["w"] and got["w"].flags.writeable and got["w"].tolist() == [0.0, 1.0, 2.0]
    assert cli.main(["convert", p, str(tmp_path / "b.aero")]) == 0
    assert "wrote" in capsys.readouterr().out
    codec.save({"w": np.arange(3, dtype=np.int64)}, str(tmp_path / "c.aero"))
    assert cli.main(["convert", str(tmp_path / "c.aero"), str(tmp_path / "d.mag"), "--drop-metadata"]) == 1
    assert "MAG cannot hold it" in capsys.readouterr().err
    assert cli.main(["convert", str(tmp_path / "c.aero"), str(tmp_path / "d.mag"), "--drop-metadata",
                     "--cast", "int64=int32"]) == 0


def test_a_directory_as_the_target_is_an_aeroset(tmp_path):
    src = codec.write(str(tmp_path / "m.safetensors"), {"w": np.arange(6, dtype=np.float32)})
    (tmp_path / "empty").mkdir()
    for dst in (str(tmp_path / "empty"), str(tmp_path / "new") + "/"):
        out = codec.convert(src, dst)
        with codec.open(out) as r:
            assert r.format == "aeroset" and r.tensor("w").tobytes() == np.arange(6, dtype=np.float32).tobytes()
    with pytest.raises(codec.UsageError, match="cannot tell the format"):
        codec.convert(src, str(tmp_path / "no-suffix"))


def test_convert_streams_in_bounded_memory(tmp_path):
    """A model is streamed through convert, never held: converting a 192 MiB safetensors file to
    AERO (hashes on, as by default) grows the converting process' peak RSS by far less than the
    file -- each piece's mapped pages are dropped once the writer and its hash worker are both
    done with it (a hash worker still reading a dropped piece faulted it back in: +207 MB here)."""
    from .budgets import convert_peak_growth_mb
    rng = np.random.default_rng(0)
    src, dst = tmp_path / "big.safetensors", tmp_path / "big.aero"
    codec.save({f"w{i}": rng.integers(0, 255, 16 << 20, dtype=np.uint8).view(np.float32) for i in range(12)},
               str(src))
    # a hash worker slower than this thread (as on a busy machine): it is still reading a piece
    # when the source moves on
    slow = ("from codec.io.integrity import BackgroundFeed", "feed = BackgroundFeed._feed",
            "BackgroundFeed._feed = lambda self, piece: (time.sleep(0.02), feed(self, piece))")
    grew = convert_peak_growth_mb(str(src), str(dst), prelude=slow, timeout=120)
    assert grew < 96, grew  # MB: under half the file's 192, whatever the machine
    with codec.open(str(src)) as a, codec.open(str(dst)) as b:
        assert all(a.tensor(n).tobytes() == b.tensor(n).tobytes() for n in a.tensors)


def test_cache_of_a_convert_from_a_remote_set_is_how_the_set_is_read(tmp_path, monkeypatch):
    """``cache=`` is an option of the source's reader (a remote set's disk cache): given to a
    conversion to a set, it reaches the reader -- nothing is cached -- never the set writer's
    cache hints; a source whose reader takes no ``cache`` leaves it to the writer's hints."""
    import json
    import uuid
    monkeypatch.setenv("MODELCODEC_CACHE_DIR", str(tmp_path / "cache"))
    url = f"memory://conv{uuid.uuid4().hex[:8]}/s/model.aeroset.json"
    ts = {f"w{i}": np.arange(16, dtype=np.float32) + i for i in range(3)}
    codec.write(url, ts, max_part_shards=1, max_shard_bytes=64)

    def cached() -> int:
        return sum(len(fs) for _, _, fs in os.walk(tmp_path / "cache"))
    for k, opts in enumerate([{"cache": False}, {}]):
        out = codec.convert(url, str(tmp_path / f"out{k}"), format="aeroset", **opts)
        index = json.loads((tmp_path / f"out{k}" / os.path.basename(url)).read_text())
        assert "cache" not in index and index["format"]["version"] == [0, 1], index
        with codec.open(out) as r:
            assert all(np.array_equal(r.tensor(n), a) for n, a in ts.items())
        assert (cached() > 0) == (not opts), (opts, cached())  # (the default: the disk cache is used)
    local = tmp_path / "m.aero"
    codec.write(str(local), ts)
    codec.convert(str(local), str(tmp_path / "hinted"), format="aeroset", cache={"enabled": False})
    with codec.open(str(tmp_path / "hinted")) as r:
        assert r.index["cache"] == {"enabled": False}
    with pytest.raises(codec.UsageError, match="cache must be"):  # (the writer's hints: a mapping)
        codec.convert(str(local), str(tmp_path / "refused"), format="aeroset", cache=False)
    assert not (tmp_path / "refused").exists()


def test_a_tensor_declared_without_data_is_refused_by_name_where_it_cannot_be_declared(tmp_path):
    from codec.formats.oinf import UninitializedTensor
    src = tmp_path / "m.oinf"
    codec.save({"w": np.arange(4, dtype=np.float32), "cache": UninitializedTensor("f16", (2, 3))}, src)
    for dst in ("m.aero", "m.safetensors"):
        with pytest.raises(codec.UsageError, match="'cache'.*declared without data") as e:
            codec.convert(src, tmp_path / dst)
        assert "object" not in str(e.value)
        assert not (tmp_path / dst).exists()
    with pytest.raises(codec.UsageError, match="'cache'.*declared without data.*float16=float32"):
        codec.convert(src, tmp_path / "c.oinf", cast=["float16=float32"])
    codec.convert(src, tmp_path / "same.oinf")  # (a target that declares it: kept as it is)
    assert codec.diff(src, tmp_path / "same.oinf").equal


def test_one_cast_given_as_a_string_is_that_cast(tmp_path):
    src = tmp_path / "m.safetensors"
    codec.save({"w": np.arange(4, dtype=np.int64)}, src)
    codec.convert(src, tmp_path / "m.aero", cast="int64=int32")
    assert codec.load(tmp_path / "m.aero")["w"].dtype == np.int32


@pytest.mark.parametrize("cast", [5, [5], ("int64", 32), object()])
def test_a_cast_of_another_kind_is_a_usage_error_naming_it(tmp_path, cast):
    src = tmp_path / "m.safetensors"
    codec.save({"w": np.arange(4, dtype=np.int64)}, src)
    with pytest.raises(codec.UsageError, match="cast must be 'FROM=TO'"):
        codec.convert(src, tmp_path / "m.aero", cast=cast)
    assert not (tmp_path / "m.aero").exists()


def test_load_keeps_a_tensor_declared_without_data_as_its_reader_gives_it(tmp_path):
    from codec.formats.oinf import UninitializedTensor
    src = tmp_path / "m.oinf"
    codec.save({"w": np.arange(4, dtype=np.float32), "cache": UninitializedTensor("f16", (2, 3))}, src)
    loaded = codec.load(src)
    assert loaded["cache"] == UninitializedTensor("f16", (2, 3))  # (not a 0-d array of objects)
    codec.save(loaded, tmp_path / "again.oinf")
    assert codec.diff(src, tmp_path / "again.oinf").equal


@pytest.mark.parametrize("dst", [None, b"out.mag", 3])
def test_a_destination_of_the_wrong_type_is_named(tmp_path, dst):
    src = str(tmp_path / "m.aero")
    codec.write(src, {"a": np.arange(4, dtype=np.float32)})
    with pytest.raises(E.UsageError, match=rf"convert\(src, dst\): dst must be text or a path, not {type(dst).__name__}"):
        codec.convert(src, dst)
    assert os.listdir(tmp_path) == ["m.aero"]
