"""`mirror` (issue 33 §2): a file or a whole set copied between local folders, HTTP (nginx, as a
source) and object storage (moto's S3 server) -- every file checked against its index before
it is published, the index last; a tampered source publishes nothing; a mirror killed with
SIGKILL and run again transfers only what is missing (measured in the servers' logs)."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import codec
from codec import errors as E

from .servers import Nginx, PlainHttp

pytestmark = pytest.mark.timeout(300)
MiB = 1024 * 1024


def _model(n=12, size=4096):
    return {f"t.{i}": np.full(size, i, np.float32) + np.arange(size, dtype=np.float32) for i in range(n)}


def _set(d, n=12, size=4096, shard=None, per_part=2):
    from codec.formats.aeroset import write_aeroset
    write_aeroset(d, _model(n, size), max_shard_bytes=shard or size * 4 + 64, max_part_shards=per_part)
    return d


def _same(dst, n=12, size=4096, **opts):
    got = codec.load(str(dst), cache=False, **opts) if "://" in str(dst) else codec.load(str(dst))
    want = _model(n, size)
    assert sorted(got) == sorted(want) and all(got[k].tobytes() == want[k].tobytes() for k in want)


def _files(d):
    return sorted(n for n in os.listdir(d))


def _sizes(d):
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))


def _served_bytes(ngx, mark):
    return sum(e["bytes"] for e in ngx.since(mark) if e["status"] in (200, 206))


# --------------------------------------------------------------------------- local and HTTP
def test_a_set_mirrored_between_local_folders_and_again_transfers_nothing(tmp_path):
    src = _set(tmp_path / "src")
    out = codec.mirror(str(src), str(tmp_path / "dst"))
    assert out == str(tmp_path / "dst" / "model.aeroset.json")
    assert _files(tmp_path / "dst") == _files(src)
    assert all((tmp_path / "dst" / n).read_bytes() == (src / n).read_bytes() for n in _files(src))
    assert out.pulled == _sizes(src) and len(out.copied) == len(_files(src))
    assert codec.validate(str(tmp_path / "dst"), full=True).ok
    assert _files(tmp_path) == ["dst", "src"]  # (no staging folder left)
    again = codec.mirror(str(src), str(tmp_path / "dst"))
    assert again.pulled == 0 and sorted(again.skipped) == _files(src)


def test_a_set_over_http_to_a_local_folder_and_a_single_file(tmp_path):
    src = _set(tmp_path / "src")
    with Nginx(tmp_path) as ngx:
        out = codec.mirror(f"{ngx.url}/src/model.aeroset.json", str(tmp_path / "copy"), jobs=3)
        assert out.endswith("copy/model.aeroset.json")
        _same(tmp_path / "copy")
        one = codec.mirror(f"{ngx.url}/src/part-001.aero", str(tmp_path / "files") + "/")
        assert one == str(tmp_path / "files" / "part-001.aero")
        assert (tmp_path / "files" / "part-001.aero").read_bytes() == (src / "part-001.aero").read_bytes()
        with pytest.raises(E.UsageError, match="not a destination"):
            codec.mirror(str(src), f"{ngx.url}/elsewhere/")


def test_jobs_must_be_a_positive_number(tmp_path):
    src = _set(tmp_path / "src")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(E.UsageError, match="jobs"):
            codec.mirror(str(src), str(tmp_path / "dst"), jobs=bad)
    with pytest.raises(E.UsageError, match="storage_options"):
        codec.mirror(str(src), str(tmp_path / "dst"), storage_options={"anon": True})
    with pytest.raises(E.UsageError, match="storage_options"):
        codec.mirror(str(src), str(tmp_path / "dst"), dst_storage_options={"anon": True})
    assert not (tmp_path / "dst").exists()


def _tamper(path, at=100):
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def test_a_tampered_source_part_publishes_nothing_and_the_cli_says_which_in_one_line(tmp_path):
    src = _set(tmp_path / "src")
    _tamper(src / "part-003.aero", 200)
    with pytest.raises(E.IntegrityError, match="part-003.aero"):
        codec.mirror(str(src), str(tmp_path / "dst"))
    assert not (tmp_path / "dst").exists()
    out = subprocess.run([sys.executable, "-m", "codec", "mirror", str(src), str(tmp_path / "dst2")],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "part-003.aero" in lines[0], out.stderr
    assert not (tmp_path / "dst2").exists()


def test_the_cli_mirrors_a_set(tmp_path):
    src = _set(tmp_path / "src")
    out = subprocess.run([sys.executable, "-m", "codec", "mirror", str(src), str(tmp_path / "dst"), "--jobs", "2"],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    assert "model.aeroset.json" in out.stdout and f"{len(_files(src))} file(s) copied" in out.stdout
    _same(tmp_path / "dst")


# --------------------------------------------------------------------------- object storage
def test_a_set_mirrored_to_s3_publishes_its_index_last_and_back(s3, bucket, tmp_path):
    src = _set(tmp_path / "src")
    mark = s3.mark()
    out = codec.mirror(str(src), f"s3://{bucket}/zoo/set", storage_options=s3.storage_options)
    assert out == f"s3://{bucket}/zoo/set/model.aeroset.json"
    final = [p.split("?")[0].rsplit("/", 1)[1] for m, p, _ in s3.since(mark)
             if m == "PUT" and p.split("?")[0].startswith(f"/{bucket}/zoo/set/")]
    assert final[-1] == "model.aeroset.json" and sorted(final) == _files(src), final
    assert sorted(p.rsplit("/", 1)[1] for p in s3.fs().find(bucket)) == _files(src)  # (nothing staged is left)
    _same(out, storage_options=s3.storage_options)
    back = codec.mirror(f"s3://{bucket}/zoo/set/", str(tmp_path / "back"), storage_options=s3.storage_options)
    assert back.pulled == _sizes(src)
    assert all((tmp_path / "back" / n).read_bytes() == (src / n).read_bytes() for n in _files(src))
    again = codec.mirror(str(src), f"s3://{bucket}/zoo/set", storage_options=s3.storage_options)
    assert again.pulled == 0 and sorted(again.skipped) == _files(src)


def test_http_to_s3_a_set_and_a_single_file(s3, bucket, tmp_path):
    _set(tmp_path / "src")
    codec.write(str(tmp_path / "one.aero"), _model(3, 300000))
    with Nginx(tmp_path) as ngx:
        out = codec.mirror(f"{ngx.url}/src/model.aeroset.json", f"s3://{bucket}/h/", storage_options=s3.storage_options)
        _same(out, storage_options=s3.storage_options)
        one = codec.mirror(f"{ngx.url}/one.aero", f"s3://{bucket}/files/one.aero", jobs=2,
                           storage_options=s3.storage_options)
    assert one == f"s3://{bucket}/files/one.aero"
    with Nginx(tmp_path) as ngx:
        root = codec.mirror(f"{ngx.url}/one.aero", f"s3://{bucket}", storage_options=s3.storage_options)
    assert root == f"s3://{bucket}/one.aero"  # (a bucket names the folder a file goes to)
    assert s3.fs().cat_file(f"{bucket}/files/one.aero") == (tmp_path / "one.aero").read_bytes()


def test_a_tampered_part_on_s3_publishes_nothing_at_the_destination(s3, bucket, tmp_path):
    src = _set(tmp_path / "src")
    for n in _files(src):
        s3.fs().put_file(str(src / n), f"{bucket}/src/{n}")
    raw = bytearray((src / "part-002.aero").read_bytes())
    raw[300] ^= 0x04
    s3.fs().pipe_file(f"{bucket}/src/part-002.aero", bytes(raw))
    with pytest.raises(E.IntegrityError, match="part-002.aero"):
        codec.mirror(f"s3://{bucket}/src/model.aeroset.json", f"s3://{bucket}/dst",
                     storage_options=s3.storage_options)
    assert s3.fs().find(f"{bucket}/dst") == []
    assert not s3.fs().exists(f"{bucket}/.dst.modelcodec-mirror/part-002.aero")  # (never staged)
    with pytest.raises(E.IntegrityError, match="part-002.aero"):
        codec.mirror(f"s3://{bucket}/src/", str(tmp_path / "dst"), storage_options=s3.storage_options)
    assert not (tmp_path / "dst").exists()


# --------------------------------------------------------------------------- killed and resumed
_SLOW = """
import sys, time
import codec
from codec.io import store
fetch = store.HttpStore.fetch
def slow(self, wanted, **kw):  # (the test has time to kill it part-way)
    time.sleep(0.15)
    return fetch(self, wanted, **kw)
store.HttpStore.fetch = slow
codec.mirror(sys.argv[1], sys.argv[2], jobs=1)
"""


def _big_set(d):
    """5 parts of about 12 MiB (three 4 MiB tensors each): a part is read in two pieces."""
    return _set(d, n=15, size=MiB, shard=4 * MiB + 4096, per_part=3)


def _killed(args, env, ready, timeout=60):
    """Run the slowed mirror and SIGKILL it once ``ready()``."""
    p = subprocess.Popen([sys.executable, "-c", _SLOW, *args], env=dict(os.environ, **env,
                         PYTHONPATH=os.pathsep.join(sys.path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


def test_a_mirror_killed_part_way_resumes_with_only_the_missing_bytes_local(tmp_path):
    src = _big_set(tmp_path / "src")
    stage = tmp_path / ".dst.modelcodec-mirror"

    def ready():  # two parts staged and a third half there
        names = os.listdir(stage) if stage.exists() else []
        done = [n for n in names if not n.endswith(".partial")]
        half = [n for n in names if n.endswith(".partial") and os.path.getsize(stage / n) > 0]
        return len(done) >= 2 and half
    with Nginx(tmp_path) as ngx:
        url = f"{ngx.url}/src/model.aeroset.json"
        _killed([url, str(tmp_path / "dst")], {}, ready)
        assert not (tmp_path / "dst").exists()  # (nothing published yet)
        have = _sizes(stage)
        assert any(n.endswith(".partial") for n in os.listdir(stage))
        missing = _sizes(src) - have
        mark = ngx.mark()
        out = codec.mirror(url, str(tmp_path / "dst"))
        pulled = _served_bytes(ngx, mark)
    assert 0 < missing < _sizes(src)
    assert out.pulled == missing, (out.pulled, missing)
    assert pulled <= missing * 1.1, (pulled, missing)
    _same(tmp_path / "dst", n=15, size=MiB)
    assert not stage.exists()


def test_a_resumed_part_that_does_not_check_out_restarts_alone(tmp_path):
    src = _big_set(tmp_path / "src")
    stage = tmp_path / ".dst.modelcodec-mirror"
    stage.mkdir()
    (stage / "part-001.aero.partial").write_bytes(b"\x00" * 1000)  # not a prefix of part-001.aero
    out = codec.mirror(str(src), str(tmp_path / "dst"))
    assert out.pulled == _sizes(src) - 1000 + os.path.getsize(src / "part-001.aero")
    _same(tmp_path / "dst", n=15, size=MiB)


def test_a_mirror_to_s3_killed_part_way_resumes_with_only_the_missing_bytes(s3, bucket, tmp_path):
    src = _big_set(tmp_path / "src")
    fs = s3.fs()
    stage = f"{bucket}/.dst.modelcodec-mirror"

    def ready():
        fs.invalidate_cache()
        return len(fs.find(stage)) >= 2
    with Nginx(tmp_path) as ngx:
        url = f"{ngx.url}/src/model.aeroset.json"
        _killed([url, f"s3://{bucket}/dst"], s3.env, ready)
        fs.invalidate_cache()
        assert fs.find(f"{bucket}/dst") == []
        have = sum(fs.size(p) for p in fs.find(stage))
        missing = _sizes(src) - have
        mark = ngx.mark()
        out = codec.mirror(url, f"s3://{bucket}/dst", storage_options=s3.storage_options)
        pulled = _served_bytes(ngx, mark)
    assert 0 < missing < _sizes(src)
    assert pulled <= missing * 1.1, (pulled, missing)
    assert out.pulled <= missing
    _same(out, n=15, size=MiB, storage_options=s3.storage_options)


def test_a_sharded_checkpoint_and_a_split_gguf_are_mirrored_whole(s3, bucket, tmp_path, capsys):
    t = {f"t.{i}": np.full(4096, i, np.float32) for i in range(6)}
    codec.write(str(tmp_path / "sh" / "model.safetensors.index.json"), t, max_shard_size=40000)
    out = codec.mirror(str(tmp_path / "sh"), f"s3://{bucket}/sh", storage_options=s3.storage_options)
    assert "gives no sha256 for 4 file(s)" in capsys.readouterr().err  # (said: nothing to check them against)
    assert out == f"s3://{bucket}/sh/model.safetensors.index.json"
    names = sorted(p.rsplit("/", 1)[1] for p in s3.fs().find(f"{bucket}/sh"))
    assert names == sorted(os.listdir(tmp_path / "sh")) and len(names) == 4
    back = codec.mirror(f"s3://{bucket}/sh/model-00002-of-00003.safetensors", str(tmp_path / "one") + "/",
                        storage_options=s3.storage_options)
    assert open(back, "rb").read() == (tmp_path / "sh" / "model-00002-of-00003.safetensors").read_bytes()
    (tmp_path / "g").mkdir()
    codec.write(str(tmp_path / "g" / "m.gguf"), t, max_shard_size=40000)
    first = sorted(os.listdir(tmp_path / "g"))[0]
    codec.mirror(str(tmp_path / "g" / first), str(tmp_path / "g2"))
    assert sorted(os.listdir(tmp_path / "g2")) == sorted(os.listdir(tmp_path / "g"))
    assert len(os.listdir(tmp_path / "g")) > 1
    got = codec.load(str(tmp_path / "g2" / first))
    assert all(got[n].tobytes() == a.tobytes() for n, a in t.items())


def test_a_file_from_a_server_without_range_requests_is_downloaded_in_one_stream(s3, bucket, tmp_path):
    codec.write(str(tmp_path / "m.aero"), _model(3, 300000))
    with PlainHttp(tmp_path) as srv:
        out = codec.mirror(f"{srv.url}/m.aero", str(tmp_path / "copy.aero"))
        up = codec.mirror(f"{srv.url}/m.aero", f"s3://{bucket}/m.aero", storage_options=s3.storage_options)
    assert out.pulled == (tmp_path / "m.aero").stat().st_size
    assert (tmp_path / "copy.aero").read_bytes() == (tmp_path / "m.aero").read_bytes()
    assert s3.fs().cat_file(f"{bucket}/m.aero") == (tmp_path / "m.aero").read_bytes() and up == f"s3://{bucket}/m.aero"


def test_a_destination_that_cannot_be_written_is_named_as_given(tmp_path):
    """Not only the staging file beside it, which the user never named."""
    src = tmp_path / "m.aero"
    codec.save({"w": np.arange(4, dtype=np.float32)}, src)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".m.aero.modelcodec-mirror").write_bytes(b"x")  # (where it stages: not a folder)
    dst = tmp_path / "out" / "m.aero"
    with pytest.raises(codec.UsageError) as e:
        codec.mirror(str(src), str(dst))
    assert str(e.value).startswith(f"{dst}: cannot write: ") and not dst.exists()
