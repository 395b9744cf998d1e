"""Converting from a remote source holds about one tensor at a time (issue 30 §5: "remote sources
release what a streaming writer has consumed").

A remote set's tensors are fetched as they are read, into buffers of their own: a writer that
took every tensor as an array before writing held the whole model (each AERO, AEROSET, MAG and
STB conversion of a remote set grew the process by the model's size).  Every writer takes a
``LazyTensor`` now and ``convert`` gives it every tensor so: each is fetched when it is written
and dropped after.  The budgets are measured in a child process (tests/budgets.py), from its
peak resident memory after the imports, with wide margins; what was written is compared with
the source's bytes.
"""
import os

import numpy as np
import pytest

import codec
from codec.formats.aeroset import write_aeroset

from .budgets import peak_growth_mb
from .servers import Nginx

pytestmark = pytest.mark.timeout(300)

#: the model: COUNT tensors of TENSOR bytes (192 MiB)
TENSOR, COUNT = 16 << 20, 12
SIZE_MB = TENSOR * COUNT >> 20
#: the converting child's imports (the HTTP client and the stores) come before its baseline
_PRELUDE = ("import codec.formats.aeroset.stores, codec.io.remote, codec.io.store, codec.remote_file",)
_OUT = {"aero": "m.aero", "aeroset": "set/m.aeroset.json", "mag": "m.mag", "stb": "m.stb"}


def _tensor(i: int) -> np.ndarray:
    """Tensor ``str(i)``: TENSOR random bytes as float32 (names that every target holds, STB's ids too)."""
    return np.frombuffer(np.random.default_rng(i).bytes(TENSOR), np.float32)


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    """The model as a set of two parts and as one safetensors file, in a directory to serve."""
    root = tmp_path_factory.mktemp("remote-memory-www")
    model = {str(i): _tensor(i) for i in range(COUNT)}
    write_aeroset(str(root / "set"), model, max_shard_bytes=64 << 20, max_part_shards=2)
    codec.save(model, str(root / "m.safetensors"))
    return root


@pytest.fixture(scope="module")
def nginx(www):
    with Nginx(www) as ngx:
        yield ngx


def _convert_in_child(src: str, dst, extra: str = "", prelude: tuple = ()) -> int:
    grew = peak_growth_mb(f"codec.convert({src!r}, {str(dst)!r}{extra})", prelude=_PRELUDE + prelude)
    # (about one tensor at a time, and the fetch buffers: far below the model's size)
    assert grew < SIZE_MB * 2 // 3, f"converting {src} grew the process by {grew} MB (the model is {SIZE_MB} MB)"
    return grew


def _check_written(path) -> None:
    with codec.open(str(path)) as r:
        assert sorted(r.tensors, key=int) == [str(i) for i in range(COUNT)]
        for i in range(COUNT):
            a = r.tensor(str(i))
            assert a.dtype == np.float32 and a.shape == (TENSOR // 4,)
            assert a.tobytes() == _tensor(i).tobytes(), i
    if str(path).endswith((".aero", ".aeroset.json")):
        assert codec.validate(str(path), full=True).ok


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """Remote set reads go through the disk cache: an empty one for each conversion (every
    tensor then comes over the network), which the child inherits."""
    monkeypatch.setenv("MODELCODEC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("target", sorted(_OUT))
def test_a_remote_set_converts_holding_about_one_tensor(nginx, tmp_path, fresh_cache, target):
    dst = tmp_path / _OUT[target]
    _convert_in_child(f"{nginx.url}/set/model.aeroset.json", dst)
    _check_written(dst)


def test_a_remote_single_file_converts_holding_about_one_tensor(nginx, tmp_path):
    """(A single remote file is fetched whole into a temporary file first, then converted from
    there: bounded already; kept here so that every remote source kind is covered.)"""
    dst = tmp_path / "m.stb"
    _convert_in_child(f"{nginx.url}/m.safetensors", dst)
    _check_written(dst)


def test_a_set_on_object_storage_converts_holding_about_one_tensor(s3, bucket, www, tmp_path, fresh_cache):
    fs = s3.fs()
    for name in sorted(os.listdir(www / "set")):
        fs.put_file(str(www / "set" / name), f"{bucket}/set/{name}")
    dst = tmp_path / "m.mag"
    # (the baseline after s3fs's client is made: its first use loads botocore's service models)
    warm = (f"codec.open({f's3://{bucket}/set/model.aeroset.json'!r}, storage_options={s3.storage_options!r}).close()",)
    _convert_in_child(f"s3://{bucket}/set/model.aeroset.json", dst, f", storage_options={s3.storage_options!r}",
                      prelude=warm)
    _check_written(dst)


# --------------------------------------------------------------------------- the writers
def _small() -> dict:
    rng = np.random.default_rng(30)
    return {"0": rng.standard_normal((300, 256)).astype(np.float32),
            "1": rng.integers(-2**31, 2**31 - 1, 70_000, dtype=np.int32),
            "2": rng.standard_normal(64).astype(">f2")}


def _files(path) -> dict:
    """{name: bytes} of a written model (a set: every file of its directory)."""
    path = str(path)
    if path.endswith(".aeroset.json"):
        d = os.path.dirname(path)
        return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}
    return {"": open(path, "rb").read()}


@pytest.mark.parametrize("target", sorted(_OUT))
def test_a_writer_takes_lazy_tensors_loading_each_when_it_writes_it(tmp_path, target):
    """Each writer takes a LazyTensor for an array: the same bytes as from the arrays, each
    loaded only once the writer has checked everything (a tensor it cannot hold is refused
    without loading any, nothing written), and every writer says so (``Capabilities.lazy``)."""
    from codec import registry
    from codec.io.writer_io import LazyTensor
    assert all(d.capabilities.lazy for d in registry.formats() if d.writer is not None and d.capabilities)
    model, loaded = _small(), []

    def lazy(name, a):
        return LazyTensor(a.dtype, a.shape, lambda: loaded.append(name) or a)
    eager, given = tmp_path / "eager" / _OUT[target], tmp_path / "lazy" / _OUT[target]
    eager.parent.mkdir(parents=True)
    given.parent.mkdir(parents=True)
    codec.write(str(eager), model)
    before = {n: a.copy() for n, a in model.items()}
    codec.write(str(given), {n: lazy(n, a) for n, a in model.items()})
    assert _files(given) == _files(eager)
    assert set(loaded) == set(model)
    assert all(model[n].tobytes() == before[n].tobytes() for n in model)  # (never changed)

    def never():
        raise AssertionError("loaded before the writer refused the model")
    bad = tmp_path / "bad" / _OUT[target]
    bad.parent.mkdir(parents=True)
    with pytest.raises(codec.errors.UsageError):
        codec.write(str(bad), {"0": LazyTensor(np.float32, (4,), never), "1": LazyTensor(np.complex128, (2,), never)})
    assert os.listdir(bad.parent) == []


def test_stb_takes_a_lazy_column_major_tensor(tmp_path):
    """An STB COL_MAJOR tensor given as a LazyTensor is stored transposed once loaded: the same
    bytes as from the array, read back as the same array."""
    from codec.formats.stb import StbTensor, write_stb
    from codec.io.writer_io import LazyTensor
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    write_stb(str(tmp_path / "a.stb"), [StbTensor(a, layout=1)])
    write_stb(str(tmp_path / "l.stb"), [StbTensor(LazyTensor(a.dtype, a.shape, lambda: a), layout=1)])
    assert (tmp_path / "l.stb").read_bytes() == (tmp_path / "a.stb").read_bytes()
    with codec.open(str(tmp_path / "l.stb")) as r:
        assert np.array_equal(r.tensor("0"), a)
