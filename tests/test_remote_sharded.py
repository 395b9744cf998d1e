"""A model in several files at a URL (issue 33 §1, §2 on issue 32 §4): a sharded Hugging Face
checkpoint and a split GGUF model open from their index / first split over HTTP (nginx) and S3
(moto), each file read as a remote single file when first needed -- one tensor pulls that
shard's header and the tensor's range, not the other shards -- with the local rules for part
names that leave the folder and missing files; validate --full, load and convert copy the
files here first; mirror copies them whole, the index last."""
import json
import os

import numpy as np
import pytest

import codec
from codec.tools.cli import main

from .servers import Nginx, PlainHttp
from .test_sharded import hf_checkpoint

pytestmark = pytest.mark.timeout(300)

T = {f"layer.{i}.w": (np.arange(3000, dtype=np.float32) + i).reshape(30, 100) for i in range(4)}
SHARD = T["layer.0.w"].nbytes


def _checkpoint(d) -> str:
    """Four shards, a tensor in each; a copy whose index names a shard outside its folder; a
    copy with its third shard missing."""
    index = hf_checkpoint(d / "ok", [{k: a} for k, a in T.items()])
    for case in ("escape", "elsewhere", "missing"):
        hf_checkpoint(d / case, [{k: a} for k, a in T.items()])
    for case, name in (("escape", "../ok/model-00004-of-00004.safetensors"),
                       ("elsewhere", "http://127.0.0.1:9/model-00004-of-00004.safetensors")):
        doc = json.loads((d / case / "model.safetensors.index.json").read_text())
        doc["weight_map"]["layer.3.w"] = name
        (d / case / "model.safetensors.index.json").write_text(json.dumps(doc))
    os.remove(d / "missing" / "model-00003-of-00004.safetensors")
    return index


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    _checkpoint(d)
    for g in ("g", "gmissing"):
        (d / g).mkdir()
        codec.write(str(d / g / "m.gguf"), T, max_shard_size=SHARD + 1000)
    os.remove(d / "gmissing" / "m-00003-of-00004.gguf")
    with Nginx(d) as ngx:
        yield d, ngx


def _served(ngx, mark):
    return [e for e in ngx.since(mark) if e["status"] in (200, 206)]


def test_one_tensor_of_a_sharded_checkpoint_over_http_pulls_only_its_shard(www):
    d, ngx = www
    mark = ngx.mark()
    with codec.open(f"{ngx.url}/ok/model.safetensors.index.json") as r:
        assert sorted(r.tensors) == sorted(T)
        assert r.tensor("layer.2.w").tobytes() == T["layer.2.w"].tobytes()
        assert r.tensors["layer.2.w"].extra["file"] == "model-00003-of-00004.safetensors"
    got = _served(ngx, mark)
    assert sum(e["bytes"] for e in got) < SHARD + 2000  # (the index, one header, one tensor)
    per: dict = {}
    for e in got:
        per[e["uri"].rsplit("/", 1)[1]] = per.get(e["uri"].rsplit("/", 1)[1], 0) + e["bytes"]
    assert per.pop("model-00003-of-00004.safetensors") >= SHARD
    per.pop("model.safetensors.index.json")
    assert all(n <= 1 for n in per.values()), per  # (the other shards: only asked whether they exist)


def test_load_validate_full_and_convert_of_a_remote_checkpoint_equal_local(www, tmp_path):
    d, ngx = www
    url = f"{ngx.url}/ok/model.safetensors.index.json"
    got = codec.load(url)
    assert sorted(got) == sorted(T) and all(got[k].tobytes() == a.tobytes() for k, a in T.items())
    rep = codec.validate(url)
    assert rep.ok and any("no hashes" in n for n in rep.notes), rep.notes
    full = codec.validate(url, full=True)
    assert full.ok and full.level == "full" and full.source == url
    assert main(["validate", "--full", url]) == 0
    assert main(["convert", url, str(tmp_path / "m.aero")]) == 0
    back = codec.load(str(tmp_path / "m.aero"))
    assert all(back[k].tobytes() == a.tobytes() for k, a in T.items())


def test_a_split_gguf_over_http_opens_as_one_model(www):
    d, ngx = www
    first = sorted(os.listdir(d / "g"))[0]
    assert len(os.listdir(d / "g")) == 4
    with codec.open(f"{ngx.url}/g/{first}") as r:
        assert r.tensor("layer.1.w").tobytes() == T["layer.1.w"].tobytes()
    got = codec.load(f"{ngx.url}/g/{first}")
    assert all(got[k].tobytes() == a.tobytes() for k, a in T.items())
    assert codec.validate(f"{ngx.url}/g/{first}", full=True).ok


@pytest.mark.parametrize("case,rule", [("escape/model.safetensors.index.json", "SAFETENSORS-SHARD-PATH"),
                                       ("elsewhere/model.safetensors.index.json", "SAFETENSORS-SHARD-PATH"),
                                       ("missing/model.safetensors.index.json", "SAFETENSORS-SHARD-MISSING"),
                                       ("gmissing/m-00001-of-00004.gguf", "GGUF-SPLIT-MISSING")])
def test_a_part_leaving_the_folder_or_missing_is_the_local_rule(www, case, rule):
    d, ngx = www
    local = codec.validate(str(d / case))  # (here a URL is a relative name: a file that is not there)
    assert rule in [str(v.rule) for v in local.violations] or (case.startswith("elsewhere") and not local.ok)
    for full in (False, True):
        rep = codec.validate(f"{ngx.url}/{case}", full=full)
        assert rule in [str(v.rule) for v in rep.violations] and not rep.ok, (full, rep.violations)
    with pytest.raises(codec.FormatError) as e:
        codec.open(f"{ngx.url}/{case}")
    assert e.value.rule == rule
    assert main(["validate", f"{ngx.url}/{case}"]) == 1


def test_mirror_of_remote_shards_to_a_folder_and_to_s3(www, s3, bucket, tmp_path):
    d, ngx = www
    out = codec.mirror(f"{ngx.url}/ok/model.safetensors.index.json", str(tmp_path / "here"))
    assert sorted(os.listdir(tmp_path / "here")) == sorted(os.listdir(d / "ok"))
    assert all((tmp_path / "here" / n).read_bytes() == (d / "ok" / n).read_bytes() for n in os.listdir(d / "ok"))
    assert main(["mirror", f"{ngx.url}/ok/model.safetensors.index.json", str(tmp_path / "cli")]) == 0
    assert sorted(os.listdir(tmp_path / "cli")) == sorted(os.listdir(d / "ok"))
    mark = s3.mark()
    out = codec.mirror(f"{ngx.url}/ok/model.safetensors.index.json", f"s3://{bucket}/m",
                       storage_options=s3.storage_options)
    assert out == f"s3://{bucket}/m/model.safetensors.index.json"
    final = [p.split("?")[0].rsplit("/", 1)[1] for m, p, _ in s3.since(mark)
             if m == "PUT" and p.split("?")[0].startswith(f"/{bucket}/m/")]
    assert final[-1] == "model.safetensors.index.json", final
    with codec.open(out, storage_options=s3.storage_options) as r:
        assert r.tensor("layer.3.w").tobytes() == T["layer.3.w"].tobytes()
    got = codec.load(out, storage_options=s3.storage_options)
    assert all(got[k].tobytes() == a.tobytes() for k, a in T.items())
    assert codec.validate(out, full=True, storage_options=s3.storage_options).ok
    first = sorted(os.listdir(d / "g"))[0]
    g = codec.mirror(f"{ngx.url}/g/{first}", f"s3://{bucket}/g/", storage_options=s3.storage_options)
    back = codec.mirror(g, str(tmp_path / "g"), storage_options=s3.storage_options)
    assert sorted(os.listdir(tmp_path / "g")) == sorted(os.listdir(d / "g"))
    got = codec.load(str(back))
    assert all(got[k].tobytes() == a.tobytes() for k, a in T.items())


def test_a_remote_shard_tensor_over_the_remote_bound_is_refused_before_it_is_fetched(www, monkeypatch):
    from codec.formats import multifile
    d, ngx = www
    monkeypatch.setattr(multifile, "MAX_TENSOR_BYTES", SHARD - 1)
    with codec.open(f"{ngx.url}/ok/model.safetensors.index.json") as r, pytest.raises(codec.errors.LimitError) as e:
        r.tensor("layer.1.w")
    assert e.value.rule == "HTTP-TENSOR-LIMIT" and "model-00002-of-00004.safetensors" in e.value.source


def test_options_for_a_url_given_for_a_local_model_are_refused(www):
    d, _ = www
    with pytest.raises(codec.UsageError, match="storage_options is for a model at a URL"):
        codec.open(str(d / "ok" / "model.safetensors.index.json"), storage_options={"anon": True})


def test_a_remote_index_over_its_bound_is_the_local_finding(www, monkeypatch):
    from codec.schemas import safetensors as S
    d, ngx = www
    monkeypatch.setattr(S, "MAX_INDEX_BYTES", 100)
    local = codec.validate(str(d / "ok" / "model.safetensors.index.json"))
    rep = codec.validate(f"{ngx.url}/ok/model.safetensors.index.json")
    assert [str(v.rule) for v in rep.violations] == [str(v.rule) for v in local.violations] == ["SAFETENSORS-INDEX"]


def test_whole_model_work_on_a_server_without_range_requests_streams_each_file_once(www, tmp_path):
    d, _ = www
    first = sorted(os.listdir(d / "g"))[0]
    with PlainHttp(d) as plain:
        for name in ("ok/model.safetensors.index.json", f"g/{first}"):
            url = f"{plain.url}/{name}"
            got = codec.load(url)
            assert sorted(got) == sorted(T) and all(got[k].tobytes() == a.tobytes() for k, a in T.items()), name
            assert codec.validate(url, full=True).ok, name
            assert main(["validate", url]) == 4  # (reading in ranges: the server's limitation, named)
        out = codec.mirror(f"{plain.url}/ok/model.safetensors.index.json", str(tmp_path / "copy"))
    assert sorted(os.listdir(tmp_path / "copy")) == sorted(os.listdir(d / "ok"))
    assert codec.validate(str(out), full=True).ok
