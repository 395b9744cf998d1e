"""`mirror` into a destination that already holds files of the same names (a local folder, and
moto's S3 server): a file with the source's bytes is kept as it is (not rewritten) and counted
up to date; one with other bytes -- a user's file, a symbolic link, a file an earlier mirror of a
source that has changed since wrote -- is refused before anything is transferred, unless
``overwrite=True`` / ``--overwrite``, which replaces it atomically (a link itself, never the file
it leads to); a folder in the way, or a link on the way, is refused even then; a file of another
name is never touched."""
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec import errors as E

from .servers import PlainHttp

pytestmark = pytest.mark.timeout(300)


def _model(n=6, size=1024, bump=()):
    return {f"t.{i}": np.arange(size, dtype=np.float32) + i + (1000 if i in bump else 0) for i in range(n)}


def _set(d, bump=()):
    """An AEROSET of 6 parts (one tensor each): index.aero, model.aeroset.json, part-000..005."""
    from codec.formats.aeroset import write_aeroset
    write_aeroset(str(d), _model(bump=bump), max_shard_bytes=4096 + 64, max_part_shards=1)
    return d


def _files(d):
    return sorted(os.listdir(d))


def _state(d):
    """Every name under ``d`` with what it is: its bytes, where its link leads, or its kind."""
    out = {}
    for root, dirs, names in os.walk(d):
        for n in dirs + names:
            p = os.path.join(root, n)
            mode = os.lstat(p).st_mode
            out[os.path.relpath(p, d)] = (("link", os.readlink(p)) if stat.S_ISLNK(mode) else
                                          open(p, "rb").read() if stat.S_ISREG(mode) else stat.S_IFMT(mode))
    return out


def _inodes(d):
    return {n: (os.lstat(os.path.join(d, n)).st_ino, os.lstat(os.path.join(d, n)).st_mtime_ns) for n in _files(d)}


def _copy(src, dst, names=None):
    os.makedirs(dst, exist_ok=True)
    for n in names or _files(src):
        (dst / n).write_bytes((src / n).read_bytes())


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "codec", "mirror", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


# --------------------------------------------------------------------------- local folder
def test_files_with_the_source_bytes_are_kept_not_rewritten_with_or_without_an_index_hash(tmp_path):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    _copy(src, dst)
    os.remove(dst / "part-002.aero")  # (a link to a file with the same bytes is kept too: read, not replaced)
    (tmp_path / "blob").write_bytes((src / "part-002.aero").read_bytes())
    os.symlink(tmp_path / "blob", dst / "part-002.aero")
    before = _inodes(dst)
    out = codec.mirror(str(src), str(dst))
    assert out.copied == [] and sorted(out.skipped) == _files(src) and out.pulled == 0
    assert _inodes(dst) == before and os.path.islink(dst / "part-002.aero")
    # a single file (no index: the source's own bytes hashed) and a sharded checkpoint (an index without hashes)
    codec.write(str(tmp_path / "one.aero"), _model(2))
    _copy(tmp_path, tmp_path / "files", ["one.aero"])
    t = {f"w.{i}": np.full(4096, i, np.float32) for i in range(6)}
    codec.write(str(tmp_path / "sh" / "model.safetensors.index.json"), t, max_shard_size=40000)
    _copy(tmp_path / "sh", tmp_path / "sh2")
    before = _inodes(tmp_path / "files"), _inodes(tmp_path / "sh2")
    one = codec.mirror(str(tmp_path / "one.aero"), str(tmp_path / "files") + "/")
    sh = codec.mirror(str(tmp_path / "sh"), str(tmp_path / "sh2"))
    assert one.copied == [] and one.skipped == ["one.aero"]
    assert sh.copied == [] and sorted(sh.skipped) == _files(tmp_path / "sh")
    assert (_inodes(tmp_path / "files"), _inodes(tmp_path / "sh2")) == before
    assert out.replaced == one.replaced == sh.replaced == []
    cli = _cli(src, dst)
    assert cli.returncode == 0 and f"0 file(s) copied, {len(_files(src))} already up to date (0 bytes read from the source)" in cli.stdout


def test_a_file_with_other_bytes_is_refused_before_anything_is_written_then_replaced_with_overwrite(tmp_path):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    _copy(src, dst, ["part-000.aero", "part-001.aero"])  # (the same bytes: kept)
    (dst / "part-004.aero").write_bytes(b"the user's own part-004")
    (dst / "part-005.aero").write_bytes((src / "part-005.aero").read_bytes()[:-1] + b"\x00")  # same size
    (dst / "README.md").write_text("not the model's")
    before = _state(dst)
    with pytest.raises(E.UsageError) as e:
        codec.mirror(str(src), str(dst))
    msg = str(e.value)
    assert "part-004.aero" in msg and "part-005.aero" in msg and "overwrite=True" in msg and "part-001" not in msg
    assert _state(dst) == before and _files(tmp_path) == ["dst", "src"]  # (nothing written, nothing staged)
    out = codec.mirror(str(src), str(dst), overwrite=True)
    assert sorted(out.replaced) == ["part-004.aero", "part-005.aero"]
    assert sorted(out.skipped) == ["part-000.aero", "part-001.aero"]
    assert all((dst / n).read_bytes() == (src / n).read_bytes() for n in _files(src))
    assert (dst / "README.md").read_text() == "not the model's" and _files(dst) == sorted(_files(src) + ["README.md"])
    assert codec.validate(str(dst), full=True).ok
    with pytest.raises(E.UsageError, match="overwrite must be True or False"):
        codec.mirror(str(src), str(dst), overwrite="yes")


def test_a_folder_in_the_way_is_refused_even_with_overwrite_and_nothing_is_published(tmp_path):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    (dst / "part-003.aero").mkdir(parents=True)
    (dst / "part-003.aero" / "notes.txt").write_text("mine")
    os.mkfifo(dst / "part-004.aero")
    (dst / "part-005.aero").write_bytes(b"other bytes")
    before = _state(dst)
    for opts, more in (({}, "; 1 more with other bytes .*"), ({"overwrite": True}, "; ")):
        with pytest.raises(E.UsageError, match=r"part-003\.aero \(a folder\), part-004\.aero \(a FIFO\)"
                           + more + "nothing was copied"):
            codec.mirror(str(src), str(dst), **opts)
        assert _state(dst) == before and _files(tmp_path) == ["dst", "src"]


def test_symbolic_links_at_the_destination_are_never_written_through(tmp_path):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    (tmp_path / "precious").write_bytes(b"somebody else's file")
    os.symlink(tmp_path / "precious", dst / "part-001.aero")
    os.symlink(tmp_path / "nowhere", dst / "part-002.aero")  # (dangling)
    before = _state(dst)
    with pytest.raises(E.UsageError) as e:
        codec.mirror(str(src), str(dst))
    assert "part-001.aero (a symbolic link to a file of 20 bytes" in str(e.value)
    assert "part-002.aero (a symbolic link to no regular file)" in str(e.value)
    assert _state(dst) == before
    out = codec.mirror(str(src), str(dst), overwrite=True)  # the links replaced, never what they lead to
    assert sorted(out.replaced) == ["part-001.aero", "part-002.aero"]
    assert not os.path.islink(dst / "part-001.aero") and not os.path.islink(dst / "part-002.aero")
    assert (dst / "part-001.aero").read_bytes() == (src / "part-001.aero").read_bytes()
    assert (tmp_path / "precious").read_bytes() == b"somebody else's file" and not (tmp_path / "nowhere").exists()
    # a single file whose destination name is a link to another file
    codec.write(str(tmp_path / "one.aero"), _model(2))
    (tmp_path / "files").mkdir()
    os.symlink(tmp_path / "precious", tmp_path / "files" / "copy.aero")
    with pytest.raises(E.UsageError, match="copy.aero"):
        codec.mirror(str(tmp_path / "one.aero"), str(tmp_path / "files" / "copy.aero"))
    codec.mirror(str(tmp_path / "one.aero"), str(tmp_path / "files" / "copy.aero"), overwrite=True)
    assert (tmp_path / "precious").read_bytes() == b"somebody else's file"
    assert (tmp_path / "files" / "copy.aero").read_bytes() == (tmp_path / "one.aero").read_bytes()


def test_a_link_on_the_way_to_a_file_of_the_model_is_refused_even_with_overwrite(tmp_path):
    """A sharded checkpoint whose shards lie in a subfolder: a link there would lead the copy elsewhere."""
    t = {f"w.{i}": np.full(4096, i, np.float32) for i in range(6)}
    src = tmp_path / "src"
    codec.write(str(src / "model.safetensors.index.json"), t, max_shard_size=40000)
    (src / "shards").mkdir()
    index = json.loads((src / "model.safetensors.index.json").read_text())
    for name in set(index["weight_map"].values()):
        os.rename(src / name, src / "shards" / name)
    index["weight_map"] = {k: f"shards/{v}" for k, v in index["weight_map"].items()}
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "dst").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "dst" / "shards")
    for opts in ({}, {"overwrite": True}):
        with pytest.raises(E.UsageError, match=r"shards on the way is a symbolic link"):
            codec.mirror(str(src), str(tmp_path / "dst"), **opts)
        assert os.listdir(tmp_path / "elsewhere") == [] and _files(tmp_path / "dst") == ["shards"]
    os.remove(tmp_path / "dst" / "shards")
    codec.mirror(str(src), str(tmp_path / "dst"))
    got = codec.load(str(tmp_path / "dst" / "model.safetensors.index.json"))
    assert all(got[k].tobytes() == a.tobytes() for k, a in t.items())


def test_an_earlier_mirror_of_a_source_that_changed_since_is_updated_only_with_overwrite(tmp_path):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    codec.mirror(str(src), str(dst))
    _set(tmp_path / "src2", bump=(3,))  # (the model's tensor t.3 changed: part-003, index.aero and the JSON)
    changed = sorted(n for n in _files(src) if (src / n).read_bytes() != (tmp_path / "src2" / n).read_bytes())
    assert "part-003.aero" in changed and "part-000.aero" not in changed
    before = _state(dst)
    with pytest.raises(E.UsageError) as e:
        codec.mirror(str(tmp_path / "src2"), str(dst))
    assert all(n in str(e.value) for n in changed) and _state(dst) == before
    out = codec.mirror(str(tmp_path / "src2"), str(dst), overwrite=True)
    assert sorted(out.replaced) == sorted(out.copied) == changed
    assert sorted(out.skipped) == sorted(set(_files(src)) - set(changed))
    assert all((dst / n).read_bytes() == (tmp_path / "src2" / n).read_bytes() for n in _files(src))


def test_the_cli_refuses_in_one_line_naming_the_file_and_overwrite_replaces_it(tmp_path):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "index.aero").write_bytes(b"mine")
    out = _cli(src, dst)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert "index.aero" in lines[0] and "--overwrite" in lines[0] and "overwrite=True" not in lines[0]
    assert _files(dst) == ["index.aero"] and (dst / "index.aero").read_bytes() == b"mine"
    out = _cli(src, dst, "--overwrite")
    assert out.returncode == 0, out.stderr
    assert f"{len(_files(src))} file(s) copied" in out.stdout and "1 of them replacing other bytes" in out.stdout
    assert (dst / "index.aero").read_bytes() == (src / "index.aero").read_bytes()


def test_a_file_from_a_server_without_range_requests_is_compared_and_nothing_beside_it_is_touched(tmp_path):
    codec.write(str(tmp_path / "m.aero"), _model(3, 30000))
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "m.aero.partial").write_bytes(b"the user's file of that name")
    (dst / "m.aero").write_bytes(b"x" * (tmp_path / "m.aero").stat().st_size)  # (the same size, other bytes)
    with PlainHttp(tmp_path) as srv:
        with pytest.raises(E.UsageError, match=r"m\.aero \(a file with other bytes\)"):
            codec.mirror(f"{srv.url}/m.aero", str(dst) + "/")
        assert _files(dst) == ["m.aero", "m.aero.partial"] and (dst / "m.aero").read_bytes()[:1] == b"x"
        out = codec.mirror(f"{srv.url}/m.aero", str(dst) + "/", overwrite=True)
        assert out.replaced == ["m.aero"] and (dst / "m.aero").read_bytes() == (tmp_path / "m.aero").read_bytes()
        ino = os.stat(dst / "m.aero").st_ino
        again = codec.mirror(f"{srv.url}/m.aero", str(dst) + "/")  # the same bytes: kept
        assert again.skipped == ["m.aero"] and again.copied == [] and os.stat(dst / "m.aero").st_ino == ino
    assert (dst / "m.aero.partial").read_bytes() == b"the user's file of that name"
    assert _files(tmp_path) == ["dst", "m.aero"]


# --------------------------------------------------------------------------- object storage
def _writes(s3, mark):
    return [(m, p) for m, p, _ in s3.since(mark) if m in ("PUT", "POST", "DELETE")]


def test_on_s3_same_bytes_are_kept_other_bytes_refused_and_replaced_with_overwrite(s3, bucket, tmp_path):
    so, fs = s3.storage_options, s3.fs()
    src = _set(tmp_path / "src")
    codec.write(str(tmp_path / "one.aero"), _model(2))
    for n in ("part-000.aero", "part-001.aero"):
        fs.pipe_file(f"{bucket}/zoo/{n}", (src / n).read_bytes())
    fs.pipe_file(f"{bucket}/files/one.aero", (tmp_path / "one.aero").read_bytes())
    fs.pipe_file(f"{bucket}/zoo/part-004.aero", b"the user's own part-004")
    fs.pipe_file(f"{bucket}/zoo/README.md", b"not the model's")
    mark = s3.mark()
    one = codec.mirror(str(tmp_path / "one.aero"), f"s3://{bucket}/files/", storage_options=so)
    assert one.skipped == ["one.aero"] and one.copied == [] and _writes(s3, mark) == []  # (kept, not put again)
    with pytest.raises(E.UsageError, match=r"part-004\.aero \(a file of 23 bytes, not [\d,]+\).*overwrite=True"):
        codec.mirror(str(src), f"s3://{bucket}/zoo", storage_options=so)
    assert _writes(s3, mark) == []  # (refused before anything was staged or put)
    fs.invalidate_cache()
    assert fs.cat_file(f"{bucket}/zoo/part-004.aero") == b"the user's own part-004"
    out = codec.mirror(str(src), f"s3://{bucket}/zoo", storage_options=so, overwrite=True)
    assert out.replaced == ["part-004.aero"] and sorted(out.skipped) == ["part-000.aero", "part-001.aero"]
    fs.invalidate_cache()
    assert all(fs.cat_file(f"{bucket}/zoo/{n}") == (src / n).read_bytes() for n in _files(src))
    assert fs.cat_file(f"{bucket}/zoo/README.md") == b"not the model's"
    assert sorted(p.rsplit("/", 1)[1] for p in fs.find(bucket) if "/zoo/" in p) == sorted(_files(src) + ["README.md"])


def test_on_s3_a_folder_at_a_file_name_is_refused_even_with_overwrite(s3, bucket, tmp_path):
    so, fs = s3.storage_options, s3.fs()
    src = _set(tmp_path / "src")
    fs.pipe_file(f"{bucket}/zoo/part-002.aero/notes.txt", b"mine")
    mark = s3.mark()
    for opts in ({}, {"overwrite": True}):
        with pytest.raises(E.UsageError, match=r"part-002\.aero \(a folder\)"):
            codec.mirror(str(src), f"s3://{bucket}/zoo", storage_options=so, **opts)
    assert _writes(s3, mark) == []
    fs.invalidate_cache()
    assert fs.find(bucket) == [f"{bucket}/zoo/part-002.aero/notes.txt"]


def test_on_s3_an_earlier_mirror_of_a_changed_source_is_updated_only_with_overwrite(s3, bucket, tmp_path):
    so, fs = s3.storage_options, s3.fs()
    src = _set(tmp_path / "src")
    codec.mirror(str(src), f"s3://{bucket}/zoo", storage_options=so)
    src2 = _set(tmp_path / "src2", bump=(1,))
    changed = sorted(n for n in _files(src) if (src / n).read_bytes() != (src2 / n).read_bytes())
    mark = s3.mark()
    with pytest.raises(E.UsageError) as e:
        codec.mirror(str(src2), f"s3://{bucket}/zoo", storage_options=so)
    assert all(n in str(e.value) for n in changed) and _writes(s3, mark) == []
    out = codec.mirror(str(src2), f"s3://{bucket}/zoo", storage_options=so, overwrite=True)
    assert sorted(out.replaced) == changed
    fs.invalidate_cache()
    assert all(fs.cat_file(f"{bucket}/zoo/{n}") == (src2 / n).read_bytes() for n in _files(src))


def test_a_sharded_checkpoint_from_a_server_without_range_requests_is_compared_by_the_source_bytes(tmp_path):
    """No hashes in the index, no ranges from the server: each file there of the same size is
    compared with the source file's bytes, downloaded once and hashed (kept nowhere)."""
    t = {f"w.{i}": np.full(4096, i, np.float32) for i in range(6)}
    codec.write(str(tmp_path / "sh" / "model.safetensors.index.json"), t, max_shard_size=40000)
    names = _files(tmp_path / "sh")
    dst = tmp_path / "dst"
    _copy(tmp_path / "sh", dst)
    changed = dst / names[1]
    changed.write_bytes(changed.read_bytes()[:-1] + bytes([changed.read_bytes()[-1] ^ 1]))  # (the same size)
    before = _state(dst)
    with PlainHttp(tmp_path) as srv:
        url = f"{srv.url}/sh/model.safetensors.index.json"
        with pytest.raises(E.UsageError, match=rf"{names[1]} \(a file with other bytes\)") as e:
            codec.mirror(url, str(dst))
        assert all(n not in str(e.value) for n in names if n != names[1]) and _state(dst) == before
        inodes = _inodes(dst)
        out = codec.mirror(url, str(dst), overwrite=True)
    assert out.replaced == out.copied == [names[1]] and sorted(out.skipped) == sorted(set(names) - {names[1]})
    assert all((dst / n).read_bytes() == (tmp_path / "sh" / n).read_bytes() for n in names)
    assert all(_inodes(dst)[n] == inodes[n] for n in names if n != names[1])
