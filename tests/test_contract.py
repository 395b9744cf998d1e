"""The library's contract as a new user meets it: truthy reports, readers as mappings, reprs,
validate of a file that is no model, write(format="aeroset"), the version."""
import subprocess
import sys

import numpy as np
import pytest

import codec

T = {"a": np.arange(4, dtype=np.float32), "b": np.ones((2, 3), np.int32)}


@pytest.fixture(params=["aero", "mag", "oinf", "aeroset"])
def model(request, tmp_path):
    p = tmp_path / ("set" if request.param == "aeroset" else f"m.{request.param}")
    codec.write(p, T, format=request.param)
    return p


def test_a_report_is_truthy_exactly_when_ok(model, tmp_path):
    rep = codec.validate(model, full=True)
    assert rep.ok and bool(rep) and "ok" in repr(rep)
    junk = tmp_path / "notes.txt"
    junk.write_text("not a model\n")
    bad = codec.validate(junk)  # any existing path gives a report
    assert not bad.ok and not bad and "NOT ok" in repr(bad)
    assert [v.rule for v in bad.violations] == ["DETECT"]


def test_a_reader_is_a_read_only_mapping_of_names(model):
    with codec.open(model) as r:
        assert list(r) == list(r.tensors) == sorted(T) and len(r) == 2 and "a" in r and "zz" not in r
        assert set(r.keys()) == set(T)
        got = dict(r.items())
        assert all(np.array_equal(got[k], T[k]) for k in T)
        assert [v.shape for v in r.values()] == [T[k].shape for k in r]
        assert np.array_equal(r["b"], T["b"])
        text = repr(r)
        assert r.format in text and "2 tensors" in text and str(model.name) in text
        assert repr(r.tensors["a"]).startswith("TensorInfo(name='a'")
    assert "closed" in repr(r)


def test_write_aeroset_through_the_common_entry_point(tmp_path):
    out = codec.write(tmp_path / "s", T, format="aeroset")
    with codec.open(out) as r:
        assert sorted(r) == sorted(T)
    out2 = codec.write(tmp_path / "t" / "model.aeroset.json", T)
    assert (tmp_path / "t" / "model.aeroset.json").is_file() and out2 == str(tmp_path / "t")


def test_version():
    assert codec.__version__ and codec.__version__[0].isdigit()
    r = subprocess.run([sys.executable, "-m", "codec.tools.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"modelcodec {codec.__version__}"


def test_one_metadata_vocabulary_and_conflicts_refused(tmp_path):
    """model_name=/architecture= are shorthands for the metadata keys of the same names, in
    every writer that takes them; the same key given both ways, differently, is refused."""
    from codec.formats.aeroset import write_aeroset
    w = {"w": np.zeros(2, np.float32)}
    for fmt, target in (("aero", tmp_path / "c.aero"), ("aeroset", tmp_path / "cset")):
        with pytest.raises(codec.UsageError, match="conflicts with metadata"):
            codec.write(target, w, format=fmt, model_name="a", metadata={"model_name": "b"})
    codec.write(tmp_path / "m.aero", w, format="aero", metadata={"model_name": "tiny", "license": "mit"})
    with codec.open(tmp_path / "m.aero") as r:
        assert r.metadata["model_name"] == "tiny" and r.metadata["license"] == "mit"
        assert r.manifest["model"]["name"] == "tiny"
    write_aeroset(tmp_path / "set", w, model_name="tiny", metadata={"license": "mit", "model_name": "tiny"})
    with codec.open(tmp_path / "set") as s:
        assert s.metadata == {"model_name": "tiny", "license": "mit"}  # (no key it was not given)
        # (the metadata is held once, by index.aero; each part names the model)
        assert s.part(0).metadata == {"model_name": "tiny"}


def test_an_error_renders_its_current_fields_in_str_repr_and_pickle():
    import pickle
    from codec import errors as E
    e = E.LimitError("AERO", 0x10, "toc[1].size", "AERO-X", "too big")
    assert str(e) == "AERO toc[1].size @ 0x10: too big [AERO-X]"
    e.with_source("m.aero")  # fields set after construction show in every rendering
    assert str(e) == "m.aero: AERO toc[1].size @ 0x10: too big [AERO-X]"
    assert repr(e) == f"LimitError({str(e)!r})"
    e.absorb([E.TruncatedError("AERO", 0x20, "toc[2]", "AERO-T", "cut")])
    assert str(e).endswith("too big [+1 more finding past the end of the data that follows from it] [AERO-X]")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is E.LimitError and str(back).startswith("m.aero: AERO toc[1].size @ 0x10: too big")
    with pytest.raises(E.LimitError, match=r"^m\.aero: AERO toc\[1\]"):
        raise e
