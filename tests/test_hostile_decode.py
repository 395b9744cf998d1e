"""Decoding is bounded by the bytes that exist: hostile metadata documents built here end in a
typed error, at once, with peak RSS under 200 MB -- each case in its own subprocess, for the
reader, validate and the CLI."""
import json
import subprocess
import sys
import textwrap

import msgpack
import pytest
import zstandard

from codec.formats.aero import build_container
from codec.schemas import aero as S

RSS_LIMIT_MB = 200
TIME_LIMIT_S = 60

_ZSTD = zstandard.ZstdCompressor(level=3, write_content_size=True)

#: a valid minimal file's chunks: (fourcc, name, flags, payload)
MJSN = json.dumps({"model_name": "m"}).encode()
MMSG = msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}, "shards": [{"name": "weights.shard0"}]})
TIDX = msgpack.packb({"tensors": [{"name": "w", "dtype": int(S.DType.F32), "shape": [1], "shard_id": 0, "data_off": 0,
                                   "data_len": 4}]})
WTSH = bytes(4)


def _file(replace: bytes, payload: bytes, *, compress: bool) -> bytes:
    chunks = {b"MJSN": MJSN, b"MMSG": MMSG, b"TIDX": TIDX}
    names = {b"MJSN": "meta.json", b"MMSG": "manifest", b"TIDX": "tensors"}
    out = []
    for fc, data in chunks.items():
        if fc == replace:
            stored, flags = (_ZSTD.compress(payload), 1) if compress else (payload, 0)
            out.append((fc, names[fc], flags, stored, len(payload)))
        else:
            out.append((fc, names[fc], 0, data))
    out.append((b"WTSH", "weights.shard0", 0, WTSH))
    return build_container(out)


def _run(tmp_path, data: bytes, snippet: str) -> dict:
    """Run ``snippet`` (with ``path`` bound) in a fresh interpreter; returns what it printed as
    JSON plus its peak RSS."""
    p = tmp_path / "hostile.aero"
    p.write_bytes(data)
    body = textwrap.indent(textwrap.dedent(snippet).strip(), "    ")
    code = "\n".join([
        "import json, sys", "import codec", f"path = {str(p)!r}", "out = {}", "try:", body,
        "except codec.FormatError as e:",
        "    out.update(error=type(e).__name__, rule=e.rule, offset=e.offset)",
        # VmHWM: this process's own peak (ru_maxrss would include the forking parent's)
        "out['rss_mb'] = int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')).split()[1]) / 1024",
        "print(json.dumps(out))"])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIME_LIMIT_S)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


OPEN = """
with codec.open(path) as r:
    r.metadata; list(r.tensors); r.tensor("w")
out["opened"] = True
"""
VALIDATE = """
rep = codec.validate(path, full=True)
out["ok"] = rep.ok
out["rules"] = sorted({v.rule for v in rep.violations})
"""

def _mix(a: bytes, b: bytes, n: int) -> bytes:
    """n items, each ``a`` or ``b`` at random (seeded): compresses about 8x, not 10^4x."""
    import numpy as np
    pick = np.random.default_rng(0).integers(0, 2, n).astype(bool)
    items = np.where(pick[:, None], np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8))
    return items.tobytes()


def _entry(name: str, **kw) -> bytes:
    import msgpack
    return msgpack.packb({"name": name, **kw})


def _giant_map(n: int) -> bytes:
    """A msgpack map of n entries {uint32 i: nil}."""
    import numpy as np
    rows = np.zeros((n, 6), np.uint8)
    rows[:, 0], rows[:, 5] = 0xCE, 0xC0
    rows[:, 1:5] = np.arange(n, dtype=">u4").view(np.uint8).reshape(n, 4)
    return b"\xdf" + n.to_bytes(4, "big") + rows.tobytes()


# (id, chunk, document, compressed, the rule that must refuse it)
CASES = [
    # inflate bombs: a few KB of zstd claiming ~60 MiB
    ("tidx-zstd-bomb", b"TIDX", b"\x81\xa7tensors\xdd" + (60 << 20).to_bytes(4, "big") + b"\x90" * (60 << 20), True,
     "AERO-LIMIT-INFLATE"),
    ("mmsg-zstd-bomb", b"MMSG", b"\x91" * (60 << 20), True, "AERO-LIMIT-INFLATE"),
    ("mjsn-zstd-bomb", b"MJSN", b"[" + b"{}," * (20 << 20) + b"{}]", True, "AERO-LIMIT-INFLATE"),
    # within the inflate ratio (one bit of entropy per object), but millions of tiny objects:
    # refused by the object budget before they exist
    ("mmsg-many-empty-containers", b"MMSG", b"\xdd" + (3 << 20).to_bytes(4, "big") + _mix(b"\x90", b"\x80", 3 << 20),
     True, "AERO-LIMIT-DECODE"),
    # the tensor index is decoded entry by entry into columns: the first malformed entry ends it
    ("tidx-many-empty-containers", b"TIDX", b"\x81\xa7tensors\xdd" + (3 << 20).to_bytes(4, "big")
     + _mix(b"\x90", b"\x80", 3 << 20), True, "AERO-PAYLOAD"),
    # ... and well-formed entries (20 objects in 31 bytes, ~80x smaller stored) hit its budget
    ("tidx-many-entries-over-budget", b"TIDX", b"\x81\xa7tensors\xdd" + (1 << 20).to_bytes(4, "big")
     + _mix(*(_entry(n, shape=[1] * 16) for n in "ab"), 1 << 20), True, "AERO-LIMIT-DECODE"),
    # within the budget, 300 k entries of two names: the duplicates are reported, not listed 300 k times
    ("tidx-duplicate-names", b"TIDX", b"\x81\xa7tensors\xdd" + (300_000).to_bytes(4, "big")
     + _mix(*(_entry(n, dtype=1, shape=[1], shard_id=0, data_off=0, data_len=4) for n in "ab"), 300_000), True,
     "AERO-TIDX-DUPLICATE"),
    # one giant container: its items are counted only when it completes, so each container is
    # also capped at the budget (a fuzzing finding: a 3.7 KB file, 800 MB)
    ("mmsg-one-giant-map", b"MMSG", _giant_map(2_000_000), True, "AERO-LIMIT-DECODE"),
    ("mjsn-many-empty-containers", b"MJSN", b"[" + _mix(b"{},", b"[],", 3 << 20) + b"{}]", True, "AERO-LIMIT-DECODE"),
    # counts, lengths and nesting the bytes cannot hold
    ("mmsg-array32-count", b"MMSG", b"\xdd\xff\xff\xff\xff" + b"\xc0" * 16, False, "AERO-PAYLOAD"),
    ("mmsg-str32-length", b"MMSG", b"\xdb\xff\xff\xff\xff" + b"a" * 16, False, "AERO-PAYLOAD"),
    # nesting deeper than the engine's MAX_NESTING: a limit, refused before anything walks it
    ("tidx-deep-nesting", b"TIDX", b"\x91" * 200_000 + b"\xc0", False, "AERO-LIMIT-DECODE"),
    ("mjsn-deep-nesting", b"MJSN", b"[" * 200_000 + b"]" * 200_000, False, "AERO-LIMIT-DECODE"),
    ("mjsn-long-integer", b"MJSN", b"1" * 100_000, False, "AERO-PAYLOAD"),
]


def _hostile(case) -> bytes:
    _, chunk, doc, compressed, _ = case
    return _file(chunk, doc, compress=compressed)


def _id(c):
    return c.values[0][0] if hasattr(c, "values") else c[0]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_hostile_document_is_refused_within_bounds(tmp_path, case):
    data = _hostile(case)
    assert len(data) < 1 << 20
    got = _run(tmp_path, data, OPEN)
    assert got.get("rule") == case[4], got
    assert got["rss_mb"] < RSS_LIMIT_MB, got
    rep = _run(tmp_path, data, VALIDATE)
    assert rep["ok"] is False and case[4] in rep["rules"], rep
    assert rep["rss_mb"] < RSS_LIMIT_MB, rep


@pytest.mark.parametrize("case", [c for c in CASES if "bomb" in _id(c) or "many" in _id(c)], ids=_id)
def test_cli_refuses_hostile_documents_within_bounds(tmp_path, case):
    data = _hostile(case)
    cli = """
from codec.tools.cli import main
out["codes"] = [main([cmd, path]) for cmd in ("inspect", "validate", "verify")]
out["full"] = main(["validate", "--full", path])
"""
    got = _run(tmp_path, data, cli)
    assert all(c == 1 for c in got["codes"]) and got["full"] == 1, got
    assert got["rss_mb"] < RSS_LIMIT_MB, got


def test_the_valid_base_file_reads():
    """The cases differ from a valid file only in the hostile chunk."""
    import codec
    with codec.open(_file(b"MMSG", MMSG, compress=True)) as r:
        assert list(r.tensors) == ["w"] and r.tensor("w").tobytes() == WTSH
        assert r.validate(full=True).ok


def test_a_big_honest_tensor_index_still_opens(tmp_path):
    """The budgets leave room for real files: 200 k tensors, their index compressed ~25x."""
    import numpy as np
    import codec
    p = tmp_path / "many.aero"
    codec.write(p, {f"t{i}": np.zeros(1, np.float32) for i in range(200_000)}, format="aero", uuid=bytes(16),
                tensor_hash=False)
    with codec.open(p) as r:
        c = r.chunk(b"TIDX")
        assert c.compressed and c.ulen > 20 * c.length
        assert len(r.tensors) == 200_000 and r.tensor("t199999").shape == (1,)
