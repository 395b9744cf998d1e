"""Many files at once (issue 33 §4): `validate` and `inspect` on several paths, URLs and glob
patterns (local and on a real S3 API server), worked through by --jobs threads, one line per
file and a summary, --json one object per file per line; readers, reports and errors pickle,
and the dask.distributed recipe of the object-storage guide runs on a LocalCluster of two worker processes."""
import json
import os
import pickle
import subprocess
import sys
import uuid

import numpy as np
import pytest
from jsonschema import Draft202012Validator

import codec
from codec import errors as E
from codec.tools.cli import main

from .conftest import ROOT
from .servers import PlainHttp

pytestmark = pytest.mark.timeout(300)
SCHEMA = json.loads((ROOT / "docs" / "json" / "cli.schema.json").read_text())


def _zoo(d):
    """Three good models (one in a sub-folder) and a cut one."""
    (d / "sub").mkdir()
    codec.write(str(d / "a.aero"), {"w": np.arange(16, dtype=np.float32)}, control_integrity=True)
    codec.write(str(d / "sub" / "b.aero"), {"w": np.ones((2, 3), np.int16)})
    codec.write(str(d / "c.safetensors"), {"x": np.zeros(5, np.float32)})
    (d / "bad.aero").write_bytes((d / "a.aero").read_bytes()[:40])
    return d


def test_validate_many_files_one_bad_one_line_each_and_a_summary(tmp_path, capsys, monkeypatch):
    _zoo(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["validate", "a.aero", "bad.aero", "sub/b.aero", "c.safetensors"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert len(out) == 5, out
    assert out[0] == "✓ a.aero: AERO structure check passed"
    assert out[1].startswith("✗ bad.aero: 1 error in the structure check: ") and "AERO-TRUNCATED" in out[1]
    assert out[2] == "✓ sub/b.aero: AERO structure check passed"
    assert out[3] == "✓ c.safetensors: SAFETENSORS structure check passed"
    assert out[4] == "4 files: 3 ok, 1 bad"
    assert main(["validate", "--full", "a.aero", "sub/b.aero"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 files: 2 ok"
    # one path: today's output (every line of the report), not the one-line form
    assert main(["validate", "a.aero"]) == 0
    assert capsys.readouterr().out.startswith("✓ a.aero: AERO structure check passed: structure: header")


def test_local_glob_patterns_recursive_and_one_matching_nothing(tmp_path, capsys, monkeypatch):
    _zoo(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "**.aero"]) == 1  # any depth, the bad one too
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:-1]] == ["✓ a.aero", "✗ bad.aero", "✓ sub/b.aero"]
    assert out[-1] == "3 files: 2 ok, 1 bad"
    assert main(["inspect", str(tmp_path / "*.aero"), "nothing*.gguf"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"✓ {tmp_path / 'a.aero'}: AERO 0.1, 1 tensor (64 B)"
    assert out[1].startswith(f"✗ {tmp_path / 'bad.aero'}: ") and "AERO-TRUNCATED" in out[1]
    assert out[2] == "✗ nothing*.gguf: no file matches the pattern"
    assert out[3] == "3 files: 1 ok, 2 unreadable"
    assert main(["inspect", "sub/*.aero", "c.safetensors"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 files: 2 ok"
    assert main(["inspect", "--html", "r.html", "*.aero"]) == 1  # (one file's report)
    assert "--html" in capsys.readouterr().err and not os.path.exists("r.html")


def test_jobs_give_the_same_lines_in_the_order_given(tmp_path, capsys):
    for i in range(12):
        codec.write(str(tmp_path / f"m{i:02}.aero"), {f"t{j}": np.full(50, i + j, np.float32) for j in range(4)})
    (tmp_path / "m05.aero").write_bytes(b"AERO" * 30)
    outs = []
    for jobs in ("1", "4"):
        assert main(["validate", "--full", "--jobs", jobs, str(tmp_path / "*.aero")]) == 1
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    lines = outs[0].splitlines()
    assert [line[2:].split(":")[0] for line in lines[:-1]] == [str(tmp_path / f"m{i:02}.aero") for i in range(12)]
    assert [line[0] for line in lines[:-1]].count("✗") == 1 and lines[5].startswith("✗")
    assert main(["validate", "--jobs", "0", str(tmp_path / "m00.aero"), str(tmp_path / "m01.aero")]) == 1
    assert "--jobs" in capsys.readouterr().err


def _conforms(doc: dict) -> None:
    v = Draft202012Validator(SCHEMA)
    errors = list(v.iter_errors(doc))
    assert not errors, [e.message for e in errors[:3]]


def test_json_gives_one_object_per_file_per_line(tmp_path, capsys):
    d = _zoo(tmp_path)
    files = [str(d / "a.aero"), str(d / "bad.aero"), str(d / "c.safetensors"), str(d / "none.aero")]
    assert main(["validate", "--json", *files]) == 1
    captured = capsys.readouterr()
    docs = [json.loads(line) for line in captured.out.splitlines()]
    assert [doc["source"] for doc in docs] == files
    assert [doc.get("ok") for doc in docs] == [True, False, True, None]
    assert docs[3]["error"]["kind"] == "UsageError" and "No such file" in docs[3]["error"]["message"]
    assert captured.err.strip() == "4 files: 2 ok, 1 bad, 1 unreadable"
    for doc in docs:
        _conforms(doc)
    assert main(["inspect", "--json", *files]) == 1
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [doc["source"] for doc in docs] == files
    assert [t["name"] for t in docs[0]["tensors"]] == ["w"] and docs[2]["format"] == "safetensors"
    assert docs[1]["error"]["rule"] == "AERO-TRUNCATED"
    for doc in docs:
        _conforms(doc)


def test_mixed_outcomes_server_limitation_and_nothing_to_check(tmp_path, capsys):
    d = _zoo(tmp_path)
    with PlainHttp(d) as plain:  # (no Range requests: a structure check cannot run there)
        code = main(["validate", str(d / "a.aero"), f"{plain.url}/a.aero"])
        out = capsys.readouterr().out.splitlines()
        assert code == 4, out
        assert out[1].startswith(f"? {plain.url}/a.aero: not checked, a limitation of the server")
        assert out[2] == "2 files: 1 ok, 1 not checked (server limitation)"
        assert main(["validate", str(d / "bad.aero"), f"{plain.url}/a.aero"]) == 1  # bad data wins
        capsys.readouterr()
    assert main(["validate", "--control", str(d / "c.safetensors"), str(d / "a.aero")]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"- {d / 'c.safetensors'}: no control integrity to check"
    assert out[-1] == "2 files: 1 ok, 1 with nothing to check"


def test_readers_reports_tensor_infos_and_errors_pickle(tmp_path):
    p = str(_zoo(tmp_path) / "a.aero")
    with codec.open(p) as r:
        again = pickle.loads(pickle.dumps(r))  # a reader pickles as its path and options: reopened
        with again:
            assert again.source == p and again.tensors["w"] == r.tensors["w"]
            assert again.tensor("w").tobytes() == np.arange(16, dtype=np.float32).tobytes()
        assert pickle.loads(pickle.dumps(r.tensors["w"])) == r.tensors["w"]
    rep = codec.validate(str(tmp_path / "bad.aero"))
    back = pickle.loads(pickle.dumps(rep))
    assert back.as_dict() == rep.as_dict() and isinstance(back.violations[0], E.TruncatedError)
    with codec.open((tmp_path / "a.aero").read_bytes()) as r, pytest.raises(E.UsageError, match="send the URL"):
        pickle.dumps(r)
    codec.write(str(tmp_path / "set" / "m.aeroset.json"), {"t": np.arange(3, dtype=np.int32)})
    with codec.open(str(tmp_path / "set"), cache=False) as r, pickle.loads(pickle.dumps(r)) as again:
        assert again.format == "aeroset" and again.tensor("t").tolist() == [0, 1, 2]
    from codec.io.remote import Http
    with codec.open(str(tmp_path / "set"), http=Http()) as r, pytest.raises(E.UsageError, match="an option"):
        pickle.dumps(r)  # (an option that does not pickle: a UsageError, not pickle's TypeError)


def _gguf_zoo(s3, tmp_path):
    bucket = f"b{uuid.uuid4().hex[:12]}"
    fs = s3.fs()
    fs.mkdir(bucket)
    for key in ("zoo/a.gguf", "zoo/deep/er/b.gguf", "zoo/c.aero", "other/d.gguf"):
        local = tmp_path / key.replace("/", "_")
        codec.write(str(local), {"t": np.arange(8, dtype=np.float32)})
        fs.put_file(str(local), f"{bucket}/{key}")
    fs.pipe(f"{bucket}/zoo/bad.gguf", b"GGUF\x03\x00\x00\x00")
    return bucket


def test_a_glob_on_s3_validates_every_match_through_the_standard_environment(s3, tmp_path):
    bucket = _gguf_zoo(s3, tmp_path)
    env = dict(os.environ, **s3.env, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "codec", "validate", "--jobs", "2", f"s3://{bucket}/zoo/**.gguf"],
                         env=env, capture_output=True, text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert out.returncode == 1, out
    assert [line.split(": ")[0] for line in lines[:-1]] == [
        f"✓ s3://{bucket}/zoo/a.gguf", f"✗ s3://{bucket}/zoo/bad.gguf", f"✓ s3://{bucket}/zoo/deep/er/b.gguf"]
    assert lines[-1] == "3 files: 2 ok, 1 bad"
    out = subprocess.run([sys.executable, "-m", "codec", "inspect", "--json", f"s3://{bucket}/zoo/*.aero",
                          f"s3://{bucket}/*/a.gguf"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(doc["source"], doc["format"]) for doc in docs] == [(f"s3://{bucket}/zoo/c.aero", "aero"),
                                                                (f"s3://{bucket}/zoo/a.gguf", "gguf")]


def _names(reader) -> list:
    with reader:
        return sorted(reader.tensors)


def test_the_dask_recipe_validates_a_bucket_on_two_worker_processes(s3, tmp_path):
    distributed = pytest.importorskip("distributed")  # (the test extra has it)
    bucket = _gguf_zoo(s3, tmp_path)
    opts = s3.storage_options
    import dask
    with dask.config.set({"temporary-directory": str(tmp_path / "dask")}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                     worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        urls = [f"s3://{bucket}/{k}" for k in ("zoo/a.gguf", "zoo/bad.gguf", "zoo/deep/er/b.gguf", "zoo/c.aero")]
        reports = client.gather(client.map(codec.validate, urls, storage_options=opts))
        assert [r.source for r in reports] == urls
        assert [r.ok for r in reports] == [True, False, True, True]
        assert {r.format for r in reports} == {"gguf", "aero"}
        pids = client.run(os.getpid)
        assert len(pids) == 2 and os.getpid() not in pids.values()
        with codec.open(urls[0], storage_options=opts) as r:  # a reader sent to a worker reopens its URL there
            assert client.submit(_names, r).result() == ["t"]


def test_patterns_on_memory_storage_match_files_at_any_depth_not_folders(capsys):
    from codec.io.open_store import expand
    root = f"memory://zoo{uuid.uuid4().hex[:8]}"
    for key in ("a.aero", "s/b.aero", "s/t/c.aero", "s/d.gguf"):
        codec.write(f"{root}/{key}", {"w": np.ones(2, np.float32)})
    assert [u.split("/zoo", 1)[1].split("/", 1)[1] for u, _ in expand([f"{root}/**.aero"])] == [
        "a.aero", "s/b.aero", "s/t/c.aero"]
    assert [u.rsplit("/", 1)[1] for u, _ in expand([f"{root}/*"])] == ["a.aero"]  # (not the folder s)
    assert expand([f"{root}/*.x"]) == [(f"{root}/*.x", "no file matches the pattern")]
    assert main(["validate", f"{root}/s/**"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "3 files: 3 ok"
