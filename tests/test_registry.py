"""One list of formats: schemas.FORMATS names them, each format module declares its descriptor,
and detection, open/validate/write routing all go through the descriptors."""
import re
from pathlib import Path

import numpy as np
import pytest

import codec
from codec import schemas, registry


def test_every_format_has_one_descriptor_built_from_its_schema():
    names = [d.name for d in registry.formats()]
    assert names == list(schemas.FORMATS)
    for d in registry.formats():
        assert d.schema is schemas.FORMATS[d.name]
        assert d.extensions and all(e.startswith(".") for e in d.extensions)
        assert d.magic is not None or d.claims is not None or d.sniff is not None  # recognisable somehow


def test_the_engine_names_no_format():
    """No module of codec/ outside codec/formats/ names a format (nor a schema related to one,
    such as STB's glyph wiring): they work through the descriptors and the reader hooks.  (The
    HTTP transport's rules, schemas.http, are the engine's own: codec/io/remote.py reads them.)"""
    import codec.schemas.http
    names = set(schemas.FORMATS) | {m.FORMAT for m in schemas.FORMATS.values()}
    names |= {m.__name__.rpartition(".")[2] for s in schemas.FORMATS.values() for m in getattr(s, "RELATED", ())
              if m is not schemas.http}
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b", re.I)
    codec_dir = Path(codec.__file__).parent
    found = [f"{p.relative_to(codec_dir)}:{i}: {line.strip()}"
             for p in sorted(codec_dir.rglob("*.py")) if "formats" not in p.relative_to(codec_dir).parts
             for i, line in enumerate(p.read_text().splitlines(), 1) if word.search(line)]
    assert len(list(codec_dir.rglob("*.py"))) > 30 and "khanary" in names
    assert not found, found


@pytest.mark.parametrize("name", [n for n in schemas.FORMATS if getattr(schemas.FORMATS[n], "MAGIC", None)])
def test_content_detection_by_each_formats_first_bytes(name):
    d = registry.get(name)
    assert registry.detect(d.magic + bytes(16)) is d


def test_paths_a_format_claims_and_names_it_writes(tmp_path):
    assert registry.claiming(str(tmp_path)) is None                    # a directory without an index
    (tmp_path / "m.aeroset.json").write_text("{}")
    assert registry.claiming(str(tmp_path)).name == "aeroset"          # a set's directory
    assert registry.claiming("m/model.aeroset.json").name == "aeroset"
    assert registry.claiming("https://cdn.example/m.aeroset.json").name == "aeroset"
    assert registry.claiming("m.aero") is None and registry.claiming(b"AERO") is None
    d, target = registry.for_write("out/x.aeroset.json")
    assert d.name == "aeroset" and target == "out/x.aeroset.json"  # (the writer keeps the index's name)
    for name in ("aero", "mag", "oinf", "stb"):
        d, target = registry.for_write(f"x.{name.upper()}")
        assert (d.name, target) == (name, f"x.{name.upper()}")
    with pytest.raises(codec.UsageError, match="known: aero, aeroset, mag, oinf, stb, safetensors"):
        registry.for_write("x.bin")
    with pytest.raises(codec.UsageError, match="unknown format"):
        registry.get("onnx")


def test_open_validate_and_write_route_through_the_descriptors(tmp_path):
    a = {"w": np.arange(6, dtype=np.float32)}
    for name in ("aero", "mag", "oinf"):
        p = str(tmp_path / f"m.{name}")
        assert codec.write(p, a) == p
        with codec.open(p) as r:
            assert r.format == name and np.array_equal(r["w"], a["w"])
        assert codec.validate(p, full=True).ok
    p = codec.write(str(tmp_path / "set" / "model.aeroset.json"), a)
    with codec.open(p) as s:
        assert s.format == "aeroset" and np.array_equal(s["w"], a["w"])
    assert codec.validate(str(tmp_path / "set")).ok


@pytest.mark.parametrize("name", list(schemas.FORMATS))
def test_a_report_and_its_violations_name_formats_alike(tmp_path, name):
    """A format has one name in every document: the report's ``format``, each violation's and
    ``--to``'s are the registry's lower-case name (a violation names the format whose rule it
    broke: a part's inside a set); only text for people shows it in capitals."""
    import json
    import subprocess
    import sys
    d = registry.get(name)
    ext = d.extensions[0]
    t = {"0" if d.capabilities.ids else "w": np.arange(64, dtype=np.float32)}
    dst = tmp_path / f"m{ext}"
    codec.write(dst, {int(k) if d.capabilities.ids else k: v for k, v in t.items()}, format=name)
    victim = dst if dst.is_file() else max((p for p in dst.parent.rglob("*") if p.is_file()),
                                           key=lambda p: p.stat().st_size)
    data = victim.read_bytes()
    victim.write_bytes(data[:len(data) - 40])  # (cut inside the tensor bytes)
    run = subprocess.run([sys.executable, "-m", "codec", "validate", "--full", "--json", str(dst)],
                         capture_output=True, text=True)
    doc = json.loads(run.stdout)
    doc = doc.get("error", doc)
    known = set(schemas.FORMATS) | {m.__name__.rpartition(".")[2] for s in schemas.FORMATS.values()
                                    for m in getattr(s, "RELATED", ())}
    found = [doc] if "rule" in doc else doc["violations"]
    assert run.returncode == 1 and found, run.stdout
    assert "rule" in doc or doc["format"] == name
    assert all(v["format"] in known for v in found), found
    assert any(v["format"] == name or name in ("aeroset",) for v in found), found
    rep = codec.validate(dst, full=True)
    assert rep.format == name and rep.violations
    for v in rep.violations:
        assert v.format in known and f"{v.format.upper()} " in str(v)
