"""AEROSET over HTTP: a real nginx started here on 127.0.0.1 (request counts from its access
log), a fault server that misbehaves in every way a CDN can, the disk cache (poisoned entries,
size cap, changed parts, two processes), and generated sets read back over HTTP."""
import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import socket
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codec import errors as E
from codec.io.cache import DIGEST, RangeCache
from codec.tools.cli import main
from codec.formats.aero import OPEN_PREFIX
from codec.formats.aeroset import AeroSet, write_aeroset
from codec.io.integrity import blake3_bytes
from codec.io.remote import Http, HttpOptions
from codec.schemas import aeroset as S, http as H
from codec.schemas.aeroset import Rule

from .conftest import manifest, vectors_dir
from .servers import FaultServer, Nginx

pytestmark = pytest.mark.timeout(120)  # a hang is a failure, never a stuck CI run

VDIR = vectors_dir("aero")
SETS = [v for v in manifest("aero")["vectors"] if v["file"].endswith(".aeroset.json")]
#: patient enough for a loaded CI machine, quick to give up on a broken server
FAST = HttpOptions(connect_timeout=2, read_timeout=1.0, retries=2, backoff=0.01, grace=0.5, min_rate=1024)


def _model(seed=0):
    """Tensors laid out so parts are bigger than the 256 KiB the opener reads first: a tensor
    read costs its own Range request (as in any real model)."""
    rng = np.random.default_rng(seed)
    t = {f"layer.{i}.w": rng.standard_normal((256, 160)).astype(np.float32) for i in range(6)}
    t.update({f"layer.{i}.b": rng.standard_normal(160).astype(np.float32) for i in range(6)})
    t["embed"] = rng.integers(0, 255, (700, 512), dtype=np.uint8)
    t["scale"] = np.array(0.5, dtype=np.float16)
    return t


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("www")
    write_aeroset(r / "m", _model(), model_name="m", architecture="test", max_shard_bytes=400_000,
                  max_part_shards=2)
    return r


@pytest.fixture(scope="module")
def nginx(root):
    with Nginx(root) as n:
        yield n


@pytest.fixture(scope="module")
def faults(root):
    with FaultServer(root) as f:
        yield f


@pytest.fixture
def cache(tmp_path):
    return RangeCache(tmp_path / "cache")


def _ranges(entries):
    return [e for e in entries if e["range"] is not None]


def _data_ranges(entries):
    """Range requests other than a part's control region (read by ranges, so no sha256 can vouch
    for it: it is read again at every open, never cached)."""
    return [e for e in _ranges(entries)
            if not (e["uri"].split("/")[-1].startswith("part-") and e["range"] == f"bytes=0-{OPEN_PREFIX - 1}")]


# =============================================================================== vectors
@pytest.fixture(scope="module")
def vectors_server():
    """The vectors folder at the port model_v02.aeroset.json's base_url names (8765) when it is
    free; otherwise the test passes base_url= to point at the same files elsewhere."""
    n = None
    if Nginx.free_port_available(8765):
        try:
            n = Nginx(VDIR, extra_ports=(8765,)).start()
        except RuntimeError:  # another test worker took it first
            n = None
    on_8765 = n is not None
    n = n or Nginx(VDIR).start()
    try:
        yield n, on_8765
    finally:
        n.stop()


@pytest.mark.parametrize("v", SETS, ids=lambda v: v["file"])
def test_manifest_sets_read_over_http(vectors_server, v, tmp_path):
    n, on_8765 = vectors_server
    opts = {} if on_8765 or "base_url" not in v.get("extra", {}) else {"base_url": n.url + "/aeroset_global"}
    with AeroSet(f"{n.url}/{v['file']}", cache=tmp_path, **opts) as s:
        assert s.remote and sorted(s.tensors) == sorted(t["name"] for t in v["tensors"])
        got = s.read_tensors([t["name"] for t in v["tensors"]])
        for t in v["tensors"]:
            assert hashlib.sha256(got[t["name"]].tobytes()).hexdigest() == t["sha256"]
            assert s.tensors[t["name"]].dtype_name == t["dtype"]
        rep = s.validate(full=True)
    if v["expect"] == "valid":
        assert rep.ok, [str(x) for x in rep.violations]
    else:  # the reference writer's zero MJSN hash, in every part, found in the downloaded parts
        assert {x.rule for x in rep.errors} == {"AERO-CHUNK-HASH"} and all("http://" in str(x) for x in rep.errors)


def test_v02_local_index_read_remotely_from_base_url(vectors_server, tmp_path):
    n, on_8765 = vectors_server
    v = next(v for v in SETS if "v02" in v["file"])
    opts = {} if on_8765 else {"base_url": n.url + "/aeroset_global"}
    mark = n.mark()
    with AeroSet(VDIR / v["file"], remote=True, cache=False, **opts) as s:
        for t in v["tensors"]:
            assert hashlib.sha256(s.read_tensor_bytes(t["name"])).hexdigest() == t["sha256"]
        assert s.describe()["base_url"] == (opts.get("base_url") or "http://127.0.0.1:8765/aeroset_global")
    if on_8765:
        assert n.since(mark), "the parts came over HTTP"


# =============================================================================== nginx
def test_every_tensor_reads_remotely(nginx, cache):
    model = _model()
    with AeroSet(nginx.url + "/m/model.aeroset.json", cache=cache) as s:
        assert s.remote and sorted(s.tensors) == sorted(model)
        for name, a in model.items():
            got = s.tensor(name)
            assert got.dtype == a.dtype and got.shape == a.shape and got.tobytes() == a.tobytes()
        assert s.metadata == {"model_name": "m", "architecture": "test"}
        assert s.validate().ok


def test_cold_tensor_costs_three_range_requests_and_warm_only_the_part_control_region(nginx, cache):
    url = nginx.url + "/m/model.aeroset.json"
    mark = nginx.mark()
    with AeroSet(url, cache=cache) as s:
        got = s.tensor("layer.3.w")
    cold = nginx.since(mark)
    assert got.tobytes() == _model()["layer.3.w"].tobytes()
    assert [e["uri"] for e in cold if e["range"] is None] == ["/m/model.aeroset.json"]
    assert len(_ranges(cold)) <= 3, cold
    assert all(e["status"] == 206 for e in _ranges(cold))
    assert len({e["connection"] for e in cold}) == 1, "one kept-alive connection"

    mark = nginx.mark()
    with AeroSet(url, cache=cache) as s:
        assert s.tensor("layer.3.w").tobytes() == got.tobytes()
    warm = nginx.since(mark)
    # the index JSON, and the part's control region: read by ranges, no sha256 can vouch for it,
    # so it is never cached; index.aero (checked whole against its sha256) and the tensor
    # (against index.aero's hash_b3) come from the cache
    assert [e["uri"] for e in warm if e["range"] is None] == ["/m/model.aeroset.json"]
    assert [(e["uri"], e["range"]) for e in _ranges(warm)] == [("/m/part-000.aero", f"bytes=0-{OPEN_PREFIX - 1}")]


def test_a_new_token_in_the_url_still_reads_from_the_cache(nginx, cache):
    # (a refreshed ?token= names the same files: entries are keyed without the query, and by
    # the content the index vouches for, which every read from the cache is checked against)
    url = nginx.url + "/m/model.aeroset.json"
    with AeroSet(url + "?token=monday", cache=cache) as s:
        got = s.tensor("layer.3.w")
    mark = nginx.mark()
    with AeroSet(url + "?token=tuesday", cache=cache) as s:
        assert s.tensor("layer.3.w").tobytes() == got.tobytes() == _model()["layer.3.w"].tobytes()
    warm = nginx.since(mark)
    assert [e["uri"] for e in warm if e["range"] is None] == ["/m/model.aeroset.json"]
    assert [(e["uri"], e["range"]) for e in _ranges(warm)] == [("/m/part-000.aero", f"bytes=0-{OPEN_PREFIX - 1}")]


def test_reading_many_tensors_coalesces_neighbours(nginx):
    model = _model()
    with AeroSet(nginx.url + "/m/model.aeroset.json", cache=False) as s:
        n_parts = len(s.index["parts"])
        for i in range(n_parts):
            s.part(i)
        mark = nginx.mark()
        got = s.read_tensors(list(model))
        reqs = _ranges(nginx.since(mark))
    assert all(got[k].tobytes() == a.tobytes() for k, a in model.items())
    # the tensors of a part are neighbours: one request per part holding more than the prefix
    assert len(reqs) <= n_parts < len(model), reqs


def test_big_reads_are_split_at_max_range(nginx):
    opts = HttpOptions(max_range=64 * 1024)
    with AeroSet(nginx.url + "/m/model.aeroset.json", cache=False, http=opts) as s:
        t = s.tensors["embed"]
        for i in range(len(s.index["parts"])):
            s.part(i)
        mark = nginx.mark()
        assert s.tensor("embed").tobytes() == _model()["embed"].tobytes()
        reqs = _ranges(nginx.since(mark))
    assert len(reqs) == -(-t.nbytes // opts.max_range)
    assert all(e["bytes"] <= opts.max_range for e in reqs)


def test_remote_validate_full_checks_sha256_and_hashes(tmp_path):
    write_aeroset(tmp_path / "s", _model(1), max_shard_bytes=400_000, max_part_shards=2)
    with Nginx(tmp_path) as n:
        url = n.url + "/s/model.aeroset.json"
        assert AeroSet.validate_file(url, full=True, cache=False).ok
        part = tmp_path / "s" / "part-000.aero"
        data = bytearray(part.read_bytes())
        data[-100] ^= 0xFF  # a weight byte: structure still fine, hashes not
        part.write_bytes(bytes(data))
        assert AeroSet.validate_file(url, cache=False).ok
        rep = AeroSet.validate_file(url, full=True, cache=False)
        rules = {x.rule for x in rep.errors}
        assert Rule.PART_HASH in rules and "AERO-CHUNK-HASH" in rules
        assert any(x.source.endswith("/s/part-000.aero") for x in rep.errors if x.rule == "AERO-CHUNK-HASH")


# =============================================================================== index problems
def _served_copy(root, name, edit=None):
    d = root / name
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(root / "m", d)
    if edit is not None:
        idx = json.loads((d / "model.aeroset.json").read_text())
        edit(idx)
        (d / "model.aeroset.json").write_text(json.dumps(idx))
    return d


@pytest.mark.parametrize("path, cls, rule", [
    ("../m/part-000.aero", E.StructureError, Rule.PATH),
    ("/m/part-000.aero", E.StructureError, Rule.PATH),
    ("ftp://127.0.0.1/part-000.aero", E.RemoteError, H.Rule.URL),
    ("file:///etc/passwd", E.RemoteError, H.Rule.URL),
])
def test_remote_paths_are_checked(nginx, root, path, cls, rule):
    _served_copy(root, "badpath", lambda i: i["parts"][0].__setitem__("path", path))
    with pytest.raises(cls) as ei:
        AeroSet(nginx.url + "/badpath/model.aeroset.json", cache=False)
    assert ei.value.rule == rule


def test_wrong_sizes_hashes_and_missing_files_are_typed(nginx, root):
    url = nginx.url + "/{}/model.aeroset.json"
    _served_copy(root, "badsha", lambda i: i["global_tidx"].__setitem__("sha256", "0" * 64))
    with pytest.raises(E.IntegrityError) as ei:
        AeroSet(url.format("badsha"), cache=False)
    assert ei.value.rule == Rule.PART_HASH

    # a part of another size on the server than its entry says: the set's finding (its index and
    # its file disagree), not the transport's, naming the part, its URL and both sizes
    d = _served_copy(root, "badsize", lambda i: i["parts"][1].__setitem__("size_bytes",
                                                                          i["parts"][1]["size_bytes"] + 1))
    real = (d / "part-001.aero").stat().st_size
    with AeroSet(url.format("badsize"), cache=False) as s:
        with pytest.raises(E.IntegrityError) as ei:
            s.part(1)
        e = ei.value
        assert (e.format, e.rule, e.path, e.expected, e.actual) == ("aeroset", Rule.PART_HASH,
                                                                     "index.parts[1].size_bytes", real + 1, real)
        assert f"part-001.aero is {real} bytes at {nginx.url}/badsize/part-001.aero, the index says {real + 1}" \
            in str(e)
        found = {(v.rule, v.path) for v in s.validate(full=True, progress=False).errors}
        assert found == {(Rule.PART_HASH, "index.parts[1].size_bytes")}  # (no HTTP-RANGE among them)

    # an empty part (nginx answers its Range request with 200 and no bytes) and one cut short of
    # the ranges asked (a 416, saying the file's size): the same finding, not "no Range support"
    for cut, kind in ((0, "empty"), (4096, "short")):
        d = _served_copy(root, f"cut-{kind}")
        want = (d / "part-001.aero").stat().st_size
        with open(d / "part-001.aero", "r+b") as f:
            f.truncate(cut)
        with AeroSet(url.format(f"cut-{kind}"), cache=False) as s:
            with pytest.raises(E.IntegrityError) as ei:
                s.part(1)
            e = ei.value
            assert (e.rule, e.path, e.expected, e.actual) == (Rule.PART_HASH, "index.parts[1].size_bytes", want, cut)
            found = {(v.rule, v.path) for v in s.validate(progress=False).errors}
            assert found == {(Rule.PART_HASH, "index.parts[1].size_bytes")}, kind

    d = _served_copy(root, "missing")
    os.unlink(d / "part-001.aero")
    with AeroSet(url.format("missing"), cache=False) as s:
        with pytest.raises(E.RemoteError) as ei:
            s.part(1)
        assert "404" in str(ei.value) and "/missing/part-001.aero" in str(ei.value)

    with pytest.raises(E.RemoteError, match="404"):
        AeroSet(url.format("nothing-here"), cache=False)


@pytest.mark.parametrize("change, at", [("grown", "size_bytes"), ("weight byte", "sha256")])
def test_a_part_failing_its_check_is_one_finding_not_one_per_tensor(nginx, root, change, at):
    """A served part holding several tensors, of another size than its entry's or of its size with
    other bytes (a small part: read whole, and hashed, when it opens): validation -- structure and
    full -- reports it once, AEROSET-PART-HASH at index.parts[1].size_bytes (its size alone, not
    also its sha256) or index.parts[1].sha256, with no byte offset, not once per tensor it holds;
    reading one of its tensors still raises that IntegrityError."""
    d = root / f"failing-{at}"
    write_aeroset(d, {f"t{i}": np.arange(64, dtype=np.float32) + i for i in range(9)}, max_shard_bytes=256,
                  max_part_shards=3)
    idx = json.loads((d / "model.aeroset.json").read_text())
    assert [p["shards"] for p in idx["parts"]] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    part = d / "part-001.aero"
    data = bytearray(part.read_bytes())
    if change == "grown":
        data += bytes(16)
    else:
        data[-100] ^= 0xFF
    part.write_bytes(bytes(data))
    url = f"{nginx.url}/failing-{at}/model.aeroset.json"
    for full in (False, True):
        rep = AeroSet.validate_file(url, full=full, cache=False)
        said = [(type(v).__name__, v.rule, v.path, v.offset, v.source) for v in rep.violations]
        assert len(said) == len(set(said)), said
        assert [(v.path, v.offset, v.source) for v in rep.errors if v.rule == Rule.PART_HASH] == \
            [(f"index.parts[1].{at}", None, url)], (full, said)
    with AeroSet(url, cache=False) as s:
        refused = []
        for name in s.tensors:
            try:
                s.tensor(name)
            except E.IntegrityError as e:
                refused.append((e.rule, e.path, e.offset))
        assert refused == [(Rule.PART_HASH, f"index.parts[1].{at}", None)] * 3  # (the 3 tensors of part-001)
    shutil.rmtree(d)


def test_caps_on_index_and_tensor_size(nginx, monkeypatch):
    url = nginx.url + "/m/model.aeroset.json"
    with AeroSet(url, cache=False, max_tensor_bytes=1000) as s:
        assert s.tensor("layer.0.b").nbytes == 640
        with pytest.raises(E.LimitError) as ei:
            s.tensor("embed")
        assert ei.value.rule == H.Rule.TENSOR_LIMIT
    monkeypatch.setattr(S, "MAX_INDEX_BYTES", 100)
    with pytest.raises(E.LimitError) as ei:
        AeroSet(url, cache=False)
    assert ei.value.rule == H.Rule.LIMIT


def test_connection_refused_is_a_typed_error_after_retries():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    http = Http(FAST)
    with pytest.raises(E.RemoteError) as ei:
        AeroSet(f"http://127.0.0.1:{port}/m/model.aeroset.json", http=http, cache=False)
    assert ei.value.rule == H.Rule.REQUEST and f"127.0.0.1:{port}" in str(ei.value)
    assert http.stats["requests"] == FAST.retries + 1


# =============================================================================== faults
def _open_faulty(faults, mode, **kw):
    return AeroSet(f"{faults.url}/{mode}/m/model.aeroset.json", cache=False, http=dataclasses.replace(FAST, **kw))


@pytest.mark.parametrize("mode", ["drop", "flaky"])
def test_faults_that_retries_repair(faults, mode):
    faults.reset()
    model = _model()
    with _open_faulty(faults, mode) as s:
        got = s.read_tensors(list(model))
        assert s.store.http.stats["retries"] > 0
    assert all(got[k].tobytes() == a.tobytes() for k, a in model.items())
    if mode == "drop":  # each retry asked only for what had not arrived: same end, later start
        spans = [(r["path"], *map(int, r["range"].split("=")[1].split("-"))) for r in faults.requests if r["range"]]
        resumed = [(p, a, b) for p, a, b in spans if any(p == p0 and b == b0 and a > a0 for p0, a0, b0 in spans)]
        assert resumed, spans


@pytest.mark.parametrize("mode, rule, words", [
    ("ignore-range", H.Rule.RANGE, "200"),
    ("bad-range", H.Rule.RANGE, "asked for bytes"),
    ("drop-always", H.Rule.REQUEST, "attempts"),
    ("always-500", H.Rule.REQUEST, "HTTP 500"),
    ("stall", H.Rule.REQUEST, "attempts"),
])
def test_faults_that_end_in_a_typed_error(faults, mode, rule, words):
    faults.reset()
    with pytest.raises(E.RemoteError) as ei:
        with _open_faulty(faults, mode) as s:
            s.read_tensors(list(_model()))
    assert ei.value.rule == rule and words in str(ei.value)
    assert f"/{mode}/m/" in str(ei.value)


def test_altered_bytes_never_come_back(faults, tmp_path):
    faults.reset()
    cache = RangeCache(tmp_path)
    with AeroSet(f"{faults.url}/alter/m/model.aeroset.json", cache=cache, http=FAST) as s:
        for name in ("layer.2.w", "embed"):
            with pytest.raises(E.IntegrityError) as ei:
                s.tensor(name)
            assert ei.value.rule == "AERO-HASH-B3"
    files = _entry_files(cache)
    sizes = {_model()[n].nbytes for n in ("layer.2.w", "embed")}
    assert files and not [f for f in files if os.path.getsize(f) - DIGEST in sizes]  # nothing altered was kept


def test_slow_server(faults):
    faults.reset()
    faults.slow_delay = 0.002
    try:
        with _open_faulty(faults, "slow", min_rate=1024) as s:  # slow but acceptable
            assert s.tensor("layer.1.b").tobytes() == _model()["layer.1.b"].tobytes()
        with pytest.raises(E.RemoteError, match="too slow"):
            with _open_faulty(faults, "slow", min_rate=10**9, grace=0.05) as s:
                s.tensor("embed")
    finally:
        faults.slow_delay = 0.05


# =============================================================================== cache
def _entry_files(cache):
    return [os.path.join(d, f) for d, _, fs in os.walk(cache.root) for f in fs if len(f) == 64]


def test_poisoned_cache_entry_is_detected_and_refetched(nginx, cache):
    url = nginx.url + "/m/model.aeroset.json"
    want = _model()["layer.3.w"].tobytes()
    with AeroSet(url, cache=cache) as s:
        s.tensor("layer.3.w")
    entry = next(p for p in _entry_files(cache) if open(p, "rb").read()[:-DIGEST] == want)
    for poison in ("flip", "truncate"):
        data = bytearray(open(entry, "rb").read())
        if poison == "flip":
            data[len(data) // 2] ^= 1
        else:
            data = data[:-5]
        open(entry, "wb").write(bytes(data))
        mark, before = nginx.mark(), cache.stats["corrupt"]
        with AeroSet(url, cache=cache) as s:
            assert s.tensor("layer.3.w").tobytes() == want
        assert cache.stats["corrupt"] == before + 1
        assert len(_data_ranges(nginx.since(mark))) == 1  # that tensor, fetched again
        raw = open(entry, "rb").read()
        assert raw[:-DIGEST] == want and blake3_bytes(raw[:-DIGEST]) == raw[-DIGEST:]


def test_cache_size_cap_while_reading(nginx, tmp_path):
    cap = 600_000
    cache = RangeCache(tmp_path, max_bytes=cap)
    with AeroSet(nginx.url + "/m/model.aeroset.json", cache=cache) as s:
        for name in s.tensors:
            s.tensor(name)
            assert cache.size() <= cap
    assert cache.stats["evictions"] > 0 and cache.stats["writes"] > cache.stats["evictions"]


def test_cache_evicts_the_least_recently_used(tmp_path):
    cache = RangeCache(tmp_path, max_bytes=2 * (1000 + DIGEST) + 10)
    data = {k: os.urandom(1000) for k in "abc"}
    cache.put("a" * 64, data["a"])
    cache.put("b" * 64, data["b"])
    assert cache.get("a" * 64, 1000) == data["a"]  # a is now used more recently than b
    cache.put("c" * 64, data["c"])
    assert cache.get("b" * 64, 1000) is None
    assert cache.get("a" * 64, 1000) == data["a"] and cache.get("c" * 64, 1000) == data["c"]
    assert cache.size() == 2 * (1000 + DIGEST)
    assert not cache.put("d" * 64, os.urandom(cache.max_bytes))  # too big to keep: not stored
    cache.clear()
    assert cache.size() == 0


def test_a_changed_part_never_returns_stale_bytes(tmp_path):
    cache = RangeCache(tmp_path / "cache")
    with Nginx(tmp_path) as n:
        url = n.url + "/s/model.aeroset.json"
        write_aeroset(tmp_path / "s", _model(1), max_shard_bytes=400_000, max_part_shards=2)
        with AeroSet(url, cache=cache) as s:
            s.read_tensors(list(s.tensors))
        write_aeroset(tmp_path / "s", _model(2), max_shard_bytes=400_000, max_part_shards=2)
        with AeroSet(url, cache=cache) as s:
            got = s.read_tensors(list(s.tensors))
    assert all(got[k].tobytes() == a.tobytes() for k, a in _model(2).items())


def _fetch_all(url, cache_dir, q):
    with AeroSet(url, cache=cache_dir) as s:
        got = s.read_tensors(list(s.tensors))
        q.put({k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in got.items()})


def test_two_processes_share_one_cache(nginx, tmp_path):
    url = nginx.url + "/m/model.aeroset.json"
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_fetch_all, args=(url, str(tmp_path), q)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    want = {k: hashlib.sha256(a.tobytes()).hexdigest() for k, a in _model().items()}
    assert results == [want, want]
    cache = RangeCache(tmp_path)
    files = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "ranges") for f in fs]
    assert files and all(len(os.path.basename(f)) == 64 for f in files)  # no temporary left over
    for f in files:
        raw = open(f, "rb").read()
        assert blake3_bytes(raw[:-DIGEST]) == raw[-DIGEST:]
    mark = nginx.mark()
    with AeroSet(url, cache=cache) as s:
        assert {k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in s.read_tensors(list(s.tensors)).items()} == want
    assert _data_ranges(nginx.since(mark)) == []


# =============================================================================== properties
@st.composite
def models(draw):
    n = draw(st.integers(1, 7))
    out = {}
    for i in range(n):
        dt = draw(st.sampled_from(["<f4", "<f2", "<i8", "u1", "<u2"]))
        shape = tuple(draw(st.lists(st.integers(0, 40), min_size=0, max_size=3)))
        rnd = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        out[f"t{i}.{draw(st.text('abcxyz', min_size=1, max_size=4))}"] = \
            rnd.integers(0, 255, int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize,
                         dtype=np.uint8).view(dt).reshape(shape)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=models(), shard=st.integers(1, 20_000), per_part=st.integers(1, 4))
def test_generated_sets_read_back_locally_and_over_http(nginx, root, model, shard, per_part):
    d = root / "gen"
    write_aeroset(d, model, max_shard_bytes=shard, max_part_shards=per_part)
    with AeroSet(d) as local, AeroSet(nginx.url + "/gen/model.aeroset.json", cache=False) as remote:
        got = remote.read_tensors(list(model))
        for k, a in model.items():
            assert local.tensor(k).tobytes() == a.tobytes() == got[k].tobytes()
            assert got[k].shape == a.shape and got[k].dtype == a.dtype.newbyteorder("<")


# =============================================================================== CLI
def test_cli_remote_validate_inspect_and_fetch(nginx, tmp_path, capsys):
    url = nginx.url + "/m/model.aeroset.json"
    assert main(["validate", url]) == 0
    assert main(["validate", url, "--full"]) == 0
    out = capsys.readouterr().out
    assert "full check passed" in out and "sha256, size and full AERO check" in out
    assert main(["inspect-set", url]) == 0
    assert "embed" in capsys.readouterr().out
    out_file = tmp_path / "embed.bin"
    assert main(["fetch-tensor", url, "embed", str(out_file)]) == 0
    assert out_file.read_bytes() == _model()["embed"].tobytes()
    assert main(["fetch-tensor", url, "nope", str(tmp_path / "x")]) == 1
    capsys.readouterr()
    assert main(["fetch-tensor", nginx.url + "/none/model.aeroset.json", "embed", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "404" in err and "HTTP-REQUEST" in err and "/none/" in err
    assert not (tmp_path / "x").exists()
    assert main(["validate", nginx.url + "/none/model.aeroset.json"]) == 1
    assert "404" in capsys.readouterr().out


def test_many_parts_opened_in_parallel_with_small_ranges(nginx, root):
    """More parts than client threads, each control region split in several requests: the
    nested parallel reads must not wait on each other (a deadlock would hit the timeout)."""
    model = {f"t{i}": np.full(5000, i, dtype=np.float32) for i in range(24)}
    write_aeroset(root / "many", model, max_shard_bytes=20_000, max_part_shards=1)
    opts = HttpOptions(workers=2, max_range=256)
    with AeroSet(nginx.url + "/many/model.aeroset.json", cache=False, http=opts) as s:
        assert len(s.index["parts"]) == 24
        got = s.read_tensors(list(model))
    assert all(got[k].tobytes() == a.tobytes() for k, a in model.items())


def _forge(entry: str, edit) -> None:
    """Rewrite a cache entry with other bytes and a *matching* trailer (a forged entry)."""
    data = bytearray(open(entry, "rb").read()[:-DIGEST])
    edit(data)
    open(entry, "wb").write(bytes(data) + blake3_bytes(bytes(data)))


def test_forged_cache_entries_are_caught_by_the_index_hashes(nginx, root, cache):
    url = nginx.url + "/m/model.aeroset.json"
    model = _model()
    with AeroSet(url, cache=cache) as s:
        s.tensor("layer.3.w")
    index_aero = (root / "m" / "index.aero").read_bytes()
    entries = _entry_files(cache)
    tensor_entry = next(p for p in entries if open(p, "rb").read()[:-DIGEST] == model["layer.3.w"].tobytes())
    index_entry = next(p for p in entries if open(p, "rb").read()[:-DIGEST] == index_aero)

    def flip(b):
        b[len(b) // 2] ^= 1
    _forge(tensor_entry, flip)
    _forge(index_entry, flip)
    mark = nginx.mark()
    with AeroSet(url, cache=cache) as s:  # index.aero: its sha256; the tensor: its hash_b3
        assert s.tensor("layer.3.w").tobytes() == model["layer.3.w"].tobytes()
    uris = [e["uri"] for e in _data_ranges(nginx.since(mark))]
    assert uris.count("/m/index.aero") == 1 and uris.count("/m/part-000.aero") == 1
    assert open(index_entry, "rb").read()[:-DIGEST] == index_aero  # the good bytes replaced the forged ones


def test_unverified_reads_are_never_cached(faults, tmp_path):
    faults.reset()
    cache = RangeCache(tmp_path)
    with AeroSet(f"{faults.url}/alter/m/model.aeroset.json", cache=cache, http=FAST) as s:
        altered = s.read_tensors(["layer.2.w"], verify=False)["layer.2.w"]  # what was asked for
    assert altered.tobytes() != _model()["layer.2.w"].tobytes()
    assert not [f for f in _entry_files(cache) if os.path.getsize(f) - DIGEST == altered.nbytes]


def test_without_sha256_a_republished_set_is_not_served_stale(tmp_path):
    cache = RangeCache(tmp_path / "cache")

    def publish(seed):
        write_aeroset(tmp_path / "s", _model(seed), max_shard_bytes=400_000, max_part_shards=2, tensor_hash=False)
        p = tmp_path / "s" / "model.aeroset.json"
        idx = json.loads(p.read_text())
        for ref in idx["parts"] + [idx["global_tidx"]]:
            del ref["sha256"]
        p.write_text(json.dumps(idx))
    with Nginx(tmp_path) as n:
        url = n.url + "/s/model.aeroset.json"
        for seed in (1, 2):
            publish(seed)
            with AeroSet(url, cache=cache) as s:
                got = s.read_tensors(list(s.tensors))
            assert all(got[k].tobytes() == a.tobytes() for k, a in _model(seed).items())
    assert cache.stats["hits"] == 0


def test_a_trickled_response_head_cannot_hang_the_client():
    """Headers sent a byte at a time (each read well within read_timeout) and endless 1xx
    answers: the whole head must arrive within head_timeout, or the attempt is abandoned."""
    stop = threading.Event()
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.1)

    def trickle(c, endless_continue):
        try:
            c.recv(65536)
            if not endless_continue:
                c.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.is_set():
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" if endless_continue else b"X")
                time.sleep(0.05 if endless_continue else 0.2)
        except OSError:
            pass
        finally:
            c.close()

    def serve():
        n = 0
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=trickle, args=(c, n % 2 == 1), daemon=True).start()
            n += 1
    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/x"
    try:
        for call in (lambda h: h.get(url, 1000), lambda h: h.fetch([(url, 0, 10, None)])):
            http = Http(HttpOptions(read_timeout=1.0, head_timeout=1.0, retries=1, backoff=0.01))
            with pytest.raises(E.RemoteError) as ei:  # (a head without end would hang: the timeout mark)
                call(http)
            assert ei.value.rule == H.Rule.REQUEST and "failed after 2 attempts" in str(ei.value)
            assert http.stats["requests"] == 2  # the first attempt and its one retry, each cut by the watchdog
            http.close()
    finally:
        stop.set()
        srv.close()


def test_a_part_republished_while_open_is_an_error_not_a_splice(tmp_path):
    """nginx sends strong ETags: the client sends them back as If-Range, so a part replaced
    between opening it and reading a tensor gives a typed error, never a mix of versions."""
    with Nginx(tmp_path) as n:
        write_aeroset(tmp_path / "s", _model(1), max_shard_bytes=400_000, max_part_shards=2, tensor_hash=False)
        with AeroSet(n.url + "/s/model.aeroset.json", cache=False) as s:
            s.part(0)
            write_aeroset(tmp_path / "s", _model(2), max_shard_bytes=400_000, max_part_shards=2,
                          tensor_hash=False)
            later = time.time() + 10  # nginx's ETag is mtime (seconds) + size: a re-publish comes later
            os.utime(tmp_path / "s" / "part-000.aero", (later, later))
            with pytest.raises(E.RemoteError) as ei:
                s.tensor("layer.3.w")
    assert ei.value.rule == H.Rule.RANGE and "changed" in str(ei.value)


def test_a_downloaded_file_is_hashed_while_the_next_pieces_arrive(nginx, root, monkeypatch):
    """validate --full of a remote set downloads each file whole: its sha256 is taken on a worker
    as the pieces arrive (the caller's thread goes on fetching), and still checks out."""
    from codec.formats.aeroset import stores
    from codec.io import integrity, links
    monkeypatch.setattr(stores, "_DOWNLOAD_PIECE", 4096)  # (several pieces per part)
    on, digest_of = [], links.digest_of

    class Seen:
        def __init__(self, h):
            self.h = h

        def update(self, b):
            on.append(threading.current_thread() is threading.main_thread())
            self.h.update(b)

        def hexdigest(self):
            return self.h.hexdigest()
    monkeypatch.setattr(integrity.BackgroundFeed, "INLINE", 1024)
    with AeroSet(nginx.url + "/m/model.aeroset.json", cache=False) as s:
        # (from here on: the open checked index.aero's few bytes on this thread)
        monkeypatch.setattr(links, "digest_of", lambda decl: Seen(digest_of(decl)))
        rep = s.validate(full=True, progress=False)
    assert rep.ok, rep.violations[:3]
    assert on and not any(on)  # (every piece hashed off the caller's thread)
