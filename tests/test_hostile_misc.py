"""Hostile inputs outside the decoders: huge shapes in messages, non-regular files."""
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec.engine.records import record_of
from codec.errors import show_int
from codec.schemas import mag as MS


def test_show_int_keeps_messages_short():
    assert show_int(12345) == "12345"
    assert show_int(-(2**64)) == str(-(2**64))
    assert show_int(2**5000) == "~2^5000" and show_int(-(2**5000) - 1) == "-~2^5000"


def test_mag_rank_255_of_huge_dims_is_a_typed_error(tmp_path, capsys):
    """255 extents of 2^63-1: their product has ~4,800 digits, more than int -> str allows."""
    hdr, ten = record_of(MS.FileHeader), record_of(MS.TensorRecord)
    p = tmp_path / "w.mag"
    codec.write(p, {"w": np.zeros((2, 2), np.float32)}, format="mag")
    data = p.read_bytes()
    r = ten.parse(data, hdr.size)
    old_len = len(ten.build(r))
    hostile = data[:hdr.size] + ten.build(dict(r, rank=255, shape=[2**63 - 1] * 255)) + data[hdr.size + old_len:]
    bad = tmp_path / "h.mag"
    bad.write_bytes(hostile)
    rep = codec.validate(bad)
    rules = {v.rule for v in rep.violations}
    assert not rep.ok and "MAG-NUMEL" in rules, rules
    assert all(len(str(v)) < 8000 for v in rep.violations)
    from codec.tools.cli import main
    assert main(["inspect", str(bad)]) == 1 and main(["validate", str(bad)]) == 1
    assert "internal error" not in capsys.readouterr().err


@pytest.fixture
def not_files(tmp_path):
    """A FIFO with no writer, /dev/zero, a symlink to it, and a listening Unix socket."""
    fifo = tmp_path / "model.aero"
    os.mkfifo(fifo)
    link = tmp_path / "zero.mag"
    link.symlink_to("/dev/zero")
    sock_path = tmp_path / "s.oinf"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    sock.listen()
    yield {"fifo": fifo, "device": "/dev/zero", "symlink to a device": link, "socket": sock_path}
    sock.close()


ENTRY_POINTS = {
    "open": "codec.open(path)",
    "open with format": "codec.open(path, format='aero')",
    "validate": "codec.validate(path, full=True)",
    "cli": "sys.exit(__import__('codec.tools.cli').tools.cli.main([cmd, path]))",
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_non_regular_files_are_refused_at_once(not_files, entry):
    for what, path in not_files.items():
        for cmd in (("inspect", "validate", "verify") if entry == "cli" else ("-",)):
            code = (f"import sys, codec\npath, cmd = {str(path)!r}, {cmd!r}\n"
                    f"try:\n    {ENTRY_POINTS[entry]}\nexcept codec.UsageError as e:\n    print('UsageError:', e)\n")
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
            out = r.stdout + r.stderr
            assert "not a regular file" in out, (what, cmd, out)
            assert "Traceback" not in out and "internal error" not in out, out


def test_khanary_bin_file_paths_stay_inside_the_base_directory(tmp_path):
    from codec.formats.khanary import BinFileTable, GlyphError
    inside = tmp_path / "base"
    inside.mkdir()
    outside = tmp_path / "outside.stb"
    codec.write(outside, [np.zeros(4, np.float32)], format="stb")
    (inside / "escape").symlink_to(tmp_path)
    for rel in (str(outside), "../outside.stb", "escape/outside.stb", "bad\0name.stb"):
        with pytest.raises(GlyphError) as ei:
            BinFileTable({1: rel}, inside).reader(1)
        assert ei.value.rule == "KHA-BIN-PATH", rel
    codec.write(inside / "ok.stb", [np.zeros(4, np.float32)], format="stb")
    t = BinFileTable({1: "ok.stb"}, inside)
    assert len(t.reader(1).tensors) == 1
    t.reader(1).close()


def test_stb_writer_names_its_key_rule(tmp_path):
    with pytest.raises(codec.UsageError, match="tensor_id"):
        codec.write(tmp_path / "x.stb", {"w": np.zeros(4, np.float32)}, format="stb")
    assert not list(tmp_path.iterdir())
