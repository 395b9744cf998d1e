"""The --json output of inspect, validate and inspect-set follows the documented JSON Schema
(docs/json/cli.schema.json) for every conformance vector, valid or not, and checksums are data
(algorithm, expected, actual, ok), not prose."""
import json

import blake3
import numpy as np
import pytest
from jsonschema import Draft202012Validator

import codec
from codec.tools import cli

from .conftest import ROOT, VECTORS

SCHEMA = json.loads((ROOT / "docs" / "json" / "cli.schema.json").read_text())
FILES = sorted(p for fmt in ("aero", "mag", "oinf", "stb") for p in (VECTORS / fmt).glob(f"*.{fmt}"))


def _validator(part: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/$defs/{part}", "$defs": SCHEMA["$defs"]})


def _run(capsys, *argv) -> tuple[int, dict]:
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out)


def _conforms(part: str, doc: dict) -> None:
    errors = sorted(_validator(part).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_the_schema_is_a_valid_json_schema():
    Draft202012Validator.check_schema(SCHEMA)
    assert FILES and len(FILES) > 40


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_inspect_and_validate_json_follow_the_schema(capsys, path):
    code, doc = _run(capsys, "inspect", "--json", str(path))
    _conforms("inspect" if code == 0 else "failure", doc)
    for level in ([], ["--full"]):
        code, doc = _run(capsys, "validate", "--json", *level, str(path))
        _conforms("validate", doc)
        assert code == (0 if doc["ok"] else 1)
        for v in doc["violations"]:
            if v["kind"] == "IntegrityError" and "expected" in v:
                assert v["expected"] != v["actual"] and v["algorithm"] in ("blake3-256", "crc32c", "sha256")


def _aero(tmp_path):
    p = str(tmp_path / "m.aero")
    codec.write(p, {"w": np.arange(64, dtype=np.float32), "b": np.ones(3, np.int64)}, format="aero")
    return p


def test_a_damaged_tensor_is_reported_with_both_digests(tmp_path, capsys):
    p = _aero(tmp_path)
    with codec.open(p) as r:
        t = r.tensors["w"]
    data = bytearray(open(p, "rb").read())
    data[t.offset] ^= 1
    open(p, "wb").write(data)
    code, doc = _run(capsys, "validate", "--json", "--full", p)
    _conforms("validate", doc)
    assert code == 1
    bad = [v for v in doc["violations"] if v["rule"] == "AERO-HASH-B3"]
    assert len(bad) == 1
    assert bad[0]["actual"] == blake3.blake3(bytes(data[t.offset:t.offset + t.nbytes])).hexdigest()
    tensors = [c for c in doc["checksums"] if c.get("count") is not None and "hash_b3" in c["covers"]]
    assert tensors == [{"algorithm": "blake3-256", "covers": tensors[0]["covers"], "expected": None,
                        "actual": None, "ok": False, "count": 2, "mismatches": 1}]
    # the weights chunk's own digest is a checksum entry too, and it fails with the same bytes
    shard = [c for c in doc["checksums"] if "WTSH" in c["covers"]]
    assert len(shard) == 1 and shard[0]["ok"] is False and shard[0]["expected"] != shard[0]["actual"]


def test_mag_checksum_is_data_in_inspect_and_validate(tmp_path, capsys):
    p = str(tmp_path / "m.mag")
    codec.write(p, {"w": np.arange(4, dtype=np.float32)}, format="mag")
    code, doc = _run(capsys, "inspect", "--json", p)
    _conforms("inspect", doc)
    (c,) = doc["checksums"]
    assert c["algorithm"] == "crc32c" and c["ok"] is True and c["expected"] == c["actual"]
    data = bytearray(open(p, "rb").read())
    data[20] ^= 0xFF  # inside the records the CRC covers
    open(p, "wb").write(data)
    code, doc = _run(capsys, "validate", "--json", p)
    _conforms("validate", doc)
    (v,) = [v for v in doc["violations"] if v["rule"] == "MAG-CHECKSUM"]
    assert v["algorithm"] == "crc32c" and v["expected"] == c["expected"] and v["actual"] != c["expected"]
    assert doc["checksums"][0]["ok"] is False


def test_human_inspect_shows_checksums_as_lines(tmp_path, capsys):
    p = str(tmp_path / "m.mag")
    codec.write(p, {"w": np.arange(4, dtype=np.float32)}, format="mag")
    assert cli.main(["inspect", p]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "checksum" in ln)
    assert "crc32c" in line and line.endswith(": ok")


def test_inspect_set_and_full_set_validation_follow_the_schema(tmp_path, capsys):
    from codec.formats.aeroset import write_aeroset
    d = str(tmp_path / "set")
    write_aeroset(d, {"a": np.arange(10, dtype=np.float32), "b": np.zeros((2, 3), np.int8)}, max_shard_bytes=64,
                  max_part_shards=1)
    code, doc = _run(capsys, "inspect-set", "--json", d)
    assert code == 0
    _conforms("inspect_set", doc)
    assert doc["checksums"] and all(c["algorithm"] == "sha256" and c["ok"] is None for c in doc["checksums"])
    code, doc = _run(capsys, "validate", "--json", "--full", d)
    _conforms("validate", doc)
    sha = [c for c in doc["checksums"] if c["algorithm"] == "sha256"]
    parts = len(json.loads(next((tmp_path / "set").glob("*.aeroset.json")).read_text())["parts"])
    assert code == 0 and len(sha) == parts + 1 and all(c["ok"] is True for c in sha)  # + index.aero
    # the parts' own chunk digests are there too, named by their part
    assert any(c["algorithm"] == "blake3-256" and ".aero: chunk" in c["covers"] for c in doc["checksums"])


def test_a_command_that_cannot_run_still_prints_json(tmp_path, capsys):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    code, doc = _run(capsys, "inspect", "--json", str(p))
    assert code == 1
    _conforms("failure", doc)
    assert doc["error"]["rule"] == "DETECT"
    code, doc = _run(capsys, "inspect", "--json", str(tmp_path / "missing.aero"))
    assert code == 1
    _conforms("failure", doc)
