"""`update_set` (issue 33 §3): tensors of a set replaced by rewriting only the parts that hold
them and the index -- every other part keeps its bytes and inode (locally) or its object (on
moto's S3 server); concurrent readers see the old set or the new one, never a mix."""
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.aeroset import write_aeroset


pytestmark = pytest.mark.timeout(120)


def _model(k=0):
    return {f"t.{i}": np.full(4096, i + 100 * k, np.float32) for i in range(12)}


def _set(d, k=0):
    write_aeroset(d, _model(k), model_name="m", max_shard_bytes=4096 * 4 + 64, max_part_shards=2)
    return d


def _part_of(d, name):
    with codec.open(str(d)) as s:
        return os.path.basename(s.tensors[name].extra["part"])


def test_only_the_parts_holding_the_tensors_are_rewritten_the_others_keep_bytes_and_inode(tmp_path):
    d = _set(tmp_path / "set")
    before = {n: ((d / n).read_bytes(), os.stat(d / n).st_ino) for n in os.listdir(d)}
    touched = {_part_of(d, "t.5"), _part_of(d, "t.11")}
    new5 = np.arange(10, dtype=np.int64).reshape(2, 5)  # a new dtype and shape
    new11 = np.full(3, 7, np.float16)
    out = codec.update_set(str(d), {"t.5": new5, "t.11": new11})
    assert os.path.samefile(out, d / "model.aeroset.json")
    after = {n: ((d / n).read_bytes(), os.stat(d / n).st_ino) for n in os.listdir(d)}
    assert sorted(after) == sorted(before)
    for n in before:
        if n in touched or n in ("index.aero", "model.aeroset.json"):
            assert after[n][0] != before[n][0], n
        else:
            assert after[n] == before[n], n  # bytes and inode
    assert len(touched) == 2 and len(before) == 8
    got = codec.load(str(d))
    assert got["t.5"].dtype == np.int64 and got["t.5"].tolist() == new5.tolist()
    assert got["t.11"].dtype == np.float16 and got["t.11"].tolist() == new11.tolist()
    want = _model()
    assert all(got[n].tobytes() == want[n].tobytes() for n in want if n not in ("t.5", "t.11"))
    assert codec.validate(str(d), full=True).ok
    assert os.listdir(tmp_path) == ["set"]  # (no temporary left beside it)
    with codec.open(str(d)) as s:
        assert s.metadata["model_name"] == "m"


def test_an_unknown_name_or_a_single_file_is_refused_and_nothing_changes(tmp_path):
    d = _set(tmp_path / "set")
    before = {n: (d / n).read_bytes() for n in os.listdir(d)}
    with pytest.raises(E.UsageError, match="no tensor 'nope'"):
        codec.update_set(str(d), {"t.1": np.ones(2, np.float32), "nope": np.ones(2, np.float32)})
    with pytest.raises(E.UsageError, match="mapping"):
        codec.update_set(str(d), {})
    with pytest.raises(E.UsageError, match="no dtype"):
        codec.update_set(str(d), {"t.1": np.array(["x"])})
    with pytest.raises(E.UsageError, match="storage_options"):
        codec.update_set(str(d), {"t.1": np.ones(2, np.float32)}, storage_options={})
    with pytest.raises(E.UsageError, match="cannot be written"):
        codec.update_set("https://example.invalid/s/model.aeroset.json", {"t.1": np.ones(2, np.float32)})
    assert {n: (d / n).read_bytes() for n in os.listdir(d)} == before
    assert os.listdir(tmp_path) == ["set"]
    codec.write(str(tmp_path / "one.aero"), {"a": np.ones(2, np.float32)})
    with pytest.raises(E.UsageError, match="in place"):
        codec.update_set(str(tmp_path / "one.aero"), {"a": np.zeros(2, np.float32)})


def test_the_cli_takes_the_tensors_from_any_readable_file(tmp_path):
    d = _set(tmp_path / "set")
    codec.save({"t.3": np.full(5, -1, np.float32)}, str(tmp_path / "new.safetensors"))
    out = subprocess.run([sys.executable, "-m", "codec", "update-set", str(d), str(tmp_path / "new.safetensors")],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    assert f"updated {d / 'model.aeroset.json'}: 1 tensor from " in out.stdout, out.stdout
    assert codec.load(str(d))["t.3"].tolist() == [-1.0] * 5


# --------------------------------------------------------------------------- concurrent readers
def _updater(d, go, stop, count):
    go.wait()
    k = 1
    while not stop.is_set():
        codec.update_set(d, {"t.0": np.full(4096, k, np.float32), "t.11": np.full(4096, k, np.float32)})
        k = k % 5 + 1
        with count.get_lock():
            count.value += 1


def test_concurrent_readers_see_the_old_set_or_the_new_one_never_a_mix(tmp_path):
    d = str(_set(tmp_path / "set"))
    codec.update_set(d, {"t.0": np.full(4096, 0, np.float32), "t.11": np.full(4096, 0, np.float32)})
    ctx = multiprocessing.get_context("spawn")
    go, stop, count = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    p = ctx.Process(target=_updater, args=(d, go, stop, count))
    p.start()
    reads = failures = 0
    try:
        go.set()
        deadline = time.monotonic() + 60
        while (reads < 40 or count.value < 20) and time.monotonic() < deadline:
            try:
                with codec.open(d) as s:
                    got = s.read_tensors(["t.0", "t.11", "t.4"])
            except E.ModelcodecError:
                failures += 1
                continue
            a, b = np.unique(got["t.0"]), np.unique(got["t.11"])
            assert len(a) == 1 and a.tolist() == b.tolist(), (a, b)  # one version of both parts
            assert (got["t.4"] == 4).all()
            reads += 1
    finally:
        stop.set()
        p.join(30)
    assert p.exitcode == 0
    assert reads >= 40 and count.value >= 20, (reads, count.value)
    assert failures <= reads // 100 + 1
    assert sorted(os.listdir(tmp_path)) == ["set"]


# --------------------------------------------------------------------------- object storage
def test_an_update_on_s3_rewrites_only_the_parts_that_hold_the_tensors(s3, bucket, tmp_path):
    fs = s3.fs()
    d = _set(tmp_path / "set")
    for n in os.listdir(d):
        fs.put_file(str(d / n), f"{bucket}/zoo/{n}")
    touched = _part_of(d, "t.7")
    etags = {p.rsplit("/", 1)[1]: fs.info(p)["ETag"] for p in fs.find(f"{bucket}/zoo")}
    mark = s3.mark()
    out = codec.update_set(f"s3://{bucket}/zoo/", {"t.7": np.arange(6, dtype=np.int32)},
                           storage_options=s3.storage_options)
    assert out == f"s3://{bucket}/zoo/model.aeroset.json"
    written = [p.split("?")[0].rsplit("/", 1)[1] for m, p, _ in s3.since(mark) if m in ("PUT", "POST")]
    assert written[-1] == "model.aeroset.json", written
    assert not {n for n in written} & (set(etags) - {"model.aeroset.json"})  # no old object rewritten
    fs.invalidate_cache()
    now = {p.rsplit("/", 1)[1]: fs.info(p)["ETag"] for p in fs.find(f"{bucket}/zoo")}
    for n, tag in etags.items():
        if n in (touched, "index.aero"):
            assert n not in now  # (replaced by objects of new names, then removed)
        elif n != "model.aeroset.json":
            assert now[n] == tag, n
    assert len(now) == len(etags)
    got = codec.load(out, storage_options=s3.storage_options, cache=False)
    assert got["t.7"].tolist() == list(range(6)) and got["t.7"].dtype == np.int32
    assert all(got[n].tobytes() == a.tobytes() for n, a in _model().items() if n != "t.7")
    assert codec.validate(out, full=True, storage_options=s3.storage_options, cache=False).ok
    again = codec.update_set(out, {"t.7": np.zeros(2, np.float32)}, storage_options=s3.storage_options)
    assert codec.load(again, storage_options=s3.storage_options, cache=False)["t.7"].tolist() == [0.0, 0.0]
    fs.invalidate_cache()
    assert len(fs.find(f"{bucket}/zoo")) == len(etags)


def test_readers_of_a_set_on_s3_see_the_old_set_or_the_new_one_while_it_is_updated(s3, bucket, tmp_path):
    import threading
    fs = s3.fs()
    d = _set(tmp_path / "set")
    for n in os.listdir(d):
        fs.put_file(str(d / n), f"{bucket}/zoo/{n}")
    url = f"s3://{bucket}/zoo/model.aeroset.json"
    so = s3.storage_options
    stop, seen, errors, mixed = threading.Event(), [], [], []

    def reader():
        while not stop.is_set():
            try:
                with codec.open(url, storage_options=so, cache=False) as s:
                    got = s.read_tensors(["t.0", "t.11"])
            except E.ModelcodecError as e:  # (a part the old index names, deleted meanwhile)
                errors.append(e)
                continue
            a, b = np.unique(got["t.0"]).tolist(), np.unique(got["t.11"]).tolist()
            if not (len(a) == 1 and (a == [0] and b == [11] or a == b)):  # t.0 and t.11 of one version
                mixed.append((a, b))
            seen.append(a[0])
    t = threading.Thread(target=reader)
    t.start()
    try:
        for k in range(1, 9):
            codec.update_set(url, {"t.0": np.full(4096, 1000 + k, np.float32),
                                   "t.11": np.full(4096, 1000 + k, np.float32)}, storage_options=so)
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive() and seen and not mixed, mixed[:3]
    assert len(set(seen)) > 1  # (the reader saw the set change)
    assert all(isinstance(e, (E.RemoteError, E.IntegrityError, E.StructureError)) for e in errors), errors[:3]
    got = codec.load(url, storage_options=so, cache=False)
    assert (got["t.0"] == 1008).all() and (got["t.11"] == 1008).all()


def test_a_packed_tensor_beside_the_replaced_one_stays_packed(tmp_path):
    q = codec.Packed(np.arange(36, dtype=np.uint8), (64,), {"ggml_type": 2})
    write_aeroset(tmp_path / "s", {"a": np.ones(4096, np.float32), "q": q}, max_part_shards=1)  # one part
    codec.update_set(str(tmp_path / "s"), {"a": np.zeros(3, np.float32)})
    with codec.open(str(tmp_path / "s")) as r:
        t = r.tensors["q"]
        assert t.common_dtype == "packed" and t.shape == (64,) and t.quant_params == {"ggml_type": 2}
        assert r.tensor("q").tolist() == list(range(36)) and r.tensor("a").tolist() == [0, 0, 0]
    assert codec.validate(str(tmp_path / "s"), full=True).ok


def test_a_path_of_the_wrong_type_or_swapped_arguments_are_named(tmp_path):
    d = _set(tmp_path / "set")
    with pytest.raises(E.UsageError, match=r"update_set\(path, tensors\): the path must be text or a path, not NoneType"):
        codec.update_set(None, {"t.1": np.ones(2, np.float32)})
    with pytest.raises(E.UsageError, match="arguments are swapped"):
        codec.update_set({"t.1": np.ones(2, np.float32)}, str(d))
