"""What a writer accepts, its reader accepts; a bad argument is a UsageError naming it (issue 30
§3, §5): every option of every writer swept with values of the wrong type or range, the AERO
arguments its reader checks against a declaration, destinations that are URLs, that lie behind
a symlink or in a directory that does not exist, file system errors, lone surrogates."""
import errno
import inspect
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec import registry
from codec.errors import FormatError, UsageError
from codec.formats.aero import TensorSpec
from codec.formats.stb import StbTensor

from .conftest import ROOT

WRITERS = [d for d in registry.formats() if d.writer is not None]
#: values of every kind a caller can pass by mistake: wrong types, ints no field holds, text no
#: file holds (lone surrogates), containers of those
BAD = [2**70, -2**70, -1, 0, "x", [1, 2], [5], {1: 2}, {"k": "\udc80"}, {"\udc80": "v"}, "\udc80", object(),
       1.5, float("nan"), b"x", {"k": 2**70}, {"k": [[1, 2], {"a": None}]}, [{"a": 2**70}], [{"a": "\udc80"}]]


def _name(d) -> str:
    return "m" + (d.extensions[0] if d.extensions else "")


def _tensors(d):
    return {(0 if d.capabilities.ids else "w"): np.arange(4, dtype=np.float32)}


def _options(d):
    return [p for p, v in inspect.signature(d.writer).parameters.items()
            if v.kind == v.KEYWORD_ONLY and not p.startswith("_")]


def _written_reads_back(path) -> None:
    rep = codec.validate(path, full=True)
    assert rep.ok, rep.errors[:3]


@pytest.mark.parametrize("d", WRITERS, ids=lambda d: d.name)
def test_every_option_of_every_writer_is_refused_or_read_back(d, tmp_path):
    """The sweep: each option alone with each bad value either is a UsageError that names the
    option and leaves nothing behind, or writes a file its own reader accepts (full)."""
    for k in _options(d) + (["page_size"] if d.name == "aero" else []):
        extra = {"page_hashes": True} if (d.name, k) == ("aero", "page_size") else {}
        for v in BAD:
            out = tmp_path / "out"
            out.mkdir()
            try:
                path = codec.write(str(out / _name(d)), _tensors(d), **{k: v}, **extra)
            except UsageError:
                assert os.listdir(out) == [], (d.name, k, v)
            else:
                _written_reads_back(path if isinstance(path, str) else path.path)
            for p in sorted(out.rglob("*"), reverse=True):
                p.rmdir() if p.is_dir() else p.unlink()
            out.rmdir()


@pytest.mark.parametrize("d", [d for d in WRITERS if "metadata" in _options(d)], ids=lambda d: d.name)
def test_metadata_that_is_not_a_mapping_is_a_usage_error_from_the_writer_itself(d, tmp_path):
    """(also when the format's writer is called directly, not through codec.write)"""
    for md in ([1, 2], "x", 5):
        with pytest.raises(UsageError, match="metadata"):
            d.writer(str(tmp_path / (_name(d) if not d.directory else "set")), _tensors(d), metadata=md)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("d", WRITERS, ids=lambda d: d.name)
def test_an_option_a_writer_does_not_take_is_a_usage_error(d, tmp_path):
    with pytest.raises(UsageError, match="no option 'layout'"):
        codec.write(str(tmp_path / _name(d)), _tensors(d), layout=7)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("d", WRITERS, ids=lambda d: d.name)
def test_tensors_that_are_not_a_mapping_or_pairs_are_a_usage_error(d, tmp_path):
    for t in (5, "x", b"x", [1, 2], [("a",)], [("a", np.zeros(2), 3)], np.zeros(3)):
        with pytest.raises(UsageError):
            codec.write(str(tmp_path / _name(d)), t)
        assert os.listdir(tmp_path) == [], (d.name, t)


@pytest.mark.parametrize("qd", [5, [5], "x", [{"k": 2**70}], [{"k": "\udc80"}]])
def test_aero_quant_descriptors_the_reader_refuses_are_refused_up_front(qd, tmp_path):
    with pytest.raises(UsageError, match="quant_descriptors"):
        codec.write(str(tmp_path / "q.aero"), {"a": np.zeros(4, np.float32)}, quant_descriptors=qd)
    with pytest.raises(UsageError, match="quant_descriptors"):  # (the format writer called directly too)
        codec.formats.aero.write_aero(str(tmp_path / "q.aero"), {"a": np.zeros(4, np.float32)},
                                      quant_descriptors=qd)
    assert os.listdir(tmp_path) == []
    # what the reader accepts is still written (numpy integers taken as integers)
    t = {"p": TensorSpec(bytes(8), dtype="packed", shape=(8,), quant_id=np.int64(0), quant_params={"bits": 4})}
    p = codec.write(str(tmp_path / "p.aero"), t, quant_descriptors=[{"codec": "q4"}])
    _written_reads_back(p)
    with codec.open(p) as r:
        assert r.tensors["p"].extra["quant_id"] == 0 and r.tensors["p"].extra["quant_params"] == {"bits": 4}
        assert r.quant_descriptors == [{"codec": "q4"}]


@pytest.mark.parametrize("kw,what", [({"quant_params": [1]}, "quant_params"), ({"quant_params": 5}, "quant_params"),
                                     ({"quant_params": {"k": 2**70}}, "quant_params"),
                                     ({"quant_id": 2**70}, "quant_id"), ({"quant_id": "x"}, "quant_id"),
                                     ({"quant_id": 1.5}, "quant_id")])
def test_aero_packed_tensor_arguments_the_reader_refuses_are_refused(kw, what, tmp_path):
    t = {"p": TensorSpec(bytes(8), dtype="packed", shape=(8,), **kw)}
    with pytest.raises(UsageError, match=f"'p'.*{what}"):
        codec.write(str(tmp_path / "p.aero"), t)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kw,what", [({"metadata": [1, 2]}, "metadata"),
                                     ({"page_hashes": True, "page_size": 2**70}, "page_size"),
                                     ({"page_size": "x"}, "page_size"), ({"first_shard": 2**64}, "first_shard"),
                                     ({"first_shard": -1}, "first_shard"), ({"model_name": 2**70}, "model_name")])
def test_aero_arguments_out_of_range_are_usage_errors_naming_them(kw, what, tmp_path):
    for write in (codec.write, codec.formats.aero.write_aero):
        with pytest.raises(UsageError, match=what):
            write(str(tmp_path / "m.aero"), {"a": np.zeros(4, np.float32)}, **kw)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("spec,what", [(StbTensor(np.zeros(4, np.float32), layout=7), "layout"),
                                       (StbTensor(np.zeros(4, np.float32), layout="x"), "layout"),
                                       (StbTensor(np.zeros(4, np.float32), tensor_id="x"), "tensor_id")])
def test_stb_tensor_arguments_are_usage_errors_naming_them(spec, what, tmp_path):
    with pytest.raises(UsageError, match=what):
        codec.write(str(tmp_path / "s.stb"), [spec])
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------ destinations
# (s3:// and memory:// are destinations: tests/test_store_s3.py; gs:// needs gcsfs, not installed)
@pytest.mark.parametrize("dst", ["gs://b/x.aero", "gs://b/k/model.aeroset.json",
                                 "http://example.invalid/x.safetensors", "HTTPS://h/d/"])
def test_a_url_destination_is_a_usage_error_naming_its_scheme_never_a_local_path(dst, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = codec.write("src.safetensors", {"w": np.zeros(4, np.float32)})
    scheme = dst.split("://")[0]
    with pytest.raises(UsageError, match=f"{scheme}://"):
        codec.write(dst, {"w": np.zeros(4, np.float32)})
    with pytest.raises(UsageError, match=f"{scheme}://"):
        codec.write(dst, {"w": np.zeros(4, np.float32)}, format="aero")
    with pytest.raises(UsageError, match=f"{scheme}://"):
        codec.convert(src, dst)
    r = subprocess.run([sys.executable, "-m", "codec.tools.cli", "convert", src, dst], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode != 0 and f"{scheme}://" in r.stderr and "internal error" not in r.stderr
    assert os.listdir(tmp_path) == ["src.safetensors"]


def test_a_destination_in_a_missing_directory_is_a_usage_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = codec.write("s.safetensors", {"w": np.zeros(4, np.float32)})
    for d in WRITERS:
        if d.directory:
            continue  # (a set's writer makes its directory)
        dst = f"nodir/x{d.extensions[0]}"
        with pytest.raises(UsageError, match=f"^{dst}: .*does not exist"):
            codec.write(dst, _tensors(d))
    with pytest.raises(UsageError, match="^nodir/x.gguf: .*does not exist"):
        codec.convert(src, "nodir/x.gguf")
    assert os.listdir(tmp_path) == ["s.safetensors"]


@pytest.mark.parametrize("d", [d for d in WRITERS if not d.directory], ids=lambda d: d.name)
def test_a_file_system_error_names_the_target_and_leaves_no_temporary(d, tmp_path, monkeypatch):
    real = os.fsync

    def full(fd):
        if os.path.isfile(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)
    monkeypatch.setattr(os, "fsync", full)
    target = str(tmp_path / _name(d))
    with pytest.raises(UsageError) as e:
        codec.write(target, _tensors(d))
    assert str(e.value).startswith(target + ":") and "No space left on device" in str(e.value)
    assert ".modelcodec-" not in str(e.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("d", [d for d in WRITERS if not d.directory], ids=lambda d: d.name)
def test_a_symlinked_destination_is_written_through(d, tmp_path):
    """The link's target is replaced atomically and the link stays -- for every writer."""
    (tmp_path / "store").mkdir()
    real = tmp_path / "store" / _name(d)
    real.write_bytes(b"old")
    link = tmp_path / _name(d)
    link.symlink_to(os.path.join("store", _name(d)))
    codec.write(str(link), _tensors(d))
    assert link.is_symlink() and os.readlink(link) == os.path.join("store", _name(d))
    _written_reads_back(str(real))
    assert sorted(os.listdir(tmp_path)) == sorted([_name(d), "store"]) and os.listdir(tmp_path / "store") == [_name(d)]


def test_convert_and_fetch_tensor_write_through_a_symlink(tmp_path):
    src = codec.write(str(tmp_path / "s.safetensors"), {"w": np.arange(6, dtype=np.float32)})
    real, link = tmp_path / "real.gguf", tmp_path / "out.gguf"
    real.write_bytes(b"old")
    link.symlink_to(real)
    codec.convert(src, str(link))
    assert link.is_symlink() and np.array_equal(codec.load(str(real))["w"], np.arange(6, dtype=np.float32))
    # `modelcodec fetch-tensor FILE NAME OUT` with OUT a symlink to a file
    raw, out = tmp_path / "w.bin", tmp_path / "w.link"
    raw.write_bytes(b"old")
    out.symlink_to(raw)
    r = subprocess.run([sys.executable, "-m", "codec.tools.cli", "fetch-tensor", src, "w", str(out)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert out.is_symlink() and raw.read_bytes() == np.arange(6, dtype=np.float32).tobytes()


def test_a_dangling_symlink_is_written_through_and_a_link_to_a_fifo_is_refused(tmp_path):
    link = tmp_path / "m.safetensors"
    link.symlink_to(tmp_path / "made.safetensors")
    codec.write(str(link), {"w": np.zeros(2, np.float32)})
    assert link.is_symlink() and codec.validate(str(tmp_path / "made.safetensors"), full=True).ok
    gone = tmp_path / "g.safetensors"
    gone.symlink_to(tmp_path / "nodir" / "x.safetensors")
    with pytest.raises(UsageError, match="does not exist"):
        codec.write(str(gone), {"w": np.zeros(2, np.float32)})
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "f.safetensors"
    to_fifo.symlink_to(fifo)
    with pytest.raises(UsageError, match="refusing to replace a FIFO|refusing to replace"):
        codec.write(str(to_fifo), {"w": np.zeros(2, np.float32)})
    assert sorted(os.listdir(tmp_path)) == ["f", "f.safetensors", "g.safetensors", "m.safetensors", "made.safetensors"]


# ------------------------------------------------------------------------------ one rule for text
@pytest.mark.parametrize("md", [{"k": "\udc80"}, {"\ud800": "v"}])
def test_safetensors_metadata_with_a_lone_surrogate_is_a_usage_error(md, tmp_path):
    with pytest.raises(UsageError, match="lone surrogate"):
        codec.write(str(tmp_path / "w.safetensors"), {"w": np.zeros(2, np.float32)}, metadata=md)
    assert os.listdir(tmp_path) == []


def _safetensors(path, header: dict) -> str:
    h = json.dumps(header).encode()  # (json escapes a lone surrogate as \udc80: valid JSON)
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + bytes(16))
    return str(path)


@pytest.mark.parametrize("header,rule", [
    ({"\udc80w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, "SAFETENSORS-ENTRY"),
    ({"__metadata__": {"k": "\ud800"}, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
     "SAFETENSORS-METADATA"),
    ({"__metadata__": {"\udfff": "v"}, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
     "SAFETENSORS-METADATA")])
def test_safetensors_text_with_a_lone_surrogate_is_a_finding_of_the_reader(header, rule, tmp_path):
    p = _safetensors(tmp_path / "s.safetensors", header)
    rep = codec.validate(p)
    assert not rep.ok and [e.rule for e in rep.errors] == [rule] and "lone surrogate" in str(rep.errors[0])
    with pytest.raises(FormatError, match=rule):
        codec.convert(p, str(tmp_path / "x.gguf"))
    assert sorted(os.listdir(tmp_path)) == ["s.safetensors"]


@pytest.mark.parametrize("raw", [b'{"k": "\\ud800"}', b'{"\\udc80": 1}', b'{"k": [["x", "\\uDFFF"]]}'])
def test_aero_mjsn_text_with_a_lone_surrogate_is_a_decode_error_under_its_rule(raw):
    """(AERO's MJSN goes through payload.loads_json: the same rule for text as every reader.)"""
    from codec.engine import payload
    with pytest.raises(codec.errors.DecodeError, match="lone surrogate.*AERO-MJSN"):
        payload.loads_json(raw, fmt="AERO", offset=0, path="MJSN", rule="AERO-MJSN")
    assert payload.loads_json(b'{"k": "\\ud83d\\ude00"}', fmt="AERO", offset=0, path="MJSN", rule="R") == {"k": "😀"}


@pytest.mark.parametrize("tensor_hash", [True, False])
@pytest.mark.parametrize("n_tiny", [0, 50])
@pytest.mark.parametrize("said, gives", [((0,), [b"abc"]), ((2,), [b"ab", b"cd", b"e"]), ((4,), [b"x"])])
def test_aero_a_streamed_source_giving_other_bytes_than_it_said_is_refused(tensor_hash, n_tiny, said, gives,
                                                                         tmp_path):
    # (among small in-memory tensors the writer lays out a shard in memory before writing it: a
    # streamed source still goes through the check of its length, an empty one too)
    tensors = [(f"s{i}", np.full(3, i, np.float32)) for i in range(n_tiny)]
    tensors.append(("streamed", TensorSpec(lambda: iter(gives), dtype=np.uint8, shape=said)))
    dst = tmp_path / "m.aero"
    got = sum(map(len, gives))
    with pytest.raises(UsageError, match=f"streamed: source gave {got} bytes, expected {said[0]}"):
        codec.write(dst, tensors, format="aero", tensor_hash=tensor_hash)
    assert os.listdir(tmp_path) == []
