"""Any single model file over HTTP (AERO, safetensors, GGUF): the structure read with a few
Range requests, each tensor with one, bytes equal to a local read; hostile headers end in a
typed error after a bounded number of small requests; a file changed on the server is caught;
nothing is cached; the CLI works on URLs."""
import os
import struct

import gguf
import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io.remote import HttpOptions

from .servers import FaultServer, Nginx

pytestmark = pytest.mark.timeout(120)

FAST = HttpOptions(connect_timeout=2, read_timeout=1.0, retries=1, backoff=0.01, grace=0.5, min_rate=1024)


def _tensors():
    rng = np.random.default_rng(3)
    t = {f"layer.{i}.w": rng.standard_normal((300, 256)).astype(np.float32) for i in range(4)}
    t["bias"] = np.arange(7, dtype=np.float16)
    t["ids"] = np.arange(1000, dtype=np.int64)
    return t


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    r = tmp_path_factory.mktemp("www1")
    t = _tensors()
    codec.write(str(r / "m.aero"), t, uuid=bytes(16), metadata={"note": "remote"})
    codec.write(str(r / "m.safetensors"), t, metadata={"k": "v"})
    q = np.random.default_rng(1).integers(0, 256, (2, 34), dtype=np.uint8)
    w = gguf.GGUFWriter(str(r / "m.gguf"), "llama")  # written by the gguf package
    w.add_array("tokenizer.ggml.tokens", [f"token-{i}" for i in range(60_000)])  # a header past the first read
    w.add_uint32("llama.block_count", 4)
    for n, a in t.items():
        if a.dtype != np.int64:
            w.add_tensor(n, a)
    w.add_tensor("q", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    os.link(r / "m.safetensors", r / "weights.bin")  # a name that says nothing: found by content
    return r


@pytest.fixture(scope="module")
def nginx(www):
    with Nginx(www) as n:
        yield n


def _requests(ngx, since):
    return [e for e in ngx.since(since) if e["range"] is not None]


@pytest.mark.parametrize("name", ["m.aero", "m.safetensors", "m.gguf", "weights.bin"])
def test_a_single_file_reads_over_http_exactly_as_locally(nginx, www, name):
    local = codec.open(str(www / name))
    mark = nginx.mark()
    with codec.open(f"{nginx.url}/{name}", http=FAST) as r:
        opened = len(_requests(nginx, mark))
        assert r.format == local.format and list(r.tensors) == list(local.tensors)
        assert 2 <= opened <= 4, nginx.since(mark)  # the size, the header (and what it points to)
        assert {k: str(v) for k, v in r.metadata.items()} == {k: str(v) for k, v in local.metadata.items()}
        fetched = 0
        for n in reversed(list(r.tensors)):  # (the last first: it lies past what the opener read)
            m2 = nginx.mark()
            a = r.tensor(n)
            got = len(_requests(nginx, m2))
            assert got <= 1, n  # a tensor: one request at most (none when the opener read it already)
            fetched += got
            assert a.dtype == local.tensor(n).dtype and a.tobytes() == local.tensor(n).tobytes(), n
        assert fetched >= 1
        m3 = nginx.mark()
        for n in r.tensors:
            r.tensor(n)
        assert _requests(nginx, m3) == []  # read once
        assert r.validate().ok and r.validate(full=True).ok
        assert r.describe()["remote"] is True
    local.close()


def test_nothing_is_cached_on_disk(nginx, tmp_path, monkeypatch):
    monkeypatch.setenv("MODELCODEC_CACHE_DIR", str(tmp_path / "cache"))
    with codec.open(f"{nginx.url}/m.safetensors", http=FAST) as r:
        r.tensor("bias")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*"))


def _serve(tmp_path, name, data):
    d = tmp_path / "hostile"
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(data)
    return d


@pytest.mark.parametrize("name,data,cls,rule", [
    ("h.safetensors", struct.pack("<Q", 2**63) + b"{}" + bytes(100), E.LimitError, "SAFETENSORS-HEADER-LENGTH"),
    ("h.gguf", b"GGUF" + struct.pack("<IQQ", 3, 2**62, 0) + bytes(100), E.TruncatedError, "GGUF-TRUNCATED"),
    ("h.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**60) + bytes(100),
     E.TruncatedError, "GGUF-TRUNCATED"),
    ("h.aero", b"AERO" + bytes(92), E.FormatError, None),
])
def test_hostile_headers_end_at_once_with_few_small_requests(tmp_path, name, data, cls, rule):
    with Nginx(_serve(tmp_path, name, data)) as n:
        with pytest.raises(cls) as ei:
            codec.open(f"{n.url}/{name}", http=FAST)
        reqs = [e for e in n.entries() if e["range"] is not None]
    assert rule is None or ei.value.rule == rule, ei.value
    assert len(reqs) <= 3 and sum(e["bytes"] for e in reqs) <= len(data) + 1, reqs  # (+1: the size probe)


def test_a_gguf_header_past_the_limit_is_refused_without_reading_it(tmp_path, monkeypatch):
    from codec.schemas import gguf as S
    monkeypatch.setattr(S, "REMOTE_FIRST_READ", 4096)
    monkeypatch.setattr(S, "REMOTE_HEADER_LIMIT", 64 * 1024)
    w_dir = tmp_path / "big"
    w_dir.mkdir()
    codec.write(str(w_dir / "v.gguf"), {"w": np.zeros(4, np.float32)},
                metadata={"tokens": [f"t{i}" for i in range(20_000)]})  # ~240 KB of key/values
    with Nginx(w_dir) as n:
        with pytest.raises(E.LimitError) as ei:
            codec.open(f"{n.url}/v.gguf", http=FAST)
        got = sum(e["bytes"] for e in n.entries() if e["range"] is not None)
    assert ei.value.rule == "GGUF-HEADER-LIMIT" and got <= 64 * 1024, got


def test_gguf_tensor_infos_past_the_first_read_are_read_in_growing_prefixes(tmp_path, monkeypatch):
    """The tensor infos (read by the engine from schemas.gguf.TensorInfo) go on past the first
    read: the truncation it finds says how far they go, so the prefix grows until they fit --
    a few requests, none of them for tensor bytes."""
    from codec.schemas import gguf as S
    monkeypatch.setattr(S, "REMOTE_FIRST_READ", 4096)
    d = tmp_path / "infos"
    d.mkdir()
    t = {f"blk.{i}.attn_q.weight": np.full((2, 3), i, np.float32) for i in range(400)}  # ~20 KB of infos
    codec.write(str(d / "t.gguf"), t)
    with Nginx(d) as n:
        with codec.open(f"{n.url}/t.gguf", http=FAST) as r:
            assert list(r.tensors) == list(t)
            reqs = [e for e in n.entries() if e["range"] is not None]
            assert np.array_equal(r.tensor("blk.399.attn_q.weight"), t["blk.399.attn_q.weight"])
    assert 2 <= len(reqs) <= 5 and sum(e["bytes"] for e in reqs) < 64 * 1024, reqs


def test_a_file_changed_on_the_server_is_caught(tmp_path):
    d = tmp_path / "chg"
    d.mkdir()
    t = _tensors()
    codec.write(str(d / "m.safetensors"), t)
    with Nginx(d) as n:
        with codec.open(f"{n.url}/m.safetensors", http=FAST) as r:
            t2 = {k: v + 1 if v.dtype.kind == "f" else v for k, v in t.items()}
            codec.write(str(d / "m.safetensors"), t2)  # re-published (same size, new ETag)
            os.utime(d / "m.safetensors", (1, 1))
            with pytest.raises(E.FormatError) as ei:
                r.tensor("layer.0.w")
    assert ei.value.rule == "HTTP-RANGE" and "changed" in str(ei.value)


def test_altered_bytes_are_caught_by_the_aero_tensor_hash(www):
    with FaultServer(www) as f:
        with codec.open(f"{f.url}/alter/m.aero", http=FAST) as r:
            with pytest.raises(E.FormatError):
                for n in r.tensors:
                    r.tensor(n)


def test_unknown_formats_and_options_are_usage_errors(nginx, www, tmp_path):
    (www / "notes.txt").write_bytes(b"hello, not a model at all")
    with pytest.raises(E.UnknownFormatError):
        codec.open(f"{nginx.url}/notes.txt", http=FAST)
    codec.write(str(www / "m.mag"), {"w": np.zeros(2, np.float32)})
    with pytest.raises(codec.UsageError, match="cannot be read over HTTP"):
        codec.open(f"{nginx.url}/m.mag", http=FAST)
    with pytest.raises(codec.UsageError, match="takes no option 'shape_table'"):
        codec.open(f"{nginx.url}/m.aero", shape_table=[])


def test_the_cli_reads_urls(nginx, capsys):
    from codec.tools.cli import main
    assert main(["inspect", f"{nginx.url}/m.gguf"]) == 0
    out = capsys.readouterr().out
    assert "GGUF" in out and "layer.0.w" in out
    assert main(["validate", "--full", f"{nginx.url}/m.safetensors"]) == 0
    assert "full check passed" in capsys.readouterr().out


def test_a_remote_gguf_converts_to_a_local_aero(nginx, www, tmp_path):
    out = codec.convert(f"{nginx.url}/m.gguf", str(tmp_path / "m.aero"), http=FAST)
    with codec.open(out) as a, codec.open(str(www / "m.gguf")) as g:
        assert list(a.tensors) == list(g.tensors)
        for n in g.tensors:
            assert a.tensor(n).tobytes() == g.tensor(n).tobytes()
        assert a.tensors["q"].quant_params == {"ggml_type": 8}


@pytest.mark.parametrize("limit", [-1, 0, "5", 2.5, True])
def test_a_max_tensor_bytes_that_is_not_a_positive_integer_is_named(nginx, tmp_path, limit):
    """Refused when the reader is made, a file's or a set's (a str was taken, then compared with
    a tensor's size: a TypeError at the first read)."""
    codec.write(str(tmp_path / "s") + "/", {"a": np.arange(4, dtype=np.float32)}, format="aeroset")
    for source in (nginx.url + "/m.aero", str(tmp_path / "s")):
        with pytest.raises(E.UsageError, match=r"max_tensor_bytes must be a positive integer \(got "):
            codec.open(source, max_tensor_bytes=limit)
        with codec.open(source, max_tensor_bytes=np.int64(1 << 20)) as r:  # (numpy's integers are integers)
            assert len(r.tensors) >= 1


def test_read_tensors_of_a_remote_file_takes_a_list_of_names_not_one_str(nginx):
    with codec.open(nginx.url + "/m.aero", http=FAST) as r:
        with pytest.raises(E.UsageError, match=r"read_tensors\(names\): names must be a list of tensor names, not str"):
            r.read_tensors("bias")
        assert list(r.read_tensors(["bias"])) == ["bias"]
