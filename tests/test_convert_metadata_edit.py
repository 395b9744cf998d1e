"""convert's metadata edits: ``set_metadata`` / ``--set-metadata`` adds or replaces entries,
``unset_metadata`` / ``--unset-metadata`` leaves entries out -- checked against what the target
holds like the source's own metadata, read back by the official libraries."""
import json

import gguf
import numpy as np
import pytest
from safetensors import safe_open

import codec
from codec.tools import cli

W = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}


@pytest.fixture
def src(tmp_path):
    return codec.write(str(tmp_path / "a.aero"), W, metadata={"general.name": "m", "n": 5, "x": [1, 2]},
                       progress=False)


def _st_metadata(path) -> dict | None:
    with safe_open(path, "numpy") as f:
        return f.metadata()


def test_set_and_unset_make_a_safetensors_file_transformers_loads(src, tmp_path):
    out = str(tmp_path / "b.safetensors")
    # the source's numbers cannot be safetensors text: refused, each with the entry's own option
    with pytest.raises(codec.UsageError, match=r"metadata 'n'.*--unset-metadata n") as e:
        codec.convert(src, out, set_metadata={"format": "pt"})
    assert "metadata 'x'" in str(e.value) and not (tmp_path / "b.safetensors").exists()
    codec.convert(src, out, set_metadata={"format": "pt"}, unset_metadata=["n", "x"])
    md = _st_metadata(out)
    # what Hugging Face transformers asks of a safetensors checkpoint before loading it
    assert md is not None and md.get("format") in ("pt", "tf", "flax", "mlx")
    assert md == {"general.name": "m", "format": "pt"}  # (the official reader's map has no order)
    with codec.open(out) as r:
        assert list(r.metadata.items()) == [("general.name", "m"), ("format", "pt")]
    with safe_open(out, "numpy") as f:
        assert f.get_tensor("w").tobytes() == W["w"].tobytes()


def test_drop_metadata_keeps_only_the_entries_set(src, tmp_path):
    out = codec.convert(src, str(tmp_path / "d.safetensors"), drop_metadata=True, set_metadata={"format": "pt"})
    assert _st_metadata(out) == {"format": "pt"}
    with codec.open(codec.convert(src, str(tmp_path / "e.aero"), drop_metadata=True)) as r:
        assert not r.metadata


def test_a_replaced_entry_keeps_its_place_and_takes_its_new_value(src, tmp_path):
    with codec.open(codec.convert(src, str(tmp_path / "b.aero"), set_metadata={"n": {"a": [1, 2.5]}, "z": True})) as r:
        assert list(r.metadata) == ["general.name", "n", "x", "z"]
        assert r.metadata["n"] == {"a": [1, 2.5]} and r.metadata["z"] is True and r.metadata["x"] == [1, 2]


def test_a_replaced_typed_value_is_typed_by_its_new_value(tmp_path):
    """A GGUF uint32 replaced by text in AERO (whose metadata keeps the GGUF types beside it)
    comes back to GGUF as text, not retyped as the source's uint32."""
    g = str(tmp_path / "a.gguf")
    w = gguf.GGUFWriter(g, "llama")
    w.add_uint32("llama.block_count", 5)
    w.add_uint32("general.quantization_version", 2)
    w.add_tensor("w", W["w"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    def types_of(path):
        r = gguf.GGUFReader(path)
        return {k: f.types[0] for k, f in r.fields.items() if not k.startswith("GGUF.")}
    kept = codec.convert(codec.convert(g, str(tmp_path / "k.aero")), str(tmp_path / "k.gguf"))
    assert types_of(kept)["llama.block_count"] == gguf.GGUFValueType.UINT32
    mid = codec.convert(g, str(tmp_path / "b.aero"), set_metadata={"llama.block_count": "five"})
    back = codec.convert(mid, str(tmp_path / "c.gguf"))
    t = types_of(back)
    assert t["llama.block_count"] == gguf.GGUFValueType.STRING
    assert t["general.quantization_version"] == gguf.GGUFValueType.UINT32
    r = gguf.GGUFReader(back)
    f = r.fields["llama.block_count"]
    assert bytes(f.parts[f.data[0]]).decode() == "five"


def test_refusals_write_nothing(src, tmp_path):
    out = tmp_path / "b.aero"
    with pytest.raises(codec.UsageError, match=r"has no metadata 'nope' \(its keys: 'general.name', 'n', 'x'\)"):
        codec.convert(src, str(out), unset_metadata=["nope"])
    with pytest.raises(codec.UsageError, match=r"metadata 'n': both set \(--set-metadata\) and unset"):
        codec.convert(src, str(out), set_metadata={"n": 1}, unset_metadata="n")
    with pytest.raises(codec.UsageError, match=r"set_metadata=\[.*\]: a dict"):
        codec.convert(src, str(out), set_metadata=["format=pt"])
    with pytest.raises(codec.UsageError, match=r"set_metadata=\{1: 'a'\}: a dict"):
        codec.convert(src, str(out), set_metadata={1: "a"})
    with pytest.raises(codec.UsageError, match=r"metadata 'bad' \(int\).*the value given by --set-metadata"):
        codec.convert(src, str(tmp_path / "b.safetensors"), drop_metadata=True, set_metadata={"bad": 3})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.aero"]


def test_the_cli(src, tmp_path, capsys):
    out = str(tmp_path / "c.gguf")
    assert cli.main(["convert", src, out, "--set-metadata", "format=pt", "--set-metadata", "n:=7",
                     "--set-metadata", "eq=a=b", "--unset-metadata", "x"]) == 0
    r = gguf.GGUFReader(out)
    f = r.fields
    assert bytes(f["format"].parts[f["format"].data[0]]).decode() == "pt"
    assert bytes(f["eq"].parts[f["eq"].data[0]]).decode() == "a=b"
    assert int(f["n"].parts[f["n"].data[0]][0]) == 7 and f["n"].types[0] != gguf.GGUFValueType.STRING
    assert "x" not in f
    capsys.readouterr()
    for bad, says in ((["--set-metadata", "novalue"], "KEY=TEXT, or KEY:=JSON"),
                      (["--set-metadata", "n:={bad"], "after := comes a JSON value"),
                      (["--set-metadata", "=v"], "the key is empty"),
                      (["--unset-metadata", "nope"], "has no metadata 'nope'")):
        assert cli.main(["convert", src, str(tmp_path / "d.aero"), *bad]) == 1
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d.aero").exists()
    assert cli.main(["convert", src, str(tmp_path / "j.aero"), "--json", "--set-metadata", 'v:=[1, "a"]']) == 0
    assert json.loads(capsys.readouterr().out)["written"].endswith("j.aero")
    with codec.open(str(tmp_path / "j.aero")) as r:
        assert r.metadata["v"] == [1, "a"]


def test_every_target_format_takes_an_entry_set_or_says_why_not(src, tmp_path):
    """An entry set while converting reaches every format that holds text metadata, read back
    by our reader of that format; a format that cannot hold it refuses it by name, writing nothing."""
    from codec import registry
    for f in registry.formats():
        if f.writer is None or f.capabilities is None:
            continue
        (tmp_path / f"out-{f.name}").mkdir()  # (a folder each: a set takes one whole)
        out = str(tmp_path / f"out-{f.name}" / f"m{f.extensions[0]}")
        kw = {"rename": "index"} if f.capabilities.ids else {}
        if f.capabilities.metadata in ("scalars", "none"):
            with pytest.raises(codec.UsageError, match="metadata 'format'"):
                codec.convert(src, out, drop_metadata=True, set_metadata={"format": "pt"}, **kw)
            assert not any((tmp_path / f"out-{f.name}").iterdir()), f.name
            continue
        codec.convert(src, out, drop_metadata=True, set_metadata={"format": "pt"}, **kw)
        with codec.open(out) as r:
            assert r.metadata.get("format") == "pt", f.name
