"""`modelcodec inspect` in the user's words (issue 32 §5): a GGUF's tensor types as GGUF names
them, metadata one key per line (long values folded, arrays summarised), the --metadata and
--tensors views, one line per command in --help, and counts that read right."""
import json
import subprocess
import sys

import numpy as np

import codec
from codec.model import Packed
from codec.tools.cli import main

VOCAB = ["<unk>", "<s>", "</s>"] + [f"tok{i}" for i in range(31997)]


def _gguf(tmp_path):
    p = str(tmp_path / "q.gguf")
    codec.write(p, {"blk.0.attn_q.weight": Packed(np.zeros(40, np.uint8), (2, 32), {"ggml_type": 3}),
                    "blk.0.norm": np.ones((2, 32), np.float16), "output.weight": np.ones(4, np.float32)},
                metadata={"general.architecture": "llama", "llama.block_count": np.uint32(30),
                          "tokenizer.ggml.tokens": VOCAB, "tokenizer.chat_template": "{% x %}" * 100})
    return p


def test_gguf_inspect_names_tensor_types_as_gguf_does_and_metadata_one_key_per_line(tmp_path, capsys):
    assert main(["inspect", _gguf(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = {ln.split()[0]: ln.split()[1] for ln in lines if ln.startswith("    blk.") or ln.startswith("    output")}
    assert row == {"blk.0.attn_q.weight": "Q4_1", "blk.0.norm": "F16", "output.weight": "F32"}
    meta = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines if ln.startswith("    ") and "." in ln.split()[0]
            and ln.split()[0] not in row}
    assert meta["general.architecture"] == '"llama"' and meta["llama.block_count"] == "30"
    assert meta["tokenizer.ggml.tokens"].startswith('[32,000 strings: "<unk>", "<s>", "</s>"')
    assert meta["tokenizer.ggml.tokens"].endswith(", …]") and "tok31000" not in out
    assert "more characters" in meta["tokenizer.chat_template"] and len(meta["tokenizer.chat_template"]) < 200


def test_inspect_metadata_view_and_tensors_pattern(tmp_path, capsys):
    p = _gguf(tmp_path)
    assert main(["inspect", "--metadata", p]) == 0
    out = capsys.readouterr().out
    assert "general.architecture" in out and "tensors" not in out and "blk.0" not in out
    assert main(["inspect", "--tensors", "blk.0.*", p]) == 0
    out = capsys.readouterr().out
    assert "blk.0.attn_q.weight" in out and "blk.0.norm" in out and "output.weight" not in out
    assert "2 of 3 matching 'blk.0.*'" in out
    assert main(["inspect", "--json", "--tensors", "out*", p]) == 0
    assert [t["name"] for t in json.loads(capsys.readouterr().out)["tensors"]] == ["output.weight"]
    assert main(["inspect", "--json", "--metadata", p]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "tensors" not in d and d["metadata"]["tokenizer.ggml.tokens"] == VOCAB


def test_inspect_of_a_set_does_not_start_with_more_checksums(tmp_path, capsys):
    out = codec.write(str(tmp_path / "set"), {"w": np.ones(4, np.float32)}, format="aeroset")
    assert main(["inspect", out]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  parts     1 part: part-000.aero"
    assert not any("more" in ln for ln in lines)


def test_help_lists_every_command_on_one_line():
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin"}
    import os
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "codec", "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("inspect "))
    block = []  # (the commands come in groups: "  look at models:" then one line per command)
    for ln in lines[start:]:
        if ln.strip() and not ln.rstrip().endswith(":"):
            block.append(ln)
    names = [ln.split()[0] for ln in block]
    assert all(ln.startswith("    ") and not ln.startswith("      ") and len(ln.split()) > 1 for ln in block), block
    assert {"inspect", "validate", "verify", "fetch-tensor", "convert", "formats", "schema", "demo"} <= set(names)
    assert "{inspect,validate" not in r.stdout  # (the usage says COMMAND, not the list twice)


def test_counts_read_right_and_a_connection_error_names_no_internal_class(tmp_path):
    import re
    import socket
    from codec.io.remote import HttpOptions
    from .servers import FaultServer
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    try:
        codec.open(f"http://127.0.0.1:{port}/m.gguf", http=HttpOptions(retries=0))
        raise AssertionError("opened a closed port")
    except codec.FormatError as e:
        msg = str(e)
    assert "_Watched" not in msg and "Connection(" not in msg and f"127.0.0.1:{port}" in msg
    assert "after 1 attempt:" in msg
    codec.write(str(tmp_path / "m.gguf"), {"w": np.ones(4, np.float32)})
    with FaultServer(tmp_path) as srv:
        rep = codec.validate(f"{srv.url}/ok/m.gguf")
    counts = [re.search(r"(\d+) Range request(s?)\b", n) for n in rep.notes]
    counts = [m for m in counts if m]
    assert counts and all((m.group(1) == "1") == (m.group(2) == "") for m in counts), rep.notes
    out = codec.write(str(tmp_path / "set"), {"w": np.ones(4, np.float32)}, format="aeroset")
    assert any(c.startswith("index, 1 part, 1 tensor resolved") for c in codec.validate(out).checked)
    one = str(tmp_path / "one.aero")
    codec.write(one, {"w": np.ones(4, np.float32)}, max_shard_bytes=1 << 20)
    checked = " ".join(codec.validate(one, full=True).checked)
    assert "TIDX (1 tensor)" in checked and " 1 tensors" not in checked and " 1 shards" not in checked


def test_a_cut_gguf_says_1_byte_is_left(tmp_path):
    p = str(tmp_path / "m.gguf")
    codec.write(p, {"w": np.ones(4, np.float32)}, metadata={"a": "x", "toks": ["a", "b"]})
    data = open(p, "rb").read()
    for n in range(24, len(data)):
        rep = codec.validate(data[:n])
        one = [v for v in rep.violations if "left in the file" in v.message and ", 1 " in v.message]
        if one:
            assert "1 is left in the file" in one[0].message
            break
    else:
        raise AssertionError("no cut leaves one byte")
