"""Issue 32 §3 (and the conversion points of §4b): a conversion that cannot proceed says every
problem at once with the option resolving each; ``--rename index`` keeps the names it replaced
and a conversion back gives them back; output names are kept; writer options reach the writer;
a name that says another format than ``--to``, and a conversion with nothing to write, are
refused."""
import json
import os
import shlex

import numpy as np
import pytest

import codec
from codec import registry
from codec.tools import cli

#: a model STB cannot take as it is: names, an int64 tensor, metadata (and, when asked, a rank-4 one)
MODEL = {"emb.w": np.arange(12, dtype=np.float32).reshape(3, 4), "pos": np.arange(4, dtype=np.int64),
         "norm.b": np.ones(3, np.float16)}


def _run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _ids_target():
    """A format keyed by tensor ids without metadata (the registry says which)."""
    return next(f for f in registry.formats() if f.capabilities is not None and f.capabilities.ids
                and f.capabilities.metadata == "none")


def _text_target():
    """A format whose metadata is text only, names free."""
    return next(f for f in registry.formats() if f.capabilities is not None and f.capabilities.metadata == "text")


def test_every_problem_is_reported_at_once_with_its_flag(tmp_path, capsys):
    """One run lists the names, the dtype and the metadata problems, each with its option, and
    the options given together then convert (the issue's four runs become two)."""
    ids = _ids_target()
    src = codec.write(str(tmp_path / "m.safetensors"), MODEL, metadata={"note": "x"})
    dst = tmp_path / f"m{ids.extensions[0]}"
    rc, _, err = _run(capsys, "convert", src, dst)
    assert rc == 1 and not dst.exists()
    lines = err.splitlines()
    assert "3 problems" not in lines[0] and "(4 problems; nothing was written)" in lines[0], err
    assert any(line.strip().startswith("tensor 'emb.w'") and "--rename index" in line for line in lines)
    assert any(line.strip().startswith("tensor 'pos'") and "--cast int64=" in line for line in lines)
    assert any(line.strip().startswith("metadata 'note'") and "--drop-metadata" in line for line in lines)
    fix = lines[-1]
    assert fix.startswith("rerun with ") and {"--rename", "--drop-metadata", "--cast"} <= set(fix.split())
    rc, out, err = _run(capsys, "convert", src, dst, *shlex.split(fix[len("rerun with "):]))
    assert rc == 0 and dst.exists(), err


def test_a_problem_no_option_resolves_is_said_so_beside_the_others(tmp_path):
    ids = _ids_target()
    big = np.zeros((1,) * (ids.capabilities.max_rank + 1), np.float32)
    src = codec.write(str(tmp_path / "m.safetensors"), {"deep": big, **MODEL})
    with pytest.raises(codec.UsageError) as e:
        codec.convert(src, tmp_path / f"m{ids.extensions[0]}")
    msg = str(e.value)
    assert "tensor 'deep'" in msg and "(no option makes it fit)" in msg and "tensor 'pos'" in msg
    assert msg.splitlines()[-1].startswith("no option makes every problem go (the others: --rename index")


def test_many_refused_tensors_are_counted_not_listed(tmp_path):
    ids = _ids_target()
    src = codec.write(str(tmp_path / "m.safetensors"), {f"t{k}": np.zeros(2, np.float32) for k in range(20)})
    with pytest.raises(codec.UsageError) as e:
        codec.convert(src, tmp_path / f"m{ids.extensions[0]}")
    msg = str(e.value)
    assert "(20 problems;" in msg and "... and 12 more tensors" in msg and msg.count("tensor 't") == 8


def test_rename_index_writes_the_names_and_converting_back_applies_them(tmp_path, capsys):
    ids = _ids_target()
    src = codec.write(str(tmp_path / "m.safetensors"), MODEL, metadata={"note": "x"})
    small = tmp_path / f"m{ids.extensions[0]}"
    out = codec.convert(src, small, cast=["int64=int32"], rename="index", drop_metadata=True)
    side = tmp_path / f"m{ids.extensions[0]}.names.json"
    assert out.names == str(side)
    assert json.loads(side.read_text()) == {"0": "emb.w", "1": "pos", "2": "norm.b"}
    back = tmp_path / "back.safetensors"
    rc, _, err = _run(capsys, "convert", small, back)
    assert rc == 0, err
    with codec.open(back) as r:
        assert list(r.tensors) == list(MODEL) and np.array_equal(r["emb.w"], MODEL["emb.w"])
    # --rename keep: the names as the source has them
    assert codec.convert(small, tmp_path / "ids.safetensors", rename="keep")
    with codec.open(tmp_path / "ids.safetensors") as r:
        assert list(r.tensors) == ["0", "1", "2"]
    # a map that does not match the tensors is refused, naming the way out
    side.write_text(json.dumps({"0": "a", "7": "b", "2": "c"}))
    with pytest.raises(codec.UsageError, match=r"names\.json: the tensor names map does not match.*--rename keep"):
        codec.convert(small, tmp_path / "again.safetensors")


def test_rename_index_keeps_the_names_in_metadata_that_holds_text(tmp_path):
    """A target whose metadata holds the names keeps them there too: the map travels with the
    file, and a conversion of that file back restores the names (no file beside it needed)."""
    text = _text_target()
    src = codec.write(str(tmp_path / "m.aero"), MODEL, metadata={"note": "x"})
    dst = tmp_path / f"r{text.extensions[0]}"
    codec.convert(src, dst, rename="index")
    with codec.open(dst) as r:
        assert list(r.tensors) == ["0", "1", "2"]
        assert json.loads(r.metadata["modelcodec.tensor_names"]) == list(MODEL) and r.metadata["note"] == "x"
    os.remove(f"{dst}.names.json")
    codec.convert(dst, tmp_path / "back.aero")
    with codec.open(tmp_path / "back.aero") as r:
        assert list(r.tensors) == list(MODEL) and "modelcodec.tensor_names" not in r.metadata
        assert r.metadata["note"] == "x"


def test_stb_metadata_row_of_the_readme_says_what_the_refusal_says(tmp_path):
    """The conversion guide's "what arrives" table and the refusal agree: a target without metadata
    takes a source with metadata only with --drop-metadata."""
    from pathlib import Path
    ids = _ids_target()
    readme = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "convert.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith(f"| any → {ids.name.upper()} |"))
    assert "--drop-metadata" in row, row
    src = codec.write(str(tmp_path / "m.safetensors"), {"0": np.zeros(2, np.float32)}, metadata={"a": "b"})
    with pytest.raises(codec.UsageError, match="--drop-metadata"):
        codec.convert(src, tmp_path / f"m{ids.extensions[0]}")


def test_the_index_name_given_is_the_one_written(tmp_path, capsys):
    sets = next(f for f in registry.formats() if f.directory)
    src = codec.write(str(tmp_path / "m.safetensors"), MODEL)
    index = tmp_path / "newset" / f"bge{sets.extensions[0]}"
    rc, _, err = _run(capsys, "convert", src, index)
    assert rc == 0, err
    assert sorted(os.listdir(tmp_path / "newset")) == sorted(["index.aero", "part-000.aero", index.name])
    rc, out, err = _run(capsys, "inspect-set", index)
    assert rc == 0 and "emb.w" in out, err
    with codec.open(index) as s:
        assert list(s.tensors) == list(MODEL)
    # a directory path (existing, or ending with a slash) is a set, under the default index name
    for d in (str(tmp_path / "d1") + os.sep, tmp_path / "d2"):
        os.makedirs(tmp_path / "d2", exist_ok=True)
        rc, _, err = _run(capsys, "convert", src, d)
        assert rc == 0, err
        with codec.open(d) as s:
            assert s.format == sets.name and list(s.tensors) == list(MODEL)


def test_writer_options_go_to_the_writer(tmp_path, capsys):
    sets = next(f for f in registry.formats() if f.directory)
    src = codec.write(str(tmp_path / "m.safetensors"), MODEL)
    index = tmp_path / "s" / f"s{sets.extensions[0]}"
    rc, _, err = _run(capsys, "convert", src, index, "--max-shard-bytes", "64", "--max-part-shards", "1")
    assert rc == 0, err
    parts = sorted(p for p in os.listdir(tmp_path / "s") if p.startswith("part-"))
    assert len(parts) == 3, parts  # (one tensor per shard, one shard per part)
    with codec.open(index) as s:
        assert all(np.array_equal(s[n], a) for n, a in MODEL.items())
    out = codec.convert(src, tmp_path / "o" / f"t{sets.extensions[0]}", max_part_shards=1, max_shard_bytes=64)
    assert len([p for p in os.listdir(tmp_path / "o") if p.startswith("part-")]) == 3, out
    # a writer option the target's writer lacks is named as such (not sent to the reader)
    single = next(f for f in registry.formats() if f.capabilities is not None and not f.directory)
    rc, _, err = _run(capsys, "convert", src, tmp_path / f"x{single.extensions[0]}", "--max-part-shards", "1")
    assert rc == 1 and f"--max-part-shards: an option the {single.name.upper()} writer does not take" in err, err
    with pytest.raises(codec.UsageError, match="max_part_shards: an option the .* writer does not take"):
        codec.convert(src, tmp_path / f"x{single.extensions[0]}", max_part_shards=1)


def test_a_name_of_another_format_than_to_is_refused_in_the_clis_words(tmp_path, capsys):
    src = codec.write(str(tmp_path / "m.safetensors"), MODEL)
    rc, _, err = _run(capsys, "convert", src, tmp_path / "x.safetensors", "--to", "gguf")
    assert rc == 1 and "named as SAFETENSORS but --to gguf writes GGUF" in err and "format=" not in err
    assert not (tmp_path / "x.safetensors").exists()
    with pytest.raises(codec.UsageError, match="format='gguf'"):
        codec.convert(src, tmp_path / "x.safetensors", format="gguf")
    rc, _, err = _run(capsys, "convert", src, tmp_path / "x.bin")
    assert rc == 1 and "pass --to (known:" in err and "format=" not in err
    rc, _, err = _run(capsys, "convert", src, tmp_path / "x.bin", "--to", "gguf")
    assert rc == 0, err


def test_nothing_to_write_is_said_not_written(tmp_path, capsys):
    src = codec.write(str(tmp_path / "e.safetensors"), {})
    os.makedirs(tmp_path / "out")
    for fmt in registry.formats():
        if fmt.capabilities is None:
            continue
        dst = tmp_path / "out" / f"e{fmt.extensions[0]}"
        rc, _, err = _run(capsys, "convert", src, dst)
        assert rc == 1 and "has no tensors and no metadata" in err and "nothing was written" in err, (fmt.name, err)
        assert not dst.exists()
    ids = _ids_target()
    src = codec.write(str(tmp_path / "md.safetensors"), {}, metadata={"a": "b"})
    with pytest.raises(codec.UsageError, match="has no tensors that .* would keep"):
        codec.convert(src, tmp_path / f"md{ids.extensions[0]}", drop_metadata=True)


def test_a_cast_the_target_cannot_hold_is_to_be_left_out_never_a_cast_of_a_type_to_itself(tmp_path, capsys):
    """--cast float32=X, X a type the target lacks: the option is to leave that cast out (or a
    cast to a type it holds), never '--cast float32=float32'; the rerun line says so, and the
    run it describes converts."""
    fmt = next(f for f in registry.formats() if f.capabilities is not None and not f.capabilities.ids
               and {"float32", "int32"} <= f.capabilities.dtypes and "bfloat16" not in f.capabilities.dtypes
               and "int64" not in f.capabilities.dtypes and "float64" not in f.capabilities.dtypes)
    src = codec.write(str(tmp_path / "m.safetensors"), {"w": np.arange(6, dtype=np.float32),
                                                        "n": np.arange(3, dtype=np.int64)})
    dst = tmp_path / f"m{fmt.extensions[0]}"
    rc, _, err = _run(capsys, "convert", src, dst, "--cast", "float32=bfloat16")
    assert rc == 1 and not dst.exists() and "float32=float32" not in err, err
    lines = err.splitlines()
    assert any(line.strip().startswith("tensor 'w'") and "without --cast float32=bfloat16" in line for line in lines)
    assert lines[-1] == "rerun with --cast int64=int32 and without --cast float32=bfloat16", err
    rc, _, err = _run(capsys, "convert", src, dst, "--cast", "int64=int32")
    assert rc == 0 and dst.exists(), err
    # one problem: its line says it
    rc, _, err = _run(capsys, "convert", src, tmp_path / "one.aero", "--cast", "float32=float8_e4m3fn", "--lossy")
    assert rc == 1 and "float32=float32" not in err and "without --cast float32=float8_e4m3fn" in err, err
