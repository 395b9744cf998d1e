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
