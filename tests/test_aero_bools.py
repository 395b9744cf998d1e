"""AERO (and so AEROSET, whose parts are AERO files) holds any byte in a bool tensor; one other
than 0 or 1 reads as True, but formats that require 0 or 1 refuse it: ``validate --full`` says
so in a warning (AERO-BOOL, schemas.aero.WARNINGS) naming the tensor, its first such element and
that element's byte offset in the file -- the file stays valid."""
import numpy as np
import pytest

import codec
from codec.formats.aero import write_aero
from codec.schemas.aero import Rule
from codec.tools.cli import main

ODD = np.frombuffer(b"\x00\x01\x01\x00\x00\x07\x01\x02", bool)  # elements 5 (7) and 7 (2) are odd
MSG = "tensor 'm': bool element 5 is the byte 7 (not 0 or 1): it reads as True, but formats that require 0 or 1 refuse it"


def _tensors(m=ODD):
    return {"w": np.arange(40, dtype=np.float32), "ok": np.array([True, False, True]), "m": m}


@pytest.mark.parametrize("opts", [{}, {"compress": False}, {"max_shard_bytes": 64}, {"tensor_hash": False},
                                  {"page_hashes": True, "control_integrity": True}], ids=str)
def test_a_bool_byte_other_than_0_or_1_is_a_warning_of_full_validation(tmp_path, opts):
    p = write_aero(tmp_path / "m.aero", _tensors(), **opts)
    with codec.open(p) as r:
        t = r.tensors["m"]
        assert r.tensor("m").view(np.uint8).tolist() == [0, 1, 1, 0, 0, 7, 1, 2]  # (read as it is)
    rep = codec.validate(p, full=True)
    assert rep.ok and not rep.errors
    [w] = rep.warnings
    assert (w.rule, type(w), w.format, w.offset, w.path, w.message) == (
        Rule.BOOL, codec.errors.ConstraintError, "aero", t.offset + 5, "TIDX.tensors[2].data", MSG)
    assert rep.severity(w) == "warning" and w.source == str(p)
    assert not codec.validate(p).violations  # (the structure check reads no tensor data)


def test_bools_of_0_and_1_and_other_dtypes_give_no_warning(tmp_path):
    p = write_aero(tmp_path / "m.aero", {**_tensors(ODD != 0), "u": ODD.view(np.uint8), "e": np.zeros(0, bool)})
    rep = codec.validate(p, full=True)
    assert rep.ok and not rep.violations


def test_a_tensor_of_many_pieces_is_scanned_piece_by_piece(tmp_path, monkeypatch):
    """The scan reads a PIECE at a time (here 3 bytes): the element is counted across pieces."""
    from codec.io import integrity
    seen = []
    first = integrity.first_odd_bool

    def spy(pieces):
        def each():
            for x in pieces:
                seen.append(len(x))
                yield x
        return first(each())
    monkeypatch.setattr(integrity, "PIECE", 3)
    monkeypatch.setattr("codec.formats.aero.validate.first_odd_bool", spy)
    p = write_aero(tmp_path / "m.aero", {"m": ODD})
    [w] = codec.validate(p, full=True).warnings
    assert "bool element 5 is the byte 7" in w.message and seen == [3, 3]  # (stops at the piece holding it)


def test_a_set_reports_the_warning_of_its_part(tmp_path):
    idx = codec.write(str(tmp_path / "s" / "m.aeroset.json"), _tensors())
    with codec.open(idx) as s:
        name = s.index["parts"][0]["path"]
    with codec.open(str(tmp_path / "s" / name)) as part:
        at = part.tensors["m"].offset
    rep = codec.validate(idx, full=True)
    assert rep.ok
    [w] = rep.warnings
    assert (w.rule, w.offset, w.message) == (Rule.BOOL, at + 5, MSG) and w.source.endswith(name)
    assert not codec.validate(idx).violations
    good = codec.write(str(tmp_path / "g" / "m.aeroset.json"), _tensors(ODD != 0))
    assert not codec.validate(good, full=True).violations


@pytest.mark.parametrize("kind", ["aero", "aeroset"])
def test_validate_full_prints_the_warning_and_exits_0(tmp_path, capsys, kind):
    p = codec.write(str(tmp_path / ("m.aero" if kind == "aero" else "s/m.aeroset.json")), _tensors())
    assert main(["validate", "--full", p]) == 0
    out = capsys.readouterr().out
    assert f"{MSG} [AERO-BOOL]" in out and "passed (1 warnings)" in out
    assert main(["validate", "--json", "--full", p]) == 0
    assert '"AERO-BOOL"' in capsys.readouterr().out
    html = tmp_path / "r.html"  # (plain inspect reads no tensor data: its full report does)
    assert main(["inspect", "--html", str(html), "--full", p]) == 0
    assert "AERO-BOOL" in html.read_text() and "bool element 5 is the byte 7" in html.read_text()
