"""`mirror` and a file put at one of the destination's names while it runs -- after the check
that looks at every name, before the file of that name is published: without ``overwrite`` it is
never replaced (a local folder: renameat2 RENAME_NOREPLACE, or a hard link where that cannot be;
S3: ``If-None-Match: *``).  The source's bytes there are kept and counted up to date; anything
else is a UsageError naming it, the file left as it is, the mirror's staged copies removed and
the index not published.  The race is made deterministic: the store's publishing step is wrapped
so that the file appears just before it runs."""
import errno
import os

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io import atomic
from codec.io.store import LocalStore
from codec.io.store_fsspec import FsspecStore

from .servers import PlainHttp

pytestmark = pytest.mark.timeout(300)

INDEX = "model.aeroset.json"  # (a set's index: published last)


def _set(d):
    """An AEROSET of 4 parts (one tensor each)."""
    from codec.formats.aeroset import write_aeroset
    t = {f"t.{i}": np.arange(1024, dtype=np.float32) + i for i in range(4)}
    write_aeroset(str(d), t, max_shard_bytes=4096 + 64, max_part_shards=1)
    return d


def _files(d):
    return sorted(os.listdir(d))


def _appears(monkeypatch, cls, method, name, make):
    """``make(url)`` runs once, just before ``cls.method`` publishes the file ``name``."""
    real, made = getattr(cls, method), []

    def publishing(self, *args, **kw):
        url = args[1] if method == "move" else args[0]
        if not made and url.endswith("/" + name):
            made.append(url)
            make(url)
        return real(self, *args, **kw)
    monkeypatch.setattr(cls, method, publishing)
    return made


def _write(data):
    def make(path):
        with open(path, "wb") as f:
            f.write(data)
    return make


# --------------------------------------------------------------------------- local folder
@pytest.mark.parametrize("how", ["renameat2", "link"])
def test_a_file_put_there_while_the_mirror_runs_is_never_replaced_and_the_index_not_published(tmp_path, monkeypatch,
                                                                                                how):
    if how == "link":  # (a filesystem without RENAME_NOREPLACE: a hard link made, refused when the name is taken)
        monkeypatch.setattr(atomic, "_renameat2", lambda a, b, flag: False, raising=False)
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    made = _appears(monkeypatch, LocalStore, "move", "part-002.aero", _write(b"the user's own part-002"))
    with pytest.raises(E.UsageError) as e:
        codec.mirror(str(src), str(dst))
    msg = str(e.value)
    assert made and "part-002.aero (a file of 23 bytes, not " in msg and ") was put there while the mirror ran" in msg
    assert "not replaced (overwrite=True replaces it)" in msg and "the index" in msg
    assert (dst / "part-002.aero").read_bytes() == b"the user's own part-002"
    assert INDEX not in _files(dst)
    assert all((dst / n).read_bytes() == (src / n).read_bytes() for n in _files(dst) if n != "part-002.aero")
    assert _files(tmp_path) == ["dst", "src"]  # (the staged copies removed: nothing of the mirror's left)
    out = codec.mirror(str(src), str(dst), overwrite=True)  # (the check now sees it: replaced when told)
    assert out.replaced == ["part-002.aero"]
    assert all((dst / n).read_bytes() == (src / n).read_bytes() for n in _files(src)) and _files(dst) == _files(src)


def test_a_file_with_the_source_bytes_put_there_meanwhile_is_kept_and_counted_up_to_date(tmp_path, monkeypatch):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    _appears(monkeypatch, LocalStore, "move", "part-001.aero", _write((src / "part-001.aero").read_bytes()))
    out = codec.mirror(str(src), str(dst))
    assert "part-001.aero" in out.skipped and "part-001.aero" not in out.copied
    assert sorted(out.copied + out.skipped) == _files(src)
    assert all((dst / n).read_bytes() == (src / n).read_bytes() for n in _files(src))
    assert _files(tmp_path) == ["dst", "src"] and codec.validate(str(dst), full=True).ok


def test_a_folder_put_there_meanwhile_is_refused_as_never_replaced(tmp_path, monkeypatch):
    src = _set(tmp_path / "src")
    dst = tmp_path / "dst"
    _appears(monkeypatch, LocalStore, "move", INDEX, lambda p: os.makedirs(os.path.join(p, "mine")))
    with pytest.raises(E.UsageError, match=rf"{INDEX} \(a folder\) was put there .*: not replaced even with "
                                           r"overwrite=True; \d+ other file"):
        codec.mirror(str(src), str(dst))
    assert os.listdir(dst / INDEX) == ["mine"] and _files(tmp_path) == ["dst", "src"]


def test_a_single_file_and_a_stream_from_a_server_without_ranges_are_not_published_over_it(tmp_path, monkeypatch):
    codec.write(str(tmp_path / "m.aero"), {"w": np.arange(5000, dtype=np.float32)})
    (tmp_path / "out").mkdir()
    _appears(monkeypatch, LocalStore, "move", "copy.aero", _write(b"mine"))
    with pytest.raises(E.UsageError, match=r"copy\.aero \(a file of 4 bytes, not [\d,]+\) was put there"):
        codec.mirror(str(tmp_path / "m.aero"), str(tmp_path / "out" / "copy.aero"))
    assert _files(tmp_path / "out") == ["copy.aero"] and (tmp_path / "out" / "copy.aero").read_bytes() == b"mine"
    monkeypatch.undo()
    _appears(monkeypatch, LocalStore, "move", "m.aero", _write(b"mine too"))
    with PlainHttp(tmp_path) as srv:
        with pytest.raises(E.UsageError, match=r"m\.aero \(a file with other bytes\) was put there .*nothing was "
                                               r"published"):
            codec.mirror(f"{srv.url}/m.aero", str(tmp_path / "out") + "/")
    assert _files(tmp_path / "out") == ["copy.aero", "m.aero"]
    assert (tmp_path / "out" / "m.aero").read_bytes() == b"mine too"
    assert _files(tmp_path) == ["m.aero", "out"]


def test_the_cli_says_it_in_one_line_naming_the_file_and_overwrite(tmp_path, monkeypatch, capsys):
    from codec.tools.cli import main
    src = _set(tmp_path / "src")
    _appears(monkeypatch, LocalStore, "move", "part-003.aero", _write(b"mine"))
    assert main(["mirror", str(src), str(tmp_path / "dst")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "part-003.aero (a file of 4 bytes" in err[0] and "--overwrite" in err[0]
    assert "overwrite=True" not in err[0] and (tmp_path / "dst" / "part-003.aero").read_bytes() == b"mine"


def test_rename_new_never_replaces_whatever_way_the_filesystem_allows(tmp_path, monkeypatch):
    def fresh(n):
        (tmp_path / f"tmp{n}").write_bytes(b"new %d" % n)
        return str(tmp_path / f"tmp{n}")
    (tmp_path / "taken").write_bytes(b"old")
    ways = [None, lambda a, b, flag: False]  # renameat2; a hard link where it cannot
    for n, way in enumerate(ways):
        if way:
            monkeypatch.setattr(atomic, "_renameat2", way)
        assert atomic.rename_new(fresh(n), str(tmp_path / "taken")) is False
        assert (tmp_path / "taken").read_bytes() == b"old" and (tmp_path / f"tmp{n}").read_bytes() == b"new %d" % n
        assert atomic.rename_new(str(tmp_path / f"tmp{n}"), str(tmp_path / f"free{n}")) is True
        assert (tmp_path / f"free{n}").read_bytes() == b"new %d" % n and not (tmp_path / f"tmp{n}").exists()

    def no_link(*a, **k):
        raise OSError(errno.EPERM, "no hard links here")
    monkeypatch.setattr(os, "link", no_link)  # neither: a look, then a rename
    assert atomic.rename_new(fresh(5), str(tmp_path / "taken")) is False
    assert atomic.rename_new(str(tmp_path / "tmp5"), str(tmp_path / "free5")) is True
    assert (tmp_path / "taken").read_bytes() == b"old" and (tmp_path / "free5").read_bytes() == b"new 5"
    with atomic.atomic_write(str(tmp_path / "free6"), replace=False) as f:
        f.write(b"six")
    with pytest.raises(FileExistsError):
        with atomic.atomic_write(str(tmp_path / "taken"), replace=False) as f:
            f.write(b"seven")
    assert (tmp_path / "taken").read_bytes() == b"old" and (tmp_path / "free6").read_bytes() == b"six"
    assert sorted(os.listdir(tmp_path)) == ["free0", "free1", "free5", "free6", "taken"]


# --------------------------------------------------------------------------- object storage
def _put_object(fs, data):
    return lambda url: fs.pipe_file(url.split("://", 1)[1], data)


def _pending(fs, bucket):
    return fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", [])


def test_on_s3_an_object_put_there_meanwhile_is_never_replaced(s3, bucket, tmp_path, monkeypatch):
    so, fs = s3.storage_options, s3.fs()
    src = _set(tmp_path / "src")
    made = _appears(monkeypatch, FsspecStore, "move", "part-002.aero", _put_object(fs, b"the user's own part-002"))
    with pytest.raises(E.UsageError, match=r"part-002\.aero \(a file of 23 bytes.*\) was put there .*overwrite=True"):
        codec.mirror(str(src), f"s3://{bucket}/zoo", storage_options=so)
    assert made
    fs.invalidate_cache()
    assert fs.cat_file(f"{bucket}/zoo/part-002.aero") == b"the user's own part-002"
    left = [p.split("/", 1)[1] for p in fs.find(bucket)]
    assert all(p.startswith("zoo/") for p in left) and f"zoo/{INDEX}" not in left  # (nothing staged left)
    assert all(fs.cat_file(f"{bucket}/{p}") == (src / p[4:]).read_bytes() for p in left if p != "zoo/part-002.aero")
    assert _pending(fs, bucket) == []
    monkeypatch.undo()
    _appears(monkeypatch, FsspecStore, "move", "part-001.aero", _put_object(fs, (src / "part-001.aero").read_bytes()))
    out = codec.mirror(str(src), f"s3://{bucket}/kept", storage_options=so)  # the source's bytes: kept
    assert "part-001.aero" in out.skipped and "part-001.aero" not in out.copied
    fs.invalidate_cache()
    assert all(fs.cat_file(f"{bucket}/kept/{n}") == (src / n).read_bytes() for n in _files(src))
    assert not any(".modelcodec-mirror" in p for p in fs.find(bucket))


def test_on_s3_a_file_streamed_from_a_server_without_ranges_is_put_only_if_nothing_is_there(s3, bucket, tmp_path,
                                                                                             monkeypatch):
    so, fs = s3.storage_options, s3.fs()
    codec.write(str(tmp_path / "m.aero"), {"w": np.arange(5000, dtype=np.float32)})
    _appears(monkeypatch, FsspecStore, "put", "m.aero", _put_object(fs, b"mine"))
    with PlainHttp(tmp_path) as srv:
        with pytest.raises(E.UsageError, match=r"m\.aero \(a file with other bytes\) was put there"):
            codec.mirror(f"{srv.url}/m.aero", f"s3://{bucket}/files/", storage_options=so)
        fs.invalidate_cache()
        assert fs.find(bucket) == [f"{bucket}/files/m.aero"] and fs.cat_file(f"{bucket}/files/m.aero") == b"mine"
        monkeypatch.undo()
        _appears(monkeypatch, FsspecStore, "put", "n.aero", _put_object(fs, (tmp_path / "m.aero").read_bytes()))
        out = codec.mirror(f"{srv.url}/m.aero", f"s3://{bucket}/files/n.aero", storage_options=so)
    assert out.skipped == ["n.aero"] and out.copied == [] and _pending(fs, bucket) == []


def test_on_s3_a_copy_in_several_parts_is_completed_only_if_nothing_has_the_name(s3, bucket, monkeypatch):
    """(A staged object is published by a multipart copy completed with If-None-Match: *; here in
    parts of 8 MiB rather than 5 GiB.)"""
    from codec.io import store_fsspec
    from codec.io.open_store import store_for
    fs = s3.fs()
    monkeypatch.setattr(store_fsspec, "COPY_PART", 8 * 1024 * 1024)
    data = np.random.default_rng(0).integers(0, 256, 20 * 1024 * 1024, dtype=np.uint8).tobytes()
    fs.pipe_file(f"{bucket}/taken", b"mine")
    with store_for(f"s3://{bucket}/x", storage_options=s3.storage_options) as st:
        for n in ("a", "b"):
            st.put(f"s3://{bucket}/stage/{n}", [data])
        assert st.move(f"s3://{bucket}/stage/a", f"s3://{bucket}/taken", replace=False) is False
        assert st.move(f"s3://{bucket}/stage/b", f"s3://{bucket}/new", replace=False) is True
        assert st.put(f"s3://{bucket}/taken", [data], replace=False) is False
    fs.invalidate_cache()
    assert fs.cat_file(f"{bucket}/taken") == b"mine" and fs.cat_file(f"{bucket}/new") == data
    assert fs.info(f"{bucket}/new")["ETag"].strip('"').endswith("-3")  # (copied in 3 parts)
    assert sorted(fs.find(bucket)) == [f"{bucket}/new", f"{bucket}/stage/a", f"{bucket}/taken"]
    assert _pending(fs, bucket) == []
