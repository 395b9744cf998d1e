"""Nesting limits are explicit numbers, the same for every reader and writer, and do not depend
on the caller's stack depth; a file named for a format is checked as one; GGUF and safetensors
headers decode within a budget proportional to their bytes (issue 30 §5)."""
import json
import struct
import subprocess
import sys
import textwrap

import msgpack
import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.aero import build_container
from codec.engine.nesting import MAX_NESTING, json_shape, nesting
from codec.schemas import aero as A, gguf as G, safetensors as ST

T = {"w": np.arange(4, dtype=np.float32)}


def _deep(depth: int, leaf=1):
    """A value nesting ``depth`` lists deep."""
    v = leaf
    for _ in range(depth):
        v = [v]
    return v


def _aero(mjsn: bytes | None = None, mmsg: bytes | None = None) -> bytes:
    """A valid one-tensor AERO file, its MJSN or MMSG chunk replaced."""
    tidx = msgpack.packb({"tensors": [{"name": "w", "dtype": int(A.DType.F32), "shape": [1], "shard_id": 0,
                                       "data_off": 0, "data_len": 4}]})
    mmsg = mmsg or msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}, "shards": [{"name": "weights.shard0"}]})
    return build_container([(b"MJSN", "meta.json", 0, mjsn or b'{"model_name":"m"}'), (b"MMSG", "manifest", 0, mmsg),
                            (b"TIDX", "tensors", 0, tidx), (b"WTSH", "weights.shard0", 0, bytes(4))])


def _mjsn(depth: int) -> bytes:
    """An MJSN document nesting ``depth`` deep (the object counts 1)."""
    return b'{"model_name":"m","k":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def _at_stack_depth(room: int, fn):
    """``fn()`` called with only ``room`` frames left below the recursion limit."""
    def down(n):
        return down(n - 1) if n else fn()
    here = len(__import__("inspect").stack(0))
    return down(sys.getrecursionlimit() - room - here)


def _verdict(src):
    rep = codec.validate(src)
    return rep.ok, sorted({(type(v).__name__, str(v.rule)) for v in rep.violations})


# ---------------------------------------------------------------------------- the one limit
def test_nesting_is_counted_without_recursion():
    assert nesting(1) == 0 and nesting([]) == 1 and nesting({"k": [[1]]}) == 3 and nesting(np.zeros(3)) == 1
    assert nesting(_deep(100_000)) == 100_000  # (a recursive walk would raise RecursionError)
    assert json_shape(b'{"a":"[[[\\"[","b":[{}]}') == (3, 3)
    assert json_shape(b"[" * 100_000 + b"]" * 100_000) == (100_000, 100_000)


@pytest.mark.parametrize("depth", [MAX_NESTING, MAX_NESTING + 1, 600, 989])
def test_aero_metadata_nesting_verdict_is_the_same_at_any_stack_depth(depth):
    data = _aero(_mjsn(depth))
    top = _verdict(data)
    assert _at_stack_depth(100, lambda: _verdict(data)) == top
    if depth <= MAX_NESTING:
        assert top == (True, [])
        with codec.open(data) as r:
            assert nesting(r.metadata) == depth
    else:
        assert top == (False, [("LimitError", "AERO-LIMIT-DECODE")])
        with pytest.raises(E.LimitError) as e, codec.open(data) as r:
            r.metadata
        assert e.value.format == "aero" and e.value.path == "MJSN" and "MAX_NESTING" in str(e.value)


def test_deep_msgpack_metadata_is_a_limit():
    mmsg = msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}, "shards": [{"name": "weights.shard0"}],
                          "x": _deep(MAX_NESTING)})
    assert _verdict(_aero(mmsg=mmsg)) == (False, [("LimitError", "AERO-LIMIT-DECODE")])


def _tidx(entry_extra=None, top_extra=None, n: int = 1) -> bytes:
    rows = [{"name": f"w{i}", "dtype": int(A.DType.F32), "shape": [1], "shard_id": 0, "data_off": 0, "data_len": 4}
            for i in range(n)]
    for r in rows:
        if entry_extra is not None:
            r["x"] = entry_extra
    doc = {"tensors": rows} | ({} if top_extra is None else {"y": top_extra})
    mmsg = msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}, "shards": [{"name": "weights.shard0"}]})
    return build_container([(b"MJSN", "meta.json", 0, b"{}"), (b"MMSG", "manifest", 0, mmsg),
                            (b"TIDX", "tensors", 0, msgpack.packb(doc)), (b"WTSH", "weights.shard0", 0, bytes(4))])


@pytest.mark.parametrize("n", [1, 2000])  # (a few entries decoded by msgpack; many, scanned into columns)
def test_tensor_index_values_nest_within_the_limit(n):
    """an undeclared key of an entry (the document's map, its list, the entry: 3 deep) or of
    the index itself holds at most what MAX_NESTING leaves"""
    limit = [("LimitError", "AERO-LIMIT-DECODE")]
    assert _verdict(_tidx(_deep(MAX_NESTING - 3), n=n))[1] != limit
    assert _verdict(_tidx(_deep(MAX_NESTING - 2), n=n))[1] == limit
    assert _verdict(_tidx(top_extra=_deep(MAX_NESTING - 1), n=n))[1] != limit
    assert _verdict(_tidx(top_extra=_deep(MAX_NESTING), n=n))[1] == limit


def test_cli_and_library_agree_on_deep_metadata(tmp_path):
    """(today a 989-deep MJSN passes codec.validate and fails modelcodec validate): each called
    from the top of a fresh interpreter"""
    for depth in (MAX_NESTING, 989):
        p = tmp_path / f"d{depth}.aero"
        p.write_bytes(_aero(_mjsn(depth)))
        code = (f"import codec, sys; from codec.tools.cli import main; ok = codec.validate({str(p)!r}).ok; "
                f"code = main(['validate', {str(p)!r}]); print(ok, code)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        ok, code = r.stdout.split()[-2:]
        assert (ok, code) == (("True", "0") if depth <= MAX_NESTING else ("False", "1")), r.stdout + r.stderr


def test_converting_deep_metadata_is_a_typed_error(tmp_path):
    src = tmp_path / "deep.aero"
    src.write_bytes(_aero(_mjsn(600)))
    for out in ("o.gguf", "o.safetensors", "o.aero"):
        with pytest.raises(E.LimitError):
            codec.convert(str(src), str(tmp_path / out))
        assert not (tmp_path / out).exists()


@pytest.mark.parametrize("depth", [MAX_NESTING, MAX_NESTING + 1, 600])
def test_aero_writer_takes_what_its_reader_takes(tmp_path, depth):
    """metadata is the document's outermost map: its values nest at most MAX_NESTING - 1 deep"""
    p = tmp_path / "m.aero"
    md = {"k": _deep(depth - 1)}
    if depth > MAX_NESTING:
        with pytest.raises(E.UsageError, match="metadata nests"):
            codec.write(p, T, metadata=md)
        assert not p.exists()
    else:
        codec.write(p, T, metadata=md)
        with codec.open(p) as r:
            assert r.metadata["k"] == md["k"]
        assert codec.validate(p).ok


# ---------------------------------------------------------------------------- GGUF closure
def test_gguf_writer_refuses_metadata_its_reader_refuses(tmp_path):
    p = tmp_path / "d.gguf"
    codec.write(p, T, metadata={"k": _deep(G.MAX_ARRAY_DEPTH)})
    with codec.open(p) as r:
        assert nesting(r.metadata["k"]) == G.MAX_ARRAY_DEPTH
    for depth in (G.MAX_ARRAY_DEPTH + 1, 450, 5000):
        q = tmp_path / f"d{depth}.gguf"
        with pytest.raises(E.UsageError, match=f"nests {depth} deep: at most {G.MAX_ARRAY_DEPTH}"):
            codec.write(q, T, metadata={"k": _deep(depth)})
        assert not q.exists()


def test_convert_does_not_replace_a_destination_with_a_file_its_reader_refuses(tmp_path):
    src, dst = tmp_path / "s.aero", tmp_path / "d.gguf"
    codec.write(src, T, metadata={"k": _deep(G.MAX_ARRAY_DEPTH + 1)})
    dst.write_bytes(b"mine")
    with pytest.raises(E.UsageError):
        codec.convert(str(src), str(dst))
    assert dst.read_bytes() == b"mine"


def test_gguf_writer_keeps_to_its_readers_decode_budget(tmp_path, monkeypatch):
    """(the budget's allowance made small here, so that a few arrays go over it)"""
    import codec.engine.payload
    monkeypatch.setattr(codec.engine.payload, "DECODE_OBJECTS_ALLOWANCE", 100)
    p, q = tmp_path / "ok.gguf", tmp_path / "over.gguf"
    codec.write(p, T, metadata={"k": [[1]] * 100})
    with codec.open(p) as r:
        assert len(r.metadata["k"]) == 100
    with pytest.raises(E.UsageError, match="arrays inside arrays"):
        codec.write(q, T, metadata={"k": [[1]] * 1000})
    assert not q.exists()
    monkeypatch.setattr(codec.engine.payload, "DECODE_OBJECTS_ALLOWANCE", 1000)
    codec.write(q, T, metadata={"k": [[1]] * 1000})
    monkeypatch.setattr(codec.engine.payload, "DECODE_OBJECTS_ALLOWANCE", 100)
    assert _verdict(str(q)) == (False, [("LimitError", "GGUF-VALUE-TYPE")])


def _gguf(kv: bytes, n_kv: int, tensor_count: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensor_count, n_kv) + kv


def test_gguf_huge_tensor_count_is_reported_under_its_own_field():
    kv = struct.pack("<Q", 1) + b"k" + struct.pack("<IB", 0, 7)  # "k": u8 7
    rep = codec.validate(_gguf(kv, 1, tensor_count=2 ** 60))
    assert [(v.rule, v.path) for v in rep.violations] == [(G.Rule.TRUNCATED, "Header.tensor_count")]
    rep = codec.validate(_gguf(kv, 2 ** 60))
    assert [(v.rule, v.path) for v in rep.violations] == [(G.Rule.TRUNCATED, "Header.kv_count")]


# ---------------------------------------------------------------------------- safetensors
def _st(header: bytes) -> bytes:
    return len(header).to_bytes(8, "little") + header


def test_safetensors_header_nesting_is_a_limit():
    ok = _st(b'{"__metadata__":{"k":' + b"[" * (MAX_NESTING - 2) + b"]" * (MAX_NESTING - 2) + b"}}")
    deep = _st(b'{"__metadata__":{"k":' + b"[" * (MAX_NESTING - 1) + b"]" * (MAX_NESTING - 1) + b"}}")
    assert _verdict(ok) == (False, [("SchemaError", "SAFETENSORS-METADATA")])  # (not text: a finding, not a limit)
    assert _verdict(deep) == (False, [("LimitError", "SAFETENSORS-HEADER-JSON")])
    assert _at_stack_depth(100, lambda: _verdict(deep)) == _verdict(deep)
    assert _at_stack_depth(100, lambda: _verdict(ok)) == _verdict(ok)


# ---------------------------------------------------------------------------- named files
@pytest.mark.parametrize("name,data,finding", [
    ("x.safetensors", (2 ** 40).to_bytes(8, "little") + b"{}", ("LimitError", "SAFETENSORS-HEADER-LENGTH")),
    ("x.safetensors", (1).to_bytes(8, "little") + b"{", ("LimitError", "SAFETENSORS-HEADER-LENGTH")),
    ("x.safetensors", _st(b"\xef\xbb\xbf{}"), ("DecodeError", "SAFETENSORS-HEADER-JSON")),
    ("x.gguf", b"GGXF" + bytes(40), ("MagicError", "GGUF-MAGIC")),
])
def test_a_file_named_for_a_format_gets_that_formats_finding(tmp_path, name, data, finding):
    p = tmp_path / name
    p.write_bytes(data)
    rep = codec.validate(str(p))
    assert not rep.ok and finding in {(type(v).__name__, str(v.rule)) for v in rep.violations}, rep.violations
    with pytest.raises(E.FormatError) as e:
        codec.open(str(p))
    assert not isinstance(e.value, E.UnknownFormatError)
    q = tmp_path / "unnamed.bin"  # (a name that claims nothing: still "no known format")
    q.write_bytes(data)
    with pytest.raises(E.UnknownFormatError):
        codec.open(str(q))


# ---------------------------------------------------------------------------- memory
MB = 1 << 20
#: peak memory may grow by this factor of the input, plus a fixed allowance (the engine's
#: DECODE_OBJECTS_ALLOWANCE objects) -- wide margins; today's main takes ~26x and seconds
FACTOR, FIXED_MB, TIME_LIMIT_S = 8, 48, 60


def _gguf_nested_empty_arrays(n_bytes: int) -> bytes:
    """One key whose value is an array of ~n_bytes/12 empty arrays (of u8 and of arrays, alternating)."""
    n = n_bytes // 24 * 2
    body = struct.pack("<IQ", 0, 0) + struct.pack("<IQ", G.ValueType.ARRAY, 0)
    kv = struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", G.ValueType.ARRAY, G.ValueType.ARRAY, n) + body * (n // 2)
    return _gguf(kv, 1)


HOSTILE = {
    "gguf-nested-empty-arrays": ("h.gguf", lambda n: _gguf_nested_empty_arrays(n), "GGUF-VALUE-TYPE"),
    "safetensors-list-of-empty-lists": ("h.safetensors", lambda n: _st(b"[" + b"[]," * (n // 3) + b"[]]"),
                                        "SAFETENSORS-HEADER-JSON"),
    "safetensors-entry-of-empty-lists": ("h.safetensors", lambda n: _st(b'{"a":[' + b"[]," * (n // 3) + b"[]]}"),
                                         "SAFETENSORS-HEADER-JSON"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_headers_decode_in_memory_proportional_to_their_bytes(tmp_path, case):
    name, make, rule = HOSTILE[case]
    size = 16 * MB
    p = tmp_path / name
    p.write_bytes(make(size))
    code = textwrap.dedent(f"""
        import json, codec
        def hwm():
            return int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')).split()[1]) / 1024
        base, out = hwm(), {{}}
        rep = codec.validate({str(p)!r})
        out["rules"] = sorted({{str(v.rule) for v in rep.violations}})
        out["kinds"] = sorted({{type(v).__name__ for v in rep.violations}})
        try:
            codec.open({str(p)!r})
        except codec.FormatError as e:
            out["open"] = [type(e).__name__, str(e.rule)]
        out["grew_mb"] = hwm() - base
        print(json.dumps(out))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIME_LIMIT_S)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["rules"] == [rule] and got["open"][1] == rule, got
    assert got["grew_mb"] < FACTOR * size / MB + FIXED_MB, got


def test_honest_headers_are_within_the_budgets(tmp_path):
    """Many small tensors (the densest honest safetensors header) and a GGUF vocabulary of
    single-character tokens open."""
    many = {f"{i}": np.zeros(0, np.int8) for i in range(300_000)}
    p = tmp_path / "many.safetensors"
    codec.write(p, many)
    n = int.from_bytes(p.read_bytes()[:8], "little")
    assert json_shape(p.read_bytes()[8:8 + n])[1] * ST.HEADER_BYTES_PER_CONTAINER <= n  # (even without the allowance)
    with codec.open(p) as r:
        assert len(list(r.tensors)) == 300_000
    g = tmp_path / "vocab.gguf"
    codec.write(g, T, metadata={"tokenizer.ggml.tokens": [chr(33 + i % 90) for i in range(200_000)],
                                "pairs": [[i, i + 1] for i in range(1000)]})
    with codec.open(g) as r:
        assert len(r.metadata["tokenizer.ggml.tokens"]) == 200_000 and len(r.metadata["pairs"]) == 1000


def test_json_shape_counts_only_what_is_outside_the_strings():
    """The fast path (a document without escapes) finds the same brackets as the escape-aware
    pattern: strings skipped, an unterminated last string's brackets counted (an upper bound)."""
    import random
    import re
    pattern = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)

    def by_pattern(raw):
        marks = bytes(b for b in pattern.sub(b"", raw) if b in b"[]{}")
        depth = level = 0
        for b in marks:
            level += 1 if b in b"[{" else -1
            depth = max(depth, level)
        return depth, marks.count(b"[") + marks.count(b"{")
    rnd = random.Random(35)
    docs = [b'{"a[": [1, {"b": "]]"}], "c": "{"}', b'["x", "[[[', b'"', b'[[]]', b'{"k\\"[": [[]]}', b'']
    docs += [bytes(rnd.choice(b'"[]{}\\a:, ') for _ in range(rnd.randint(0, 16))) for _ in range(3000)]
    for raw in docs:
        assert json_shape(raw) == by_pattern(raw), raw
