"""What every kind of remote model -- a single file, a sharded checkpoint, a split GGUF model, an
AEROSET -- does alike: the set's index URL's query string goes with the files beside it as a
sharded checkpoint's does (a presigned URL's signature does not, and a refused file says why); a
server without Range requests says what to do instead (``modelcodec mirror``) whichever file of
whichever model met it; a failure of the transport is the transport's finding (format ``http``,
an ``HTTP-...`` rule) naming the file's URL, whatever the file is.  The server is
``tests/test_remote_errors.py``'s gated one (each request's answer decided by a test)."""
import os
import pickle

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.aeroset import write_aeroset
from codec.io.remote import NoRangeError
from codec.tools.cli import EXIT_SERVER_LIMITATION, main

from .test_remote_errors import INDEX, QUICK, SHARD, SPLIT, T, Gated, _signed
from .test_sharded import hf_checkpoint

pytestmark = pytest.mark.timeout(300)

SET = "set/model.aeroset.json"
ONE = "one/m.gguf"
MIRROR = "reading parts of the model needs a copy that is here (`modelcodec mirror URL DIR`"


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    d = tmp_path_factory.mktemp("remote-every-kind")
    write_aeroset(str(d / "set"), T, max_shard_bytes=SHARD + 100, max_part_shards=1)
    assert len([n for n in os.listdir(d / "set") if n.startswith("part-")]) == 4
    write_aeroset(str(d / "elsewhere"), T, max_shard_bytes=SHARD + 100, max_part_shards=1)
    hf_checkpoint(d / "ck", [{k: a} for k, a in T.items()])
    (d / "g").mkdir()
    codec.write(str(d / SPLIT.replace("-00001-of-00004", "")), T, max_shard_size=SHARD + 1000)
    (d / "one").mkdir()
    codec.write(str(d / ONE), T)
    with Gated(d) as srv:
        yield d, srv


@pytest.fixture
def srv(www, tmp_path, monkeypatch):
    monkeypatch.setenv("MODELCODEC_CACHE_DIR", str(tmp_path / "cache"))  # (a private disk cache)
    s = www[1]
    yield s
    s.gate = lambda rel, query: None
    s.asked.clear()


def _same(got) -> bool:
    return sorted(got) == sorted(T) and all(np.asarray(got[k]).tobytes() == a.tobytes() for k, a in T.items())


def test_a_sets_index_url_query_goes_with_every_file_beside_it(srv, tmp_path, capsys):
    srv.gate = lambda rel, q: None if q.get("token") == ["s3cret"] or rel.startswith("elsewhere/") else 403
    url = srv.at(SET) + "?download=true&token=s3cret"
    with codec.open(url) as r:
        assert r.tensor("layer.2.w").tobytes() == T["layer.2.w"].tobytes()
    rep = codec.validate(url, full=True)
    assert rep.ok and rep.level == "full", [str(v) for v in rep.violations]
    assert _same(codec.load(url))
    assert main(["inspect", url]) == 0 and main(["validate", url]) == 0
    capsys.readouterr()
    out = codec.mirror(url, str(tmp_path / "copy"))
    assert sorted(os.listdir(tmp_path / "copy")) == ["index.aero", "model.aeroset.json"] + [
        f"part-00{i}.aero" for i in range(4)]
    assert _same(codec.load(str(out)))
    asked = {rel for rel, _ in srv.asked}
    assert {"set/index.aero", "set/part-003.aero"} <= asked
    assert {q for _, q in srv.asked} == {"download=true&token=s3cret"}
    srv.asked.clear()
    # (the parts at another base_url -- another folder, another host -- are never sent the query)
    with codec.open(url, base_url=srv.at("elsewhere")) as r:
        assert r.tensor("layer.1.w").tobytes() == T["layer.1.w"].tobytes()
    assert all(q == "" for rel, q in srv.asked if rel.startswith("elsewhere/")) and len(srv.asked) > 1, srv.asked


def test_a_presigned_set_url_is_not_sent_with_its_parts_and_their_failure_says_why(srv, capsys):
    srv.gate = lambda rel, q: None if q.get("X-Amz-Signature") == [_signed(rel)] else 403
    url = srv.at(SET) + f"?X-Amz-Credential=k&X-Amz-Signature={_signed(SET)}"
    with pytest.raises(E.RemoteError) as e:
        codec.open(url)
    msg = str(e.value)
    assert e.value.source == srv.at("set/index.aero") and "HTTP 403" in msg, msg
    assert "presigned (X-Amz-Signature)" in msg and "valid for its own file only" in msg and "s3://" in msg, msg
    assert all(q == "" for rel, q in srv.asked if rel != SET) and any(rel == SET for rel, _ in srv.asked)
    assert main(["inspect", url]) == 1 and "presigned" in capsys.readouterr().err
    rep = codec.validate(url, full=True)
    assert not rep.ok and any("presigned" in v.message for v in rep.violations), [str(v) for v in rep.violations]
    srv.gate = lambda rel, q: None  # (a bucket that serves the other files without one: read)
    with codec.open(url) as r:
        assert r.tensor("layer.3.w").tobytes() == T["layer.3.w"].tobytes()


def test_a_server_without_range_requests_says_what_to_do_for_any_file_of_any_model(srv, tmp_path, capsys):
    """The file the model is opened by is served with ranges; a later one -- the shard, split or
    part a tensor is in -- without: its error says to mirror the model, as a single file's does."""
    cases = [(INDEX, "model-00003-of-00004.safetensors"), (SPLIT, "m-00003-of-00004.gguf"),
             (SET, "part-002.aero"), (ONE, "m.gguf")]
    for name, whole in cases:
        srv.gate = lambda rel, q, whole=whole: "whole" if rel.endswith("/" + whole) else None
        url = srv.at(name)
        try:
            with codec.open(url, http=QUICK) as r:
                r.tensor("layer.2.w")
        except NoRangeError as e:
            err = e
        else:
            raise AssertionError(f"{name}: read from a server without Range requests")
        assert err.source == srv.at(f"{name.rsplit('/', 1)[0]}/{whole}"), (name, err.source)
        assert str(err).count(MIRROR) == 1, (name, str(err))
        assert main(["fetch-tensor", url, "layer.2.w", str(tmp_path / "t.npy")]) == EXIT_SERVER_LIMITATION, name
        said = capsys.readouterr().err
        assert said.count("\n") == 1 and said.count(MIRROR) == 1, (name, said)
    assert not (tmp_path / "t.npy").exists()
    e = NoRangeError("http", 0, "", "HTTP-RANGE", "no ranges")  # (said once, also when unpickled)
    assert str(e).count(MIRROR) == 1 and str(pickle.loads(pickle.dumps(e))) == str(e)


def test_a_transport_failure_is_the_transports_naming_the_file_whatever_the_file_is(srv):
    """Format ``http`` (the rule broken is the transport's, HTTP-REQUEST), the file's URL as its
    source: the same for a file of each kind of model -- never ``gguf @ 0x0``, which would read
    as a finding in the file's bytes."""
    cases = [(INDEX, "model-00003-of-00004.safetensors"), (SPLIT, "m-00003-of-00004.gguf"),
             (SET, "part-002.aero"), (ONE, "m.gguf")]
    for name, failing in cases:
        srv.gate = lambda rel, q, failing=failing: 500 if rel.endswith("/" + failing) else None
        url, where = srv.at(name), srv.at(f"{name.rsplit('/', 1)[0]}/{failing}")
        with pytest.raises(E.RemoteError) as e:
            with codec.open(url, http=QUICK) as r:
                r.tensor("layer.2.w")
        assert (e.value.format, e.value.rule, e.value.source) == ("http", "HTTP-REQUEST", where), (name, str(e.value))
        assert str(e.value).startswith(f"{where}: HTTP @ 0x") and "HTTP 500" in str(e.value), str(e.value)
        try:
            found = codec.validate(url, http=QUICK).violations
        except E.RemoteError as x:  # (a single file that cannot be read: no report)
            found = [x]
        found = [v.as_dict() for v in found]
        said = [(v["format"], v["message"]) for v in found if v["rule"] == "HTTP-REQUEST"]
        assert said and all(f == "http" and "HTTP 500" in m for f, m in said), (name, found)
