"""How a remote model in several files (a sharded checkpoint, a split GGUF model) says what went
wrong with one of its files: only a definite "not there" (HTTP 404/410, an object store's missing
key) is a missing file; a 500, a connection closed without an answer, a timeout or a refused
credential is the RemoteError it is.  A server without Range requests exits 4 in every command.
The index URL's query string goes with every file beside it (``?download=true``, a shared
token) -- unless it is a presigned URL's signature, valid for its own file only: then a file that
cannot be read without it says so and what to do.  The servers are local: ``tests/servers.py``'s
FaultServer with a gate deciding each request's answer, and ``python -m http.server``."""
import hashlib
import json
import os
import socket
import urllib.parse

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io.remote import HttpOptions
from codec.tools.cli import EXIT_SERVER_LIMITATION, main

from .servers import FaultServer, PlainHttp, _Handler
from .test_sharded import hf_checkpoint

pytestmark = pytest.mark.timeout(300)

T = {f"layer.{i}.w": (np.arange(3000, dtype=np.float32) + i).reshape(30, 100) for i in range(4)}
SHARD = T["layer.0.w"].nbytes
INDEX = "ck/model.safetensors.index.json"
THIRD = "model-00003-of-00004.safetensors"
SPLIT = "g/m-00001-of-00004.gguf"
#: quick to give up: the failures below are retried once
QUICK = HttpOptions(retries=1, backoff=0.01, read_timeout=1.0, head_timeout=1.0, connect_timeout=1.0)


class _Gated(_Handler):
    """FaultServer's handler, every request first put to ``server.gate(path, query)``: None
    serves the file (Range requests answered), "whole" serves it whole (a server without Range
    requests), a number answers that status, "close" closes the connection without an answer,
    "mute" never answers."""

    def do_GET(self, head=False):
        u = urllib.parse.urlsplit(self.path)
        rel = urllib.parse.unquote(u.path).lstrip("/").partition("/")[2]
        what = self.server.gate(rel, urllib.parse.parse_qs(u.query))
        with self.server.lock:
            self.server.asked.append((rel, u.query))
        if what is None:
            return super().do_GET(head)
        if what == "whole":
            with open(os.path.join(self.server.root, *rel.split("/")), "rb") as f:
                return self._reply("ok", rel, 200, f.read(), head)
        if what == "close":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if what == "mute":
            while not self.server.stopping.wait(0.05):
                pass
            self.close_connection = True
            return
        self._reply("ok", rel, what, b"refused\n", head)


class Gated(FaultServer):
    def __init__(self, root):
        super().__init__(root)
        self.RequestHandlerClass = _Gated
        self.gate = lambda rel, query: None
        self.asked = []

    def at(self, rel: str) -> str:
        return f"{self.url}/ok/{rel}"


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    d = tmp_path_factory.mktemp("remote-errors")
    hf_checkpoint(d / "ck", [{k: a} for k, a in T.items()])
    (d / "g").mkdir()
    codec.write(str(d / SPLIT.replace("-00001-of-00004", "")), T, max_shard_size=SHARD + 1000)
    assert len(os.listdir(d / "g")) == 4
    with Gated(d) as srv:
        yield d, srv


@pytest.fixture
def srv(www):
    s = www[1]
    yield s
    s.gate = lambda rel, query: None
    s.asked.clear()


def _rules(rep) -> list[str]:
    return [str(v.rule) for v in rep.violations]


def test_a_file_the_server_fails_to_give_is_that_failure_only_404_and_410_are_missing(srv):
    url = srv.at(INDEX)
    for answer in (500, "close", "mute", 403):
        srv.gate = lambda rel, q, answer=answer: answer if rel.endswith(THIRD) else None
        with pytest.raises(E.RemoteError) as e:
            codec.open(url, http=QUICK)
        assert e.value.rule == "HTTP-REQUEST" and e.value.source == srv.at(f"ck/{THIRD}"), (answer, str(e.value))
        assert "not found" not in e.value.message and "no such file" not in e.value.message
        if answer in (500, 403):
            assert f"HTTP {answer}" in e.value.message, e.value.message
        rep = codec.validate(url, http=QUICK)
        assert not rep.ok and "SAFETENSORS-SHARD-MISSING" not in _rules(rep) and "HTTP-REQUEST" in _rules(rep), \
            (answer, _rules(rep))
    for answer in (404, 410):  # (the server's "not there": the local rule of a missing file)
        srv.gate = lambda rel, q, answer=answer: answer if rel.endswith(THIRD) else None
        assert _rules(codec.validate(url, http=QUICK)) == ["SAFETENSORS-SHARD-MISSING"], answer
    srv.gate = lambda rel, q: 500 if rel.endswith("m-00003-of-00004.gguf") else None  # (a split GGUF model too)
    rep = codec.validate(srv.at(SPLIT), http=QUICK)
    assert "GGUF-SPLIT-MISSING" not in _rules(rep) and "HTTP-REQUEST" in _rules(rep), _rules(rep)


def test_the_cli_says_the_servers_failure_not_a_missing_file(srv, capsys):
    srv.gate = lambda rel, q: 500 if rel.endswith(THIRD) else None
    assert main(["inspect", srv.at(INDEX)]) == 1
    err = capsys.readouterr().err
    assert "HTTP 500" in err and "HTTP-REQUEST" in err and "no such file" not in err, err
    assert main(["validate", "--json", srv.at(INDEX)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [v["rule"] for v in doc["violations"]] == ["HTTP-REQUEST"], doc["violations"]
    assert doc["violations"][0]["kind"] == "RemoteError" and "HTTP 500" in doc["violations"][0]["message"]


def test_an_object_store_failure_is_not_a_missing_file(tmp_path, monkeypatch):
    """memory:// (an fsspec filesystem): a shard whose lookup fails otherwise than "not found"."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem
    root = "memory://remote-errors-ck"
    fs = fsspec.filesystem("memory")
    hf_checkpoint(tmp_path / "ck", [{k: a} for k, a in T.items()])
    for n in os.listdir(tmp_path / "ck"):
        fs.pipe_file(f"/remote-errors-ck/{n}", (tmp_path / "ck" / n).read_bytes())
    try:
        info = MemoryFileSystem.info
        for exc, said in ((PermissionError, "access refused"), (ConnectionError, "ConnectionError")):
            def failing(self, path, exc=exc, **kw):
                if path.endswith(THIRD):
                    raise exc("refused by the test")
                return info(self, path, **kw)
            monkeypatch.setattr(MemoryFileSystem, "info", failing)
            with pytest.raises(E.RemoteError) as e:
                codec.open(f"{root}/model.safetensors.index.json")
            assert said in e.value.message and e.value.rule == "HTTP-REQUEST", str(e.value)
        monkeypatch.setattr(MemoryFileSystem, "info", info)
        fs.rm_file(f"/remote-errors-ck/{THIRD}")
        with pytest.raises(E.StructureError) as e:
            codec.open(f"{root}/model.safetensors.index.json")
        assert e.value.rule == "SAFETENSORS-SHARD-MISSING"
    finally:
        fs.rm("/remote-errors-ck", recursive=True)


def test_a_server_without_range_requests_exits_4_in_every_command(www, tmp_path, capsys):
    d, _ = www
    with PlainHttp(d) as plain:
        for name in (SPLIT, INDEX):
            url = f"{plain.url}/{name}"
            for argv in (["inspect", url], ["validate", url], ["fetch-tensor", url, "layer.1.w", str(tmp_path / "t")],
                         ["inspect", "--json", url]):
                assert main(argv) == EXIT_SERVER_LIMITATION == 4, argv
                said = capsys.readouterr()
                assert "does not support Range requests" in said.err + said.out, (argv, said)
        assert main(["inspect", f"{plain.url}/{SPLIT}", f"{plain.url}/{INDEX}"]) == 4
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"? {plain.url}/{SPLIT}: not read, a limitation of the server"), out
        assert out[-1] == "2 files: 2 not read (server limitation)", out
    assert not (tmp_path / "t").exists()


def test_the_index_urls_query_goes_with_every_file_beside_it(srv, tmp_path):
    srv.gate = lambda rel, q: None if q.get("token") == ["s3cret"] else 403
    for name in (INDEX, SPLIT):
        url = srv.at(name) + "?download=true&token=s3cret"
        with codec.open(url) as r:
            assert r.tensor("layer.2.w").tobytes() == T["layer.2.w"].tobytes()
        assert codec.validate(url).ok
        assert main(["inspect", url]) == 0
    assert {q for _, q in srv.asked} == {"download=true&token=s3cret"}
    out = codec.mirror(srv.at(INDEX) + "?token=s3cret", str(tmp_path / "copy"))
    assert sorted(os.listdir(tmp_path / "copy")) == [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)] \
        + ["model.safetensors.index.json"]
    got = codec.load(str(out))
    assert all(got[k].tobytes() == a.tobytes() for k, a in T.items())


def _signed(rel: str) -> str:
    return hashlib.sha256(rel.encode()).hexdigest()[:16]


def test_a_presigned_urls_signature_is_not_sent_for_other_files_and_their_failure_says_why(srv, capsys):
    # (each file readable only with its own signature, as a private bucket's presigned URLs are)
    srv.gate = lambda rel, q: None if q.get("X-Amz-Signature") == [_signed(rel)] else 403
    for name, other in ((INDEX, THIRD), (SPLIT, "m-00002-of-00004.gguf")):
        url = srv.at(name) + f"?X-Amz-Credential=k&X-Amz-Signature={_signed(name)}"
        with pytest.raises(E.RemoteError) as e:
            codec.open(url)
        msg = str(e.value)
        assert "HTTP 403" in msg and "presigned (X-Amz-Signature)" in msg and "valid for its own file only" in msg \
            and "s3://" in msg, msg
        assert main(["inspect", url]) == 1
        assert "presigned" in capsys.readouterr().err
        assert any(rel.endswith(other) and q == "" for rel, q in srv.asked), srv.asked
        assert all(q == "" or rel == name for rel, q in srv.asked), srv.asked  # (never sent elsewhere)
        srv.asked.clear()
    srv.gate = lambda rel, q: 404 if rel.endswith(THIRD) else None  # (not there without it: said why too)
    url = srv.at(INDEX) + f"?X-Amz-Signature={_signed(INDEX)}"
    with pytest.raises(E.RemoteError, match="HTTP 404.*presigned"):
        codec.open(url)
    srv.gate = lambda rel, q: None  # (a bucket that serves the other files without one: read)
    with codec.open(url) as r:
        assert r.tensor("layer.3.w").tobytes() == T["layer.3.w"].tobytes()


def test_which_queries_are_per_object_signatures():
    from codec.io.store import signature_of, with_shared_query
    s3 = "https://b.s3.amazonaws.com/m/x.gguf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab12"
    assert signature_of(s3) == "X-Amz-Signature"
    assert signature_of("https://storage.googleapis.com/b/x.gguf?X-Goog-Signature=1") == "X-Goog-Signature"
    assert signature_of("https://d.cloudfront.net/x.gguf?Expires=1&Signature=a&Key-Pair-Id=K") == "Signature"
    blob = "https://a.blob.core.windows.net/c/x.gguf?sv=2022-11-02&sp=r&sig=abc"
    assert signature_of(blob + "&sr=b") == "sig"
    for shared in ("&sr=c", "&sr=d", "&srt=sco"):  # (a SAS for a container, a directory, an account)
        assert signature_of(blob + shared) is None
        assert with_shared_query(blob + shared, "https://a.blob.core.windows.net/c/y.gguf").endswith(shared)
    for plain in ("https://huggingface.co/r/resolve/main/x.gguf?download=true", "https://h/x.gguf", "s3://b/x.gguf"):
        assert signature_of(plain) is None
    assert with_shared_query("https://h/m/x.json?download=true", "https://h/m/y.bin") == "https://h/m/y.bin?download=true"
    assert with_shared_query(s3, "https://b.s3.amazonaws.com/m/y.bin") == "https://b.s3.amazonaws.com/m/y.bin"
    assert with_shared_query("s3://b/m/x.json?versionId=1", "s3://b/m/y.bin") == "s3://b/m/y.bin"


def test_a_filesystem_that_cannot_connect_when_made_is_a_remote_error_naming_the_url():
    """fsspec's FTP connects when its filesystem is made: the refusal names the URL (it was a
    bare "Connection refused", from an OSError no one caught)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (closed when the test connects: nothing listens there)
    url = f"ftp://127.0.0.1:{port}/zoo/m.mag"
    with pytest.raises(codec.errors.RemoteError) as e:
        codec.open(url)
    assert url in str(e.value) and e.value.rule == "HTTP-REQUEST" and "cannot connect" in str(e.value)
