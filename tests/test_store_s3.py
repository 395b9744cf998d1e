"""Object storage (issue 33 §1): single files and sets on a real S3 API server (moto's
standalone server on 127.0.0.1, a subprocess, reached through s3fs with endpoint_url as a
user's bucket would be) -- lazy ranged reads within a byte bound, the chain of trust, atomic
writes; and fsspec's memory:// filesystem."""
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

import codec
from codec import errors as E


pytestmark = pytest.mark.timeout(300)
MiB = 1024 * 1024


def _small():
    rng = np.random.default_rng(7)
    t = {f"layer.{i}.w": rng.standard_normal((64, 96)).astype(np.float32) for i in range(5)}
    t["ids"] = np.arange(300, dtype=np.int64)
    return t


def _put(s3, local, url):
    s3.fs().put_file(str(local), url.removeprefix("s3://"))


@pytest.fixture(scope="module")
def big(s3, tmp_path_factory):
    """A 256 MiB AERO of 64 tensors of 4 MiB on the server."""
    d = tmp_path_factory.mktemp("big")
    t = {f"w{i}": np.full((1024, 1024), i, np.float32) for i in range(64)}
    codec.write(str(d / "m.aero"), t)
    fs = s3.fs()
    fs.mkdir("bigbucket")
    fs.put_file(str(d / "m.aero"), "bigbucket/m.aero")
    os.remove(d / "m.aero")
    return "s3://bigbucket/m.aero"


def test_one_tensor_of_a_256_mib_aero_on_s3_pulls_at_most_5_mib(s3, big):
    mark = s3.mark()
    with codec.open(big, storage_options=s3.storage_options) as r:
        assert r.size >= 256 * MiB and len(r.tensors) == 64
        a = r.tensor("w33")
        assert a.shape == (1024, 1024) and (a == 33).all()
        pulled = r.store.stats["bytes"]
    served = s3.since(mark)
    assert pulled <= 5 * MiB, pulled
    assert all(method in ("HEAD", "GET") for method, _, _ in served), served
    gets = [x for x in served if x[0] == "GET"]
    assert gets and all(status == 206 for _, _, status in gets), served  # ranged, never the whole object
    assert len(gets) == r.store.stats["range_requests"] <= 4, served


@pytest.mark.parametrize("name", ["m.aero", "m.safetensors"])
def test_a_file_on_s3_reads_exactly_as_locally(s3, bucket, tmp_path, name):
    t = _small()
    codec.write(str(tmp_path / name), t)
    _put(s3, tmp_path / name, f"s3://{bucket}/{name}")
    with codec.open(f"s3://{bucket}/{name}", storage_options=s3.storage_options) as r:
        assert list(r.tensors) == list(t)
        for n, a in t.items():
            assert r.tensor(n).tobytes() == a.tobytes()
    rep = codec.validate(f"s3://{bucket}/{name}", full=True, storage_options=s3.storage_options)
    assert rep.ok, rep.violations
    assert codec.load(f"s3://{bucket}/{name}", storage_options=s3.storage_options)["ids"].tolist() == t["ids"].tolist()


def test_a_tampered_object_is_an_integrity_error_never_its_bytes(s3, bucket, tmp_path):
    t = _small()
    p = tmp_path / "m.aero"
    codec.write(str(p), t)
    with codec.open(str(p)) as r:
        at = r.tensors["layer.3.w"].offset
    raw = bytearray(p.read_bytes())
    raw[at + 5] ^= 0x40
    s3.fs().pipe_file(f"{bucket}/m.aero", bytes(raw))
    url = f"s3://{bucket}/m.aero"
    with codec.open(url, storage_options=s3.storage_options) as r:
        assert r.tensor("layer.2.w").tobytes() == t["layer.2.w"].tobytes()  # the others are fine
        with pytest.raises(E.IntegrityError):
            r.tensor("layer.3.w")
    with pytest.raises(E.IntegrityError):
        codec.load(url, storage_options=s3.storage_options)
    assert not codec.validate(url, full=True, storage_options=s3.storage_options).ok
    s3.fs().pipe_file(f"{bucket}/m.aero", p.read_bytes())  # put right: nothing bad was kept
    with codec.open(url, storage_options=s3.storage_options) as r:
        assert r.tensor("layer.3.w").tobytes() == t["layer.3.w"].tobytes()


def test_a_missing_object_or_bucket_is_a_remote_error(s3, bucket):
    with pytest.raises(E.RemoteError, match="not found"):
        codec.open(f"s3://{bucket}/nothing.aero", storage_options=s3.storage_options)
    with pytest.raises(E.RemoteError, match="not found"):
        codec.open(f"s3://no-such-{bucket}/m.aero", storage_options=s3.storage_options)


def test_the_cli_reaches_s3_through_the_standard_environment(s3, bucket, tmp_path):
    codec.write(str(tmp_path / "m.aero"), _small())
    _put(s3, tmp_path / "m.aero", f"s3://{bucket}/m.aero")
    env = dict(os.environ, **s3.env, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "codec", "inspect", f"s3://{bucket}/m.aero"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "layer.4.w" in out.stdout
    out = subprocess.run([sys.executable, "-m", "codec", "validate", "--full", f"s3://{bucket}/m.aero"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run([sys.executable, "-m", "codec", "convert", f"s3://{bucket}/m.aero",
                          f"s3://{bucket}/out/m.safetensors"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert codec.load(f"s3://{bucket}/out/m.safetensors", storage_options=s3.storage_options)["ids"].tolist() == \
        _small()["ids"].tolist()
    _, url = _publish_set(s3, bucket, tmp_path)
    for cmd in (["inspect-set", url], ["fetch-tensor", url, "t.5", str(tmp_path / "t5.bin")], ["validate", url]):
        out = subprocess.run([sys.executable, "-m", "codec", *cmd], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, (cmd, out.stderr)
    assert (tmp_path / "t5.bin").read_bytes() == _set_model()["t.5"].tobytes()
    out = subprocess.run([sys.executable, "-m", "codec", "fetch-tensor", url, "t.6", f"s3://{bucket}/t6.bin"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert s3.fs().cat_file(f"{bucket}/t6.bin") == _set_model()["t.6"].tobytes()


def test_memory_filesystem_and_file_urls(tmp_path):
    import fsspec
    t = _small()
    codec.write(str(tmp_path / "m.aero"), t)
    fsspec.filesystem("memory").pipe_file("/zoo/m.aero", (tmp_path / "m.aero").read_bytes())
    with codec.open("memory://zoo/m.aero") as r:
        assert r.tensor("layer.1.w").tobytes() == t["layer.1.w"].tobytes()
    with codec.open("MEMORY://zoo/m.aero") as r:  # (a scheme is case-insensitive)
        assert r.tensor("ids").tolist() == t["ids"].tolist()
    with codec.open((tmp_path / "m.aero").as_uri()) as r:  # file:// is a local path
        assert r.tensor("ids").tolist() == t["ids"].tolist()
    fsspec.filesystem("memory").rm("/zoo", recursive=True)


def test_a_filesystem_not_installed_is_one_line_naming_the_extra():
    with pytest.raises(E.UsageError, match=r"pip install 'modelcodec\[gcs\]'") as e:
        codec.open("gs://bucket/m.aero")
    assert "\n" not in str(e.value)
    with pytest.raises(E.UsageError, match="storage_options"):
        codec.open("https://example.invalid/m.aero", storage_options={"anon": True})


# --------------------------------------------------------------------------- sets
def _set_model():
    rng = np.random.default_rng(11)
    return {f"t.{i}": rng.standard_normal(4096).astype(np.float32) for i in range(40)}


def _publish_set(s3, bucket, tmp_path):
    from codec.formats.aeroset import write_aeroset
    d = tmp_path / "set"
    write_aeroset(d, _set_model(), max_shard_bytes=64 * 1024, max_part_shards=2)
    fs = s3.fs()
    for f in sorted(os.listdir(d)):
        fs.put_file(str(d / f), f"{bucket}/zoo/{f}")
    return d, f"s3://{bucket}/zoo/model.aeroset.json"


def test_a_set_on_s3_reads_its_parts_relative_to_the_index(s3, bucket, tmp_path):
    d, url = _publish_set(s3, bucket, tmp_path)
    t = _set_model()
    assert len([f for f in os.listdir(d) if f.startswith("part-")]) > 2
    with codec.open(url, storage_options=s3.storage_options, cache=False) as s:
        assert s.remote and s.verified and s.format == "aeroset"
        got = s.read_tensors(list(t))
        assert all(got[n].tobytes() == a.tobytes() for n, a in t.items())
    rep = codec.validate(url, full=True, storage_options=s3.storage_options, cache=False)
    assert rep.ok, rep.violations
    assert set(codec.load(url, storage_options=s3.storage_options, cache=False)) == set(t)


def test_a_tampered_part_or_index_on_s3_is_an_integrity_error_and_never_cached(s3, bucket, tmp_path):
    from codec.io.cache import RangeCache
    d, url = _publish_set(s3, bucket, tmp_path)
    fs = s3.fs()
    cache = RangeCache(tmp_path / "cache")
    with codec.open(str(d)) as s:
        t = s.tensors["t.7"]
        part = os.path.basename(t.extra["part"])
    good = (d / part).read_bytes()
    bad = bytearray(good)
    bad[t.offset + 3] ^= 0x01
    fs.pipe_file(f"{bucket}/zoo/{part}", bytes(bad))
    with codec.open(url, storage_options=s3.storage_options, cache=cache) as s:
        with pytest.raises(E.IntegrityError):
            s.tensor("t.7")
        rep = s.validate(full=True)
        assert not rep.ok and any(isinstance(v, E.IntegrityError) for v in rep.violations)
    fs.pipe_file(f"{bucket}/zoo/{part}", good)  # put right: the cache kept nothing of the bad part
    with codec.open(url, storage_options=s3.storage_options, cache=cache) as s:
        assert s.tensor("t.7").tobytes() == _set_model()["t.7"].tobytes()
    idx = bytearray((d / "index.aero").read_bytes())
    idx[len(idx) // 2] ^= 0x01
    fs.pipe_file(f"{bucket}/zoo/index.aero", bytes(idx))
    cache.clear()  # (else the genuine index.aero, cached under its sha256, is what is read)
    with pytest.raises(E.IntegrityError):
        codec.open(url, storage_options=s3.storage_options, cache=cache)


# --------------------------------------------------------------------------- writes
def _pending_uploads(s3, bucket):
    import boto3
    c = boto3.client("s3", endpoint_url=s3.url, aws_access_key_id=s3.KEY, aws_secret_access_key=s3.SECRET,
                     region_name=s3.REGION)
    return c.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def test_write_save_and_convert_to_s3_read_back(s3, bucket, tmp_path):
    t = _small()
    so = s3.storage_options
    assert codec.write(f"s3://{bucket}/a/m.aero", t, storage_options=so) == f"s3://{bucket}/a/m.aero"
    codec.save(t, f"s3://{bucket}/a/m.safetensors", storage_options=so)
    codec.convert(f"s3://{bucket}/a/m.aero", f"s3://{bucket}/b/m.safetensors", storage_options=so,
                  set_metadata={"format": "pt"})  # (the metadata edits reach the staged conversion)
    for u in ("a/m.aero", "a/m.safetensors", "b/m.safetensors"):
        got = codec.load(f"s3://{bucket}/{u}", storage_options=so)
        assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in t.items()}, u
    with codec.open(f"s3://{bucket}/b/m.safetensors", storage_options=so) as r:
        assert r.metadata.get("format") == "pt"
    assert sorted(s3.fs().find(bucket)) == sorted(f"{bucket}/{u}" for u in ("a/m.aero", "a/m.safetensors",
                                                                             "b/m.safetensors"))
    assert not os.listdir(tmp_path)  # nothing staged here is left (the staging dir is a temp)


def test_a_set_written_to_s3_uploads_its_parts_before_its_index(s3, bucket):
    t = _set_model()
    mark = s3.mark()
    codec.write(f"s3://{bucket}/set/model.aeroset.json", t, storage_options=s3.storage_options,
                max_shard_bytes=64 * 1024, max_part_shards=2)
    puts = [p.split("?")[0].rsplit("/", 1)[-1] for m, p, st in s3.since(mark) if m in ("PUT", "POST")
            and "/set/" in p]
    assert puts[-1] == "model.aeroset.json" and puts.count("model.aeroset.json") == 1, puts
    assert {"index.aero", "part-000.aero"} <= set(puts)
    with codec.open(f"s3://{bucket}/set/model.aeroset.json", storage_options=s3.storage_options, cache=False) as s:
        assert s.tensor("t.39").tobytes() == t["t.39"].tobytes()


def test_a_refused_conversion_leaves_no_object(s3, bucket, tmp_path):
    t = {"w": np.ones(3, np.float32), "i": np.arange(4, dtype=np.int64)}
    codec.write(str(tmp_path / "m.aero"), t)
    with pytest.raises(E.UsageError, match="tensor 'i': MAG cannot hold it"):
        codec.convert(str(tmp_path / "m.aero"), f"s3://{bucket}/out.mag", drop_metadata=True,
                      dst_storage_options=s3.storage_options)
    assert s3.fs().find(bucket) == [] and _pending_uploads(s3, bucket) == []


def test_a_big_upload_is_multipart_and_a_failed_one_leaves_nothing_pending(s3, bucket, tmp_path):
    from codec.io.open_store import store_for
    store = store_for(f"s3://{bucket}/x", storage_options=s3.storage_options)
    piece = bytes(6 * MiB)

    def chunks(fail):
        for i in range(5):  # 30 MiB: two parts of 16 MiB are sent before the failure
            yield piece
        if fail:
            raise E.UsageError("the writer failed")
    mark = s3.mark()
    with pytest.raises(E.UsageError, match="writer failed"):
        store.put(f"s3://{bucket}/big.bin", chunks(True))
    served = s3.since(mark)
    assert any("uploadId" in p for m, p, _ in served if m == "PUT"), served  # parts were uploaded
    assert s3.fs().find(bucket) == [] and _pending_uploads(s3, bucket) == []
    store.put(f"s3://{bucket}/big.bin", chunks(False))
    assert s3.fs().size(f"{bucket}/big.bin") == 30 * MiB and _pending_uploads(s3, bucket) == []
    store.close()


def test_an_http_url_is_not_a_destination():
    with pytest.raises(E.UsageError, match="not a destination"):
        codec.write("https://example.invalid/m.aero", _small())


def test_a_failed_write_to_a_filesystem_without_multipart_leaves_nothing():
    import fsspec
    from codec.io.open_store import store_for
    store = store_for("memory://w/x.bin")

    def chunks():
        yield b"abc"
        raise E.UsageError("the writer failed")
    with pytest.raises(E.UsageError):
        store.put("memory://w/x.bin", chunks())
    assert not fsspec.filesystem("memory").exists("/w") or fsspec.filesystem("memory").find("/w") == []
    store.put("memory://w/x.bin", iter([b"abc", b"def"]))
    assert fsspec.filesystem("memory").cat_file("/w/x.bin") == b"abcdef"
    fsspec.filesystem("memory").rm("/w", recursive=True)


def test_a_set_is_named_by_its_folder_on_object_storage(s3, bucket, tmp_path):
    _, url = _publish_set(s3, bucket, tmp_path)
    folder = url.rsplit("/", 1)[0] + "/"
    with codec.open(folder, storage_options=s3.storage_options, cache=False) as s:
        assert s.format == "aeroset" and s.source == url
        assert s.tensor("t.3").tobytes() == _set_model()["t.3"].tobytes()
    codec.write(f"s3://{bucket}/other/", _small(), storage_options=s3.storage_options)  # a folder: a set
    assert s3.fs().exists(f"{bucket}/other/model.aeroset.json")
    assert codec.validate(f"s3://{bucket}/other/", full=True, storage_options=s3.storage_options, cache=False).ok
    with pytest.raises(E.UsageError, match="expected one"):
        codec.open(f"s3://{bucket}/", storage_options=s3.storage_options)


# --------------------------------------------------------------------------- one store contract
@pytest.fixture(params=["local", "memory", "s3", "s3-fsspec"])
def place(request, tmp_path):
    """(a Store, the URL of an empty folder in it) for every store that writes."""
    from codec.io.open_store import store_for
    if request.param == "local":
        root = str(tmp_path / "store")
        os.mkdir(root)
        yield store_for(root), root
    elif request.param == "memory":
        root = f"memory://contract-{uuid.uuid4().hex[:8]}"
        yield store_for(root), root
        import fsspec
        fsspec.filesystem("memory").rm("/" + root.split("://")[1], recursive=True)
    else:
        s3 = request.getfixturevalue("s3")
        name = f"c{uuid.uuid4().hex[:12]}"
        s3.fs().mkdir(name)
        # (s3:// reads go through obstore; an option only s3fs takes keeps them with s3fs)
        so = dict(s3.storage_options, default_block_size=5 * MiB) if request.param == "s3-fsspec" else s3.storage_options
        store = store_for(f"s3://{name}", storage_options=so)
        assert type(store).__name__ == ("FsspecStore" if request.param == "s3-fsspec" else "ObstoreStore")
        yield store, f"s3://{name}"
        store.close()


def test_every_store_keeps_one_contract(place):
    store, root = place
    assert store.supports_writes and store.supports_listing
    data = bytes(range(256)) * 4096  # 1 MiB
    store.put(f"{root}/d/a.bin", iter([data[:1000], data[1000:]]))
    store.put_file(f"{root}/d/b.bin", __file__)
    assert store.exists(f"{root}/d/a.bin") and not store.exists(f"{root}/d/none.bin")
    assert store.size(f"{root}/d/a.bin") == len(data)
    assert bytes(store.get(f"{root}/d/a.bin", len(data))) == data
    with pytest.raises(E.LimitError):
        store.get(f"{root}/d/a.bin", 100)
    spans = [(0, 10), (5000, 300), (len(data) - 7, 7), (20, 1)]
    got = store.get_ranges(f"{root}/d/a.bin", spans, len(data))
    assert [bytes(g) for g in got] == [data[a:a + n] for a, n in spans]
    store.put(f"{root}/d/a.bin", iter([data[::-1]]))  # (what a store wrote itself it reads anew)
    assert bytes(store.get_ranges(f"{root}/d/a.bin", [(0, 10)], len(data))[0]) == data[::-1][:10]
    store.put(f"{root}/d/a.bin", iter([data]))
    assert [u.rsplit("/", 1)[1] for u in store.list(f"{root}/d")] == ["a.bin", "b.bin"]
    store.move(f"{root}/d/b.bin", f"{root}/e/c.bin")  # (codec.mirror publishes what it staged so)
    assert not store.exists(f"{root}/d/b.bin") and store.size(f"{root}/e/c.bin") == os.path.getsize(__file__)
    store.delete(f"{root}/d/a.bin")
    assert not store.exists(f"{root}/d/a.bin")
    with pytest.raises((E.RemoteError, E.UsageError)):
        store.size(f"{root}/d/a.bin")


def test_coalescing_groups_near_ranges_within_the_cap():
    from codec.io.store import coalesce
    runs = coalesce([(0, 10), (100, 10), (5 * MiB, 10), (5 * MiB + 20, 10), (30 * MiB, 20 * MiB)],
                    max_gap=MiB, max_coalesced=16 * MiB)
    assert runs == [(0, 110, [0, 1]), (5 * MiB, 30, [2, 3]), (30 * MiB, 20 * MiB, [4])]


def test_whole_file_work_on_s3_costs_size_over_16_mib_requests(s3, bucket, tmp_path):
    import math
    t = {f"w{i}": np.full((1024, 1024), i, np.float32) for i in range(12)}
    t.update({f"b{i}": np.full(100, i, np.float16) for i in range(200)})  # many small ones between
    p = tmp_path / "m.aero"
    codec.write(str(p), t)
    _put(s3, p, f"s3://{bucket}/m.aero")
    budget = math.ceil(p.stat().st_size / (16 * MiB)) + 3
    for work in (lambda u: codec.load(u, storage_options=s3.storage_options),
                 lambda u: codec.validate(u, full=True, storage_options=s3.storage_options),
                 lambda u: codec.convert(u, str(tmp_path / "c.safetensors"), storage_options=s3.storage_options)):
        mark = s3.mark()
        work(f"s3://{bucket}/m.aero")
        served = s3.since(mark)
        assert 0 < len(served) <= budget, served
    with codec.open(f"s3://{bucket}/m.aero", storage_options=s3.storage_options) as r:
        mark = s3.mark()
        got = r.read_tensors(list(r.tensors))
        assert len(s3.since(mark)) <= budget
    assert all(got[n].tobytes() == a.tobytes() for n, a in t.items())


def test_a_names_map_written_beside_a_converted_model_lands_beside_it_on_s3(s3, bucket, tmp_path):
    from codec.convert import NAMES_SUFFIX
    codec.write(str(tmp_path / "m.aero"), {"emb.w": np.ones(4, np.float32), "head.w": np.zeros(3, np.float32)})
    out = codec.convert(str(tmp_path / "m.aero"), f"s3://{bucket}/z/m.stb", rename="index", drop_metadata=True,
                        dst_storage_options=s3.storage_options)
    assert out == f"s3://{bucket}/z/m.stb" and out.names == f"s3://{bucket}/z/m.stb{NAMES_SUFFIX}"
    assert sorted(s3.fs().find(bucket)) == [f"{bucket}/z/m.stb", f"{bucket}/z/m.stb{NAMES_SUFFIX}"]
    back = codec.convert(out, str(tmp_path / "back.aero"), storage_options=s3.storage_options)
    with codec.open(back) as r:  # (the map beside a source is read for local sources only)
        assert sorted(r.tensors) == ["0", "1"]


# --------------------------------------------------------------------------- one version per open
@pytest.mark.parametrize("ext,reads", [("safetensors", "obstore"), ("gguf", "obstore"), ("safetensors", "s3fs")])
def test_an_object_replaced_after_open_is_a_remote_error_never_the_new_bytes(s3, bucket, tmp_path, ext, reads):
    """Formats without hashes too: every read after open asks for the version seen at open
    (If-Match on its ETag), so a re-published object is never spliced into a reader."""
    old = {"a": np.zeros((512, 512), np.float32), "b": np.ones((512, 512), np.float32)}
    new = {"a": np.full((512, 512), 5, np.float32), "b": np.full((512, 512), 7, np.float32)}
    url = f"s3://{bucket}/m.{ext}"
    for name, t in (("old", old), ("new", new)):
        codec.write(str(tmp_path / f"{name}.{ext}"), t)
    assert (tmp_path / f"old.{ext}").stat().st_size == (tmp_path / f"new.{ext}").stat().st_size
    _put(s3, tmp_path / f"old.{ext}", url)
    so = dict(s3.storage_options, default_block_size=5 * MiB) if reads == "s3fs" else s3.storage_options
    with codec.open(url, storage_options=so) as r:
        assert type(r.store).__name__ == ("FsspecStore" if reads == "s3fs" else "ObstoreStore")
        assert np.array_equal(r.tensor("a"), old["a"])
        _put(s3, tmp_path / f"new.{ext}", url)  # the same layout, other tensor bytes
        with pytest.raises(E.RemoteError, match="changed") as e:
            r.tensor("b")
        assert e.value.source == url


def test_on_a_versioned_bucket_reads_keep_to_the_version_seen_at_open(s3, tmp_path):
    old, new = {"a": np.zeros((512, 512), np.float32)}, {"a": np.ones((512, 512), np.float32)}
    name = f"v{uuid.uuid4().hex[:12]}"
    import boto3
    client = boto3.client("s3", endpoint_url=s3.url, aws_access_key_id=s3.KEY, aws_secret_access_key=s3.SECRET,
                          region_name=s3.REGION)
    client.create_bucket(Bucket=name)
    client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    for n, t in (("old", old), ("new", new)):
        codec.write(str(tmp_path / f"{n}.safetensors"), t)
    url = f"s3://{name}/m.safetensors"
    _put(s3, tmp_path / "old.safetensors", url)
    for so in (s3.storage_options, dict(s3.storage_options, default_block_size=5 * MiB)):  # obstore, s3fs
        _put(s3, tmp_path / "old.safetensors", url)
        with codec.open(url, storage_options=so) as r:
            _put(s3, tmp_path / "new.safetensors", url)
            assert np.array_equal(r.tensor("a"), old["a"])  # (its VersionId asked for: the old bytes, whole)
    assert np.array_equal(codec.load(url, storage_options=s3.storage_options)["a"], new["a"])


def test_s3_reads_go_through_obstore_where_it_takes_the_set_up_as_s3fs_would(s3, monkeypatch):
    from codec.io.open_store import store_for
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_REGION",
              "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(k, raising=False)

    def kind(so):
        with store_for("s3://b/k", storage_options=so) as store:
            return type(store).__name__
    so = s3.storage_options
    assert kind(so) == "ObstoreStore"
    assert kind(dict(so, client_kwargs={"region_name": "eu-west-1"})) == "ObstoreStore"
    assert kind(dict(so, profile="dev")) == "FsspecStore"             # an option only s3fs takes
    assert kind({"endpoint_url": s3.url}) == "FsspecStore"             # credentials only botocore finds
    assert kind({"key": "k", "secret": "s"}) == "FsspecStore"          # a region only botocore finds
    assert kind(dict(so, endpoint_url="127.0.0.1:9000")) == "FsspecStore"  # s3fs says what is wrong
    with pytest.raises(E.UsageError, match="storage_options"):
        codec.open("s3://b/m.aero", storage_options={"key": "k", "endpoint_url": s3.url})  # no secret
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    assert kind(None) == "ObstoreStore"                                # the standard environment
