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

from .servers import S3Server

pytestmark = pytest.mark.timeout(300)
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3):
    name = f"b{uuid.uuid4().hex[:12]}"
    s3.fs().mkdir(name)
    return name


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


def test_memory_filesystem_and_file_urls(tmp_path):
    import fsspec
    t = _small()
    codec.write(str(tmp_path / "m.aero"), t)
    fsspec.filesystem("memory").pipe_file("/zoo/m.aero", (tmp_path / "m.aero").read_bytes())
    with codec.open("memory://zoo/m.aero") as r:
        assert r.tensor("layer.1.w").tobytes() == t["layer.1.w"].tobytes()
    with codec.open((tmp_path / "m.aero").as_uri()) as r:  # file:// is a local path
        assert r.tensor("ids").tolist() == t["ids"].tolist()


def test_a_filesystem_not_installed_is_one_line_naming_the_extra():
    with pytest.raises(E.UsageError, match=r"pip install 'modelcodec\[gcs\]'") as e:
        codec.open("gs://bucket/m.aero")
    assert "\n" not in str(e.value)
    with pytest.raises(E.UsageError, match="storage_options"):
        codec.open("https://example.invalid/m.aero", storage_options={"anon": True})
