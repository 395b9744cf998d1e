"""Remote reads that cost what they should (issue 33 §1b): whole-file work on a remote single
file takes about size / 16 MiB requests, many tensors are read with few coalesced ranges; a
server without Range support (``python -m http.server``) still serves whole-file commands by
one streamed download, commands that need random access say why and what to do instead, and
``validate`` exits 4 for that server limitation."""
import math
import os

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io.remote import NoRangeError
from codec.tools.cli import EXIT_SERVER_LIMITATION, main

from .servers import Nginx, PlainHttp

pytestmark = pytest.mark.timeout(300)
MiB = 1024 * 1024


def _model():
    """~40 MiB in 300 tensors (many small ones, a few big ones)."""
    rng = np.random.default_rng(2)
    t = {f"blk.{i}.w": rng.integers(0, 255, (128, 256), dtype=np.uint8).view(np.float32) for i in range(296)}
    for i in range(4):
        t[f"emb.{i}"] = np.full((1024, 2304), i, np.float32)
    return t


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    d = tmp_path_factory.mktemp("costs")
    t = _model()
    codec.write(str(d / "m.aero"), t)
    codec.write(str(d / "m.safetensors"), t)
    return d


@pytest.fixture(scope="module")
def nginx(www):
    with Nginx(www) as n:
        yield n


def _sent(ngx, mark):
    return [e for e in ngx.since(mark) if e["method"] == "GET"]


@pytest.mark.parametrize("name", ["m.aero", "m.safetensors"])
def test_whole_file_work_costs_size_over_16_mib_requests(nginx, www, name, tmp_path):
    size = os.path.getsize(www / name)
    budget = math.ceil(size / (16 * MiB)) + 3
    url = f"{nginx.url}/{name}"
    mark = nginx.mark()
    got = codec.load(url)
    assert len(_sent(nginx, mark)) <= budget, _sent(nginx, mark)
    assert all(got[n].tobytes() == a.tobytes() for n, a in _model().items())
    mark = nginx.mark()
    codec.convert(url, str(tmp_path / "out.aero"))
    assert len(_sent(nginx, mark)) <= budget
    mark = nginx.mark()
    assert codec.validate(url, full=True).ok
    assert len(_sent(nginx, mark)) <= budget


def test_many_tensors_are_read_with_few_coalesced_ranges(nginx, www):
    size = os.path.getsize(www / "m.aero")
    with codec.open(f"{nginx.url}/m.aero") as r:
        mark = nginx.mark()
        got = r.read_tensors(list(r.tensors))
        sent = _sent(nginx, mark)
    assert len(sent) <= math.ceil(size / (16 * MiB)) + 3, len(sent)
    assert all(got[n].tobytes() == a.tobytes() for n, a in _model().items())


@pytest.fixture(scope="module")
def plain(www):
    with PlainHttp(www) as p:
        yield p


def test_a_server_without_range_support_serves_whole_file_commands(plain, www, tmp_path, capsys):
    url = f"{plain.url}/m.aero"
    t = _model()
    got = codec.load(url)
    assert all(got[n].tobytes() == a.tobytes() for n, a in t.items())
    err = capsys.readouterr().err
    assert err.count("does not support Range requests") == 1 and err.count("\n") == 1, err
    assert main(["validate", "--full", url]) == 0
    assert "downloaded whole" in capsys.readouterr().out
    assert main(["convert", f"{plain.url}/m.safetensors", str(tmp_path / "c.aero")]) == 0
    with codec.open(str(tmp_path / "c.aero")) as r:
        assert r.tensor("emb.3").tobytes() == t["emb.3"].tobytes()
    assert not [n for n in os.listdir(tmp_path) if n != "c.aero"]


def test_a_tampered_file_from_a_server_without_range_support_is_caught(plain, www):
    raw = bytearray((www / "m.aero").read_bytes())
    with codec.open(str(www / "m.aero")) as r:
        at = r.tensors["emb.2"].offset
    raw[at + 100] ^= 1
    (www / "bad.aero").write_bytes(bytes(raw))
    try:
        with pytest.raises(E.IntegrityError):
            codec.load(f"{plain.url}/bad.aero")
        rep = codec.validate(f"{plain.url}/bad.aero", full=True)
        assert not rep.ok and any(isinstance(v, E.IntegrityError) for v in rep.violations)
        assert main(["validate", "--full", f"{plain.url}/bad.aero"]) == 1
    finally:
        os.remove(www / "bad.aero")


def test_random_access_on_a_server_without_range_support_names_the_limit(plain, capsys):
    url = f"{plain.url}/m.aero"
    with pytest.raises(NoRangeError, match="mirror"):
        codec.open(url)
    assert main(["inspect", url]) == EXIT_SERVER_LIMITATION  # (the server's limitation in every command)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Range" in err and "mirror" in err
    assert main(["validate", url]) == EXIT_SERVER_LIMITATION == 4


def test_a_set_on_a_server_without_range_support_is_a_server_limitation(plain, www, tmp_path, capsys):
    from codec.formats.aeroset import write_aeroset
    write_aeroset(str(www / "set"), {f"t{i}": np.full(1000, i, np.float32) for i in range(8)},
                  max_shard_bytes=8000, max_part_shards=1)
    try:
        url = f"{plain.url}/set/model.aeroset.json"
        assert main(["validate", url]) == EXIT_SERVER_LIMITATION
        assert "does not support Range requests" in capsys.readouterr().out
    finally:
        import shutil
        shutil.rmtree(www / "set")
