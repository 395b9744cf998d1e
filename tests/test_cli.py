"""The command line, run in-process and as a real subprocess."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec.tools.cli import main
from codec.formats.aero import write_aero

from .conftest import vectors_dir

VDIR = vectors_dir("aero")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_inspect_lists_chunks_and_tensors(capsys):
    rc, out, err = run(capsys, "inspect", str(VDIR / "multishard.aero"))
    assert rc == 0 and not err
    assert "AERO 0.1" in out and "weights.shard3" in out and "m3" in out and "[10, 15]" in out


def test_inspect_json_is_machine_readable(capsys):
    rc, out, _ = run(capsys, "inspect", "--json", str(VDIR / "packed_q4_0.aero"))
    d = json.loads(out)
    assert rc == 0 and d["format"] == "aero"
    assert {t["name"]: t["dtype"] for t in d["tensors"]} == {"blk.0.ffn.weight": "packed", "blk.0.norm.weight": "float32"}
    assert {t["name"]: t["format_dtype"] for t in d["tensors"]} == {"blk.0.ffn.weight": "packed",
                                                                     "blk.0.norm.weight": "f32"}
    assert [c["fourcc"] for c in d["chunks"]] == ["MJSN", "MMSG", "TIDX", "WTSH"]


def test_validate_ok_and_full(capsys):
    rc, out, _ = run(capsys, "validate", "--full", str(VDIR / "ihsh_phsh.aero"))
    assert rc == 0 and "full check passed" in out and "IHSH" in out and "PHSH" in out


def test_validate_control_says_when_there_is_no_ihsh(capsys):
    rc, out, _ = run(capsys, "validate", "--control", str(VDIR / "minimal_f32.aero"))
    assert rc == 3 and "no IHSH chunk" in out  # nothing was checked: a distinct status
    rc, out, _ = run(capsys, "validate", "--control", str(VDIR / "invalid/ihsh_mismatch.aero"))
    assert rc == 1 and "AERO-IHSH" in out


def test_validate_lists_every_violation_and_exits_1(capsys):
    rc, out, _ = run(capsys, "validate", "--full", str(VDIR / "invalid/bug_write_model_default.aero"))
    assert rc == 1 and "AERO-CHUNK-HASH" in out and "MJSN" in out


def test_validate_json(capsys):
    rc, out, _ = run(capsys, "validate", "--json", "--full", str(VDIR / "invalid/phsh_page_mismatch.aero"))
    d = json.loads(out)
    assert rc == 1 and not d["ok"]
    v = d["violations"][0]
    assert v["rule"] == "AERO-PHSH" and v["kind"] == "IntegrityError" and v["offset"] > 0 and v["path"]


def test_validate_reports_every_structural_violation_even_when_open_fails(capsys, tmp_path):
    blob = bytearray((VDIR / "minimal_f32.aero").read_bytes())
    blob[44] = 1      # file_flags
    blob[70] = 1      # header reserved
    blob[100] = 1     # TOC header reserved0
    p = tmp_path / "bad.aero"
    p.write_bytes(bytes(blob))
    rc, out, _ = run(capsys, "validate", str(p))
    assert rc == 1
    assert "AERO-FILE-FLAGS" in out and out.count("AERO-RESERVED") == 2 and "3 error(s)" in out


@pytest.mark.parametrize("name", ["truncated.aero", "toc_past_eof.aero", "bad_magic.aero"])
def test_broken_file_is_one_clear_line(capsys, name):
    rc, out, err = run(capsys, "inspect", str(VDIR / "invalid" / name))
    assert rc == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelcodec: ") and "@ 0x" in lines[0] and "[" in lines[0]


def test_missing_file_and_directory_are_one_line(capsys, tmp_path):
    rc, _, err = run(capsys, "inspect", str(tmp_path / "nope.aero"))
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "No such file" in err
    rc, _, err = run(capsys, "inspect", str(tmp_path))
    assert rc == 1 and "directory" in err


def test_schema_renders_field_tables(capsys):
    rc, out, _ = run(capsys, "schema", "aero")
    assert rc == 0 and "| 48 | 32 | blake3_256 | bytes[32] |" in out and "AERO-TOC-LENGTH" in out


def test_demo_runs_and_detects_its_corrupted_file(tmp_path):
    env = dict(os.environ, MODELCODEC_PROGRESS="0")
    p = subprocess.run([sys.executable, "-m", "codec.tools.cli", "demo", "--dir", str(tmp_path / "d")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "full check passed" in p.stdout and "AERO-CHUNK-HASH" in p.stdout
    assert sorted(os.listdir(tmp_path / "d")) == ["corrupted.aero", "tiny-mlp-set", "tiny-mlp-set-cache",
                                                     "tiny-mlp-sharded.aero", "tiny-mlp.aero", "tiny-mlp.gguf",
                                                     "tiny-mlp.mag", "tiny-mlp.oinf", "tiny-mlp.safetensors",
                                                     "tiny-mlp.stb"]
    for fmt in ("MAG", "STB", "OINF", "SAFETENSORS", "GGUF"):
        assert f"{fmt} full check passed" in p.stdout, fmt
    assert "AEROSET full check passed" in p.stdout and "identical to the local copy" in p.stdout
    assert p.stdout.count("AEROSET full check passed") == 2  # the set's directory, then its URL
    quiet = subprocess.run([sys.executable, "-m", "codec.tools.cli", "demo", "--quiet", "--dir", str(tmp_path / "q")],
                           capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stdout + quiet.stderr


def test_progress_bar_only_on_a_terminal(tmp_path, capsys):
    write_aero(tmp_path / "m.aero", {"a": np.zeros(1 << 16, np.float32)})
    rc, out, err = run(capsys, "validate", "--full", str(tmp_path / "m.aero"))
    assert rc == 0 and err == ""  # captured stderr is not a tty: no bar


@pytest.mark.parametrize("args", [["inspect", "--all"], ["inspect", "--all", "--json"], ["verify"]])
def test_a_closed_pipe_ends_quietly(tmp_path, args):
    """`modelcodec inspect big.aero | head -1`: status 0, nothing on stderr."""
    p = tmp_path / "big.aero"
    write_aero(p, {f"tensor.{i}": np.zeros(4, np.float32) for i in range(20_000)}, uuid=bytes(16))
    proc = subprocess.Popen([sys.executable, "-m", "codec.tools.cli", *args[:1], str(p), *args[1:]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline()
    proc.stdout.close()  # like `head -1` exiting
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == b"", err


def test_validate_control_without_control_integrity_says_so(tmp_path, capsys):
    import codec
    t = {"w": np.zeros(2, np.float32)}
    codec.write(tmp_path / "m.mag", t, format="mag")
    write_aero(tmp_path / "plain.aero", t, uuid=bytes(16))
    write_aero(tmp_path / "ihsh.aero", t, uuid=bytes(16), control_integrity=True)
    for f in ("m.mag", "plain.aero"):
        assert main(["validate", "--control", str(tmp_path / f)]) == 3
        assert "no control integrity to check" in capsys.readouterr().out
    assert main(["validate", "--control", "--json", str(tmp_path / "plain.aero")]) == 3
    assert json.loads(capsys.readouterr().out)["control_integrity"] is False
    assert main(["validate", "--control", str(tmp_path / "ihsh.aero")]) == 0
    assert "control check passed" in capsys.readouterr().out


def test_inspect_set_of_a_single_file_says_what_it_is(tmp_path, capsys):
    write_aero(tmp_path / "one.aero", {"w": np.zeros(2, np.float32)}, uuid=bytes(16))
    assert main(["inspect-set", str(tmp_path / "one.aero")]) == 1
    err = capsys.readouterr().err
    assert "single AERO file, not an AEROSET" in err and "64 MiB" not in err


def test_inspect_json_speaks_one_dtype_vocabulary(tmp_path, capsys):
    """The same int32 tensor has the same `dtype` whichever format holds it; the format's own
    code is `format_dtype`."""
    import codec
    import ml_dtypes
    from codec.formats.aero import TensorSpec
    a = np.arange(6, dtype=np.int32)
    for fmt in ("aero", "mag", "oinf"):
        codec.write(tmp_path / f"m.{fmt}", {"w": a}, format=fmt)
    codec.write(tmp_path / "m.stb", [a], format="stb")
    seen = {}
    for fmt in ("aero", "mag", "oinf", "stb"):
        assert main(["inspect", "--json", str(tmp_path / f"m.{fmt}")]) == 0
        t = json.loads(capsys.readouterr().out)["tensors"][0]
        seen[fmt] = (t["dtype"], t["format_dtype"])
    assert {d for d, _ in seen.values()} == {"int32"} and seen["aero"][1] == "i32"
    write_aero(tmp_path / "x.aero", {"b": np.zeros(2, ml_dtypes.bfloat16),
                                     "q": TensorSpec(b"\x01\x02\x03", dtype="packed", shape=(3,))}, uuid=bytes(16))
    assert main(["inspect", "--json", str(tmp_path / "x.aero")]) == 0
    got = {t["name"]: t["dtype"] for t in json.loads(capsys.readouterr().out)["tensors"]}
    assert got == {"b": "bfloat16", "q": "packed"}


def test_long_metadata_is_marked_when_shortened_and_whole_with_all_or_json(tmp_path, capsys):
    long = "x" * 2000
    write_aero(tmp_path / "m.aero", {"w": np.zeros(2, np.float32)}, uuid=bytes(16), metadata={"note": long})
    assert main(["inspect", str(tmp_path / "m.aero")]) == 0
    out = capsys.readouterr().out
    assert "more characters: --all or --json show it whole" in out and long not in out
    assert main(["inspect", "--all", str(tmp_path / "m.aero")]) == 0
    assert long in capsys.readouterr().out
    assert main(["inspect", "--json", str(tmp_path / "m.aero")]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["note"] == long


# ------------------------------------------------------------------ convert, output read back
def _tensors_of(path, **options) -> dict:
    import codec
    with codec.open(str(path), **options) as r:
        return {n: (r.tensor(n).dtype, r.tensor(n).shape, r.tensor(n).tobytes()) for n in r.tensors}, r.metadata


def _as_read(t: dict) -> dict:
    return {n: (a.dtype, a.shape, a.tobytes()) for n, a in t.items()}


CLI_MODEL = {"emb.w": np.arange(24, dtype=np.float32).reshape(4, 6) / 3, "ids": np.arange(-3, 4, dtype=np.int32),
             "h": np.linspace(0, 1, 5, dtype=np.float16)}


def test_convert_writes_every_tensor_and_the_metadata(tmp_path, capsys):
    import codec
    src = codec.write(str(tmp_path / "m.safetensors"), CLI_MODEL, metadata={"note": "kept"})
    for dst in (tmp_path / "m.aero", tmp_path / "m.gguf", tmp_path / "m.oinf", tmp_path / "set"):
        rc, out, err = run(capsys, "convert", src, str(dst) + ("/" if dst.name == "set" else ""))
        assert rc == 0 and not err and out.startswith(f"wrote {dst}") and out.count("\n") == 1
        got, md = _tensors_of(out[len("wrote "):].strip())
        assert got == _as_read(CLI_MODEL) and md["note"] == "kept"


def test_convert_to_a_format_the_name_does_not_say(tmp_path, capsys):
    """--to names the format of a destination whose name says none; the file is that format."""
    import codec
    src = codec.write(str(tmp_path / "m.aero"), CLI_MODEL)
    dst = tmp_path / "weights.bin"
    rc, _, err = run(capsys, "convert", src, str(dst))
    assert rc == 1 and "cannot tell the format" in err and not dst.exists()
    rc, out, _ = run(capsys, "convert", src, str(dst), "--to", "gguf")
    assert rc == 0 and out == f"wrote {dst}\n" and dst.read_bytes()[:4] == b"GGUF"
    got, _ = _tensors_of(dst)
    assert codec.open(str(dst)).format == "gguf" and got == _as_read(CLI_MODEL)
    rc, _, err = run(capsys, "convert", src, str(tmp_path / "w.bin"), "--to", "stb", "--drop-metadata")
    assert rc == 1 and "--rename index" in err


def test_convert_renames_by_index(tmp_path, capsys):
    """--rename index names the tensors 0, 1, ... in the source's order (STB keys tensors by id)."""
    import codec
    src = codec.write(str(tmp_path / "m.safetensors"), CLI_MODEL)
    dst = tmp_path / "m.stb"
    rc, _, err = run(capsys, "convert", src, str(dst))
    assert rc == 1 and "tensor 'emb.w': STB cannot hold it" in err and "--rename index" in err and not dst.exists()
    rc, out, _ = run(capsys, "convert", src, str(dst), "--rename", "index")
    assert rc == 0 and out == f"wrote {dst} (tensor names in {dst}.names.json)\n"
    with codec.open(src) as r:
        order = list(r.tensors)
    got, _ = _tensors_of(dst)
    assert got == {str(k): _as_read(CLI_MODEL)[n] for k, n in enumerate(order)}


@pytest.fixture(scope="module")
def served_set(tmp_path_factory):
    """A set whose parts a local server holds, and a local copy of its index alone (its
    base_url names the server)."""
    from codec.formats.aeroset import write_aeroset

    from .servers import Nginx
    www = tmp_path_factory.mktemp("www-cli")
    with Nginx(www) as n:
        write_aeroset(www / "s", CLI_MODEL, max_shard_bytes=64, base_url=n.url + "/s", metadata={"note": "remote"})
        local = tmp_path_factory.mktemp("index-only")
        index = next(p for p in os.listdir(www / "s") if p.endswith(".aeroset.json"))
        (local / index).write_bytes((www / "s" / index).read_bytes())
        yield local / index


@pytest.mark.timeout(120)
def test_convert_reads_a_local_index_from_its_base_url(served_set, tmp_path, capsys):
    """--remote: a local index whose parts are not here is read from its base_url."""
    dst = tmp_path / "m.safetensors"
    rc, _, err = run(capsys, "convert", str(served_set), str(dst))
    assert rc == 1 and not dst.exists()  # (its parts are not beside it)
    rc, out, err = run(capsys, "convert", str(served_set), str(dst), "--remote")
    assert rc == 0 and out == f"wrote {dst}\n", err
    got, md = _tensors_of(dst)
    assert got == _as_read(CLI_MODEL) and md == {"note": "remote"}


def test_fetch_tensor_of_a_tensor_declared_without_data_is_one_clear_line(capsys, tmp_path):
    import codec
    from codec.formats.oinf import UninitializedTensor
    src = tmp_path / "m.oinf"
    codec.save({"w": np.arange(4, dtype=np.float32), "cache": UninitializedTensor("f16", (2, 3))}, src)
    for out in ("c.npy", "c.bin"):
        rc, o, err = run(capsys, "fetch-tensor", str(src), "cache", str(tmp_path / out))
        assert rc == 1 and o == "" and "'cache'" in err and "declared without data" in err
        assert "internal error" not in err and not (tmp_path / out).exists()


def test_a_format_is_named_in_any_case_on_the_command_line_as_in_the_library(capsys, tmp_path):
    """Text output shows GGUF, MAG ...; codec.save(format="GGUF") takes it: so do --to and schema."""
    rc, out, err = run(capsys, "convert", str(VDIR / "multishard.aero"), str(tmp_path / "m.bin"), "--to", "GGUF")
    assert rc == 0 and not err
    import codec
    with codec.open(tmp_path / "m.bin") as r:
        assert r.format == "gguf"
    rc, out, _ = run(capsys, "schema", "MAG")
    assert rc == 0 and out.startswith("# MAG")


def test_validate_control_with_nothing_to_check_is_not_marked_bad(tmp_path, capsys):
    """'-' as for many files (docs/guide/cli.md): '✗' means bad, and the file is not."""
    import codec
    codec.write(tmp_path / "m.mag", {"w": np.zeros(2, np.float32)}, format="mag")
    rc, out, _ = run(capsys, "validate", "--control", str(tmp_path / "m.mag"))
    assert rc == 3 and out.startswith(f"- {tmp_path / 'm.mag'}: no control integrity to check") and "✗" not in out


def test_mirror_of_a_file_already_there_does_not_say_its_bytes_were_copied(capsys, tmp_path):
    """The bytes a mirror counts are those it read from the source (a file is read to compare
    it): the line does not put them beside "0 file(s) copied"."""
    src = str(VDIR / "multishard.aero")
    size = os.path.getsize(src)
    assert run(capsys, "mirror", src, str(tmp_path / "m.aero"))[0] == 0
    rc, out, _ = run(capsys, "mirror", src, str(tmp_path / "m.aero"))
    assert rc == 0 and f"0 file(s) copied, 1 already up to date ({size:,} bytes read from the source)" in out
    assert f"copied ({size:,} bytes)" not in out


def test_inspect_options_for_one_listing_are_refused_with_many_files_not_ignored(capsys):
    two = [str(VDIR / "minimal_f32.aero"), str(VDIR / "multishard.aero")]
    for opt in (["--metadata"], ["--tensors", "m*"], ["--all"]):
        rc, out, err = run(capsys, "inspect", *two, *opt)
        assert rc == 1 and out == "" and opt[0] in err and "give one path, or --json" in err
    rc, out, _ = run(capsys, "inspect", *two, "--metadata", "--json")  # (each file's own object)
    assert rc == 0 and [set(json.loads(x)) for x in out.splitlines()] == [{"format", "metadata", "source"}] * 2


def test_an_empty_path_is_said_to_be_empty(capsys):
    for cmd in ("inspect", "validate"):
        rc, out, err = run(capsys, cmd, "")
        assert rc == 1 and "empty path" in err and not err.startswith("modelcodec: :")


def test_fetch_tensor_of_a_name_the_model_lacks_names_the_file_and_the_nearest_names(capsys, tmp_path):
    src = str(VDIR / "multishard.aero")
    rc, out, err = run(capsys, "fetch-tensor", src, "m33", str(tmp_path / "x.npy"))
    assert rc == 1 and out == "" and err.startswith(f"modelcodec: {src}: no tensor named 'm33'") and "'m3'" in err
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize("opt, value", [("--max-shard-size", "0"), ("--max-shard-bytes", "-1"),
                                         ("--max-part-shards", "0")])
def test_a_bad_writer_option_is_named_as_typed_on_the_command_line(capsys, tmp_path, opt, value):
    dst = tmp_path / ("m.aeroset.json" if opt == "--max-part-shards" else
                      "m.safetensors" if opt == "--max-shard-size" else "m.aero")
    rc, out, err = run(capsys, "convert", str(VDIR / "multishard.aero"), str(dst), opt, value)
    assert rc == 1 and err.startswith(f"modelcodec: {opt} ") and "max_" not in err


def test_a_bad_diff_tolerance_is_named_as_typed(capsys):
    src = str(VDIR / "multishard.aero")
    rc, out, err = run(capsys, "diff", src, src, "--rtol", "nan")
    assert rc == 2 and err.startswith("modelcodec: --rtol nan: a tolerance is a finite number >= 0")


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_json_output_is_strict_json_with_nan_and_infinite_metadata(capsys, tmp_path):
    import codec
    p = tmp_path / "m.gguf"
    codec.save({"w": np.zeros(2, np.float32)}, p, metadata={"a": float("nan"), "b": np.float32("-inf"),
                                                            "c": [float("inf"), 1.0]})
    rc, out, _ = run(capsys, "inspect", "--json", str(p))
    assert rc == 0 and _strict(out)["metadata"] == {"a": "nan", "b": "-inf", "c": ["inf", 1.0]}
    rc, out, _ = run(capsys, "inspect", "--json", "--metadata", str(p), str(p))  # (JSON Lines)
    assert rc == 0 and [_strict(x)["metadata"]["a"] for x in out.splitlines()] == ["nan", "nan"]
    rc, out, _ = run(capsys, "validate", "--json", str(p))
    assert rc == 0 and _strict(out)["ok"]


def test_an_interrupted_command_says_so_in_one_line(capsys, monkeypatch):
    import codec

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(codec, "validate", interrupted)
    monkeypatch.delenv("MODELCODEC_DEBUG", raising=False)
    rc, out, err = run(capsys, "validate", str(VDIR / "minimal_f32.aero"))
    assert rc == 130 and out == "" and err == "modelcodec: interrupted\n"


def test_fetch_tensor_to_dash_writes_the_raw_bytes_to_standard_output(capsysbinary, tmp_path, monkeypatch):
    """Not a file named "-" in the working directory."""
    import codec
    monkeypatch.chdir(tmp_path)
    src = str(VDIR / "multishard.aero")
    assert main(["fetch-tensor", src, "m3", "-"]) == 0
    out, err = capsysbinary.readouterr()
    with codec.open(src) as r:
        assert out == r.tensor("m3").tobytes()
    assert b"to standard output, 600 bytes" in err and not os.listdir(tmp_path)


def test_a_directory_that_holds_no_model_is_not_called_a_file(capsys, tmp_path):
    """Directories are models for some formats (a set, a sharded checkpoint): the message says
    which, not "file is a directory, not a regular file"."""
    (tmp_path / "notes.txt").write_text("x")
    for cmd in ("inspect", "validate"):
        rc, out, err = run(capsys, cmd, str(tmp_path))
        assert rc == 1 and f"{tmp_path}: a directory that no format reads as a model" in err
        assert "regular file" not in err and "AEROSET" in err and "SAFETENSORS" in err


def test_an_os_error_names_its_path_first_as_every_other_message(capsys, tmp_path):
    (tmp_path / "f").write_text("x")
    rc, out, err = run(capsys, "demo", "--dir", str(tmp_path / "f"))
    assert rc == 1 and err.startswith(f"modelcodec: {tmp_path / 'f'}: ")


def test_remote_for_one_file_is_refused_in_the_command_lines_words(tmp_path, capsys):
    """--remote is a flag of sets: for one MAG file (a command of one file, of several, and
    convert) the message names the flag, not a reader's keyword option."""
    src = tmp_path / "x.mag"
    codec.write(src, {"a": np.arange(6, dtype=np.float32)})
    for argv in (["validate", "--remote", str(src)], ["validate", "--remote", str(src), str(src)],
                 ["convert", "--remote", str(src), str(tmp_path / "y.aero")]):
        rc, out, err = run(capsys, *argv)
        said = out + err
        assert rc == 1 and "--remote is for sets" in said and "MAG" in said, (argv, said)
        assert "option 'remote'" not in said
    assert not (tmp_path / "y.aero").exists()
