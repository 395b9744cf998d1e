"""No string from a file reaches the user's terminal raw (issue 30 §5): a hostile file's tensor
names, metadata keys and values holding ESC/OSC/BEL/CSI or bidi controls are escaped in every
human output of the real command line (inspect, verify, validate, inspect-set, fetch-tensor,
errors), stdout and stderr alike."""
import os
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec.ui.display import printable

from .conftest import ROOT

#: an OSC title change ended by BEL, an SGR colour, an 8-bit CSI, a right-to-left override
EVIL = "\x1b]0;pwned\x07\x1b[31m\x9b2J\u202e"


def _cli(*args, cwd) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "codec.tools.cli", *args], capture_output=True, cwd=cwd,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "MODELCODEC_PROGRESS": "0"})
    return r.returncode, (r.stdout + r.stderr).decode("utf-8")


def _clean(text: str) -> bool:
    return all(c.isprintable() or c == "\n" for c in text)


@pytest.mark.parametrize("suffix", [".safetensors", ".aero", ".gguf", ".mag"])  # (OINF names are [A-Za-z0-9._-])
def test_names_keys_and_values_from_a_file_are_escaped_in_human_output(suffix, tmp_path):
    md = {EVIL + "k": (EVIL + "v") if suffix != ".mag" else 1}
    p = codec.write(str(tmp_path / f"e{suffix}"), {EVIL + "w": np.arange(3, dtype=np.float32)}, metadata=md)
    for cmd in (["inspect", p], ["verify", p], ["validate", "--full", p],
                ["fetch-tensor", p, EVIL + "w", str(tmp_path / "out.bin")],
                ["fetch-tensor", p, EVIL + "missing", str(tmp_path / "out.bin")]):
        code, out = _cli(*cmd, cwd=tmp_path)
        assert code in (0, 1) and "internal error" not in out, (cmd, out)
        assert _clean(out), (cmd, out)
        if cmd[0] in ("inspect", "verify"):
            assert "\\x1b]0;pwned\\x07" in out, (cmd, out)  # shown, escaped
    if suffix != ".mag":  # (MAG metadata holds numbers only)
        _, out = _cli("verify", p, cwd=tmp_path)
        assert printable(EVIL) + "k" in out
    with open(p, "r+b") as f:  # cut: the findings name the hostile tensor
        f.truncate(os.path.getsize(p) - 4)
    for cmd in (["validate", p], ["verify", p]):
        code, out = _cli(*cmd, cwd=tmp_path)
        assert code in (0, 1) and _clean(out) and "internal error" not in out, (cmd, out)


def test_inspect_set_escapes_names_from_the_index(tmp_path):
    d = codec.write(str(tmp_path / "set" / "model.aeroset.json"), {EVIL + "w": np.arange(3, dtype=np.float32)},
                    metadata={EVIL + "k": EVIL + "v"})
    code, out = _cli("inspect-set", d, "--all", cwd=tmp_path)
    assert code == 0 and _clean(out) and "\\x1b]0;pwned\\x07" in out, out


def test_printable_keeps_newlines_and_printable_text_and_escapes_the_rest():
    assert printable("ok ✓ 名前\nnext") == "ok ✓ 名前\nnext"
    assert printable("a\x1bb\x07c\x7f\x9b\u202e\u2028\udc80\U000e0001\t\r") == \
        "a\\x1bb\\x07c\\x7f\\x9b\\u202e\\u2028\\udc80\\U000e0001\\x09\\x0d"
