"""A set (an AEROSET index and its parts) on a server without Range support (``python -m
http.server``, issue 33 §1b): whole-set commands (``validate --full``, ``load``, ``convert``,
``mirror``) download each file once in one stream, checked against the index's size and sha256
before anything of it is used, through temporary files removed after, saying so once;
commands that need random access name the limitation and suggest ``mirror``."""
import json
import os
import shutil
import tempfile

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io.remote import NoRangeError
from codec.tools.cli import EXIT_SERVER_LIMITATION, main

from .servers import PlainHttp

pytestmark = pytest.mark.timeout(300)
NOTE = "does not support Range requests"


def _model():
    return {f"t{i}": np.arange(3000, dtype=np.float32) * (i + 1) for i in range(10)}


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    from codec.formats.aeroset import write_aeroset
    d = tmp_path_factory.mktemp("norange")
    write_aeroset(str(d / "set"), _model(), max_shard_bytes=12100, max_part_shards=1)
    shutil.copytree(d / "set", d / "bad")
    with codec.open(str(d / "bad")) as r:
        t = r.tensors["t6"]
        part = os.path.basename(t.extra["part"])
    raw = bytearray((d / "bad" / part).read_bytes())
    raw[t.offset + 40] ^= 1
    (d / "bad" / part).write_bytes(bytes(raw))
    shutil.copytree(d / "bad", d / "nosha")  # (its index gives no sha256 for its parts)
    index = json.loads((d / "nosha" / "model.aeroset.json").read_text())
    for p in index["parts"]:
        del p["sha256"]
    (d / "nosha" / "model.aeroset.json").write_text(json.dumps(index))
    return d, part


@pytest.fixture(scope="module")
def plain(www):
    with PlainHttp(www[0]) as p:
        yield p


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """The temporary folder modelcodec uses (checked empty at the end of each test), and a
    private disk cache (nothing may be cached from these reads)."""
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    monkeypatch.setenv("MODELCODEC_CACHE_DIR", str(tmp_path / "cache"))
    return t


def _left(tmp, tmp_path):
    cache = tmp_path / "cache"
    return os.listdir(tmp) + (os.listdir(cache) if cache.exists() else [])


def test_whole_set_commands_download_each_file_once(plain, www, tmp, tmp_path, capsys):
    url = f"{plain.url}/set/model.aeroset.json"
    want = _model()
    rep = codec.validate(url, full=True)
    assert rep.ok, [str(v) for v in rep.violations]
    assert rep.source == url and rep.level == "full"
    assert any("Range" in n for n in rep.notes), rep.notes
    assert capsys.readouterr().err.count(NOTE) == 1
    got = codec.load(url)
    assert sorted(got) == sorted(want) and all(got[n].tobytes() == a.tobytes() for n, a in want.items())
    assert got.keys() == codec.load(str(www[0] / "set")).keys()
    err = capsys.readouterr().err
    assert err.count(NOTE) == 1 and err.count("\n") == 1, err
    assert main(["validate", "--full", url]) == 0
    out = capsys.readouterr()
    assert "check passed" in out.out and out.err.count(NOTE) == 1
    assert main(["convert", url, str(tmp_path / "c.safetensors")]) == 0
    codec.convert(url, str(tmp_path / "c.aero"))
    for name in ("c.safetensors", "c.aero"):
        back = codec.load(str(tmp_path / name))
        assert all(back[n].tobytes() == a.tobytes() for n, a in want.items())
    assert _left(tmp, tmp_path) == []


def test_a_set_is_mirrored_from_a_server_without_range_support(plain, www, tmp, tmp_path, capsys):
    url = f"{plain.url}/set/model.aeroset.json"
    assert main(["mirror", url, str(tmp_path / "dst")]) == 0
    err = capsys.readouterr().err
    assert err.count(NOTE) == 1 and err.count("\n") == 1, err
    src = www[0] / "set"
    assert sorted(os.listdir(tmp_path / "dst")) == sorted(os.listdir(src))
    assert all((tmp_path / "dst" / n).read_bytes() == (src / n).read_bytes() for n in os.listdir(src))
    assert codec.validate(str(tmp_path / "dst"), full=True).ok
    assert sorted(os.listdir(tmp_path)) == ["dst", "tmp"]  # (no staging folder left)
    assert _left(tmp, tmp_path) == []


def test_a_tampered_part_is_caught_and_nothing_of_it_is_used(plain, www, tmp, tmp_path, capsys):
    url = f"{plain.url}/bad/model.aeroset.json"
    part = www[1]
    with pytest.raises(E.IntegrityError, match=part):
        codec.load(url)
    rep = codec.validate(url, full=True)
    assert not rep.ok
    assert any(isinstance(v, E.IntegrityError) and part in str(v) for v in rep.violations), rep.violations
    assert main(["validate", "--full", url]) == 1
    assert part in capsys.readouterr().out
    assert main(["mirror", url, str(tmp_path / "dst")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert part in lines[-1] and len([x for x in lines if NOTE not in x]) == 1, lines
    assert not (tmp_path / "dst").exists()
    assert main(["convert", url, str(tmp_path / "c.aero")]) == 1
    assert not (tmp_path / "c.aero").exists()
    assert _left(tmp, tmp_path) == []


def test_random_access_to_a_set_names_the_limitation(plain, tmp, tmp_path, capsys):
    url = f"{plain.url}/set/model.aeroset.json"
    with pytest.raises(NoRangeError, match="mirror"):
        codec.open(url)
    assert main(["fetch-tensor", url, "t1", str(tmp_path / "t1.npy")]) == EXIT_SERVER_LIMITATION
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Range" in err and "mirror" in err, err
    assert not (tmp_path / "t1.npy").exists()
    assert main(["validate", url]) == EXIT_SERVER_LIMITATION == 4
    out = capsys.readouterr().out
    assert NOTE in out and "mirror" in out
    assert _left(tmp, tmp_path) == []


def test_findings_in_the_downloaded_copy_name_the_files_at_their_urls(plain, www, tmp, tmp_path, capsys):
    url = f"{plain.url}/nosha/model.aeroset.json"
    part = www[1]
    rep = codec.validate(url, full=True)
    bad = [v for v in rep.violations if isinstance(v, E.IntegrityError)]
    assert bad and all(v.source == f"{plain.url}/nosha/{part}" for v in bad), [str(v) for v in rep.violations]
    assert str(tmp) not in "".join(str(v) for v in rep.violations)
    with pytest.raises(E.IntegrityError) as caught:
        codec.load(url)
    assert caught.value.source == f"{plain.url}/nosha/{part}" and str(tmp) not in str(caught.value)
    assert "no sha256" in capsys.readouterr().err
    assert _left(tmp, tmp_path) == []


def test_a_set_is_mirrored_from_a_server_without_range_support_to_object_storage(plain, www, s3, bucket, tmp,
                                                                                   tmp_path, capsys):
    so = s3.storage_options
    out = codec.mirror(f"{plain.url}/set/model.aeroset.json", f"s3://{bucket}/m/", storage_options=so)
    assert out == f"s3://{bucket}/m/model.aeroset.json"
    src = www[0] / "set"
    assert sorted(p.rsplit("/", 1)[1] for p in s3.fs().find(f"{bucket}/m")) == sorted(os.listdir(src))
    assert all(s3.fs().cat_file(f"{bucket}/m/{n}") == (src / n).read_bytes() for n in os.listdir(src))
    with pytest.raises(E.IntegrityError, match=www[1]):
        codec.mirror(f"{plain.url}/bad/model.aeroset.json", f"s3://{bucket}/b/", storage_options=so)
    assert s3.fs().find(f"{bucket}/b") == []
    assert not s3.fs().exists(f"{bucket}/.b.modelcodec-mirror/{www[1]}")  # (never staged)
    assert capsys.readouterr().err.count(NOTE) == 2
    assert _left(tmp, tmp_path) == []


def test_a_part_longer_than_its_index_says_is_refused_as_it_arrives(plain, www, tmp, tmp_path):
    d = www[0] / "long"
    shutil.copytree(www[0] / "set", d)
    part = sorted(n for n in os.listdir(d) if n.startswith("part-"))[0]
    with open(d / part, "ab") as f:
        f.write(b"\0" * (8 << 20))
    try:
        with pytest.raises(E.IntegrityError, match=f"{part} at the source .* bytes, the index says"):
            codec.load(f"{plain.url}/long/model.aeroset.json")
        assert main(["mirror", f"{plain.url}/long/model.aeroset.json", str(tmp_path / "dst")]) == 1
        assert not (tmp_path / "dst").exists()
    finally:
        shutil.rmtree(d)
    assert _left(tmp, tmp_path) == []
