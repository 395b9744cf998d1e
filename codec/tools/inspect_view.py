"""What ``modelcodec inspect`` prints: a file's header facts, its metadata one key per line (long
values folded, arrays summarised), its chunks and its tensors -- each tensor's element type in
the format's own vocabulary where the format's users know it by that (Q4_1, F16) --
and the views ``--metadata`` (the metadata alone) and ``--tensors PATTERN`` (the tensors whose
names match a glob pattern)."""
from __future__ import annotations

import fnmatch
import json

import numpy as np

from ..ui.display import MAX_ROWS, fmt_shape, human, json_default, json_text, plural, shortened

#: a metadata value longer than this is folded in human output (--all or --json show it whole)
VALUE_WIDTH = 100
#: the widest key column
KEY_WIDTH = 40


def _scalar(v) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    return json.dumps(v, ensure_ascii=False, default=json_default)


def _kind(v, n: int) -> str:
    """What an array holds, in words: "strings", "float32", "arrays", "values"."""
    if isinstance(v, np.ndarray):
        return v.dtype.name
    if all(isinstance(x, str) for x in v):
        return "string" if n == 1 else "strings"
    if all(isinstance(x, (list, tuple, np.ndarray)) for x in v):
        return "array" if n == 1 else "arrays"
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in v):
        return "integer" if n == 1 else "integers"
    return "value" if n == 1 else "values"


def value_text(v, whole: bool = False) -> str:
    """One metadata value on one line: text and numbers as JSON writes them, an array as its
    length, its kind and its first elements (``[32000 strings: "<unk>", "<s>", …]``), anything
    longer than :data:`VALUE_WIDTH` folded with how much more there is -- unless ``whole``."""
    if isinstance(v, (list, tuple, np.ndarray)):
        if whole:
            return json.dumps(v, ensure_ascii=False, default=json_default)
        n = len(v)
        if n == 0:
            return "[]"
        shown, used = [], 0
        for x in v:
            t = value_text(x) if isinstance(x, (list, tuple, np.ndarray)) else _scalar(x)
            if shown and used + len(t) > VALUE_WIDTH // 2 or len(t) > VALUE_WIDTH // 2:
                if not shown:
                    shown.append(t[:VALUE_WIDTH // 2] + "…")
                break
            shown.append(t)
            used += len(t) + 2
        more = ", …" if len(shown) < n else ""
        return f"[{n:,} {_kind(v, n)}: {', '.join(shown)}{more}]"
    t = _scalar(v)
    if whole or len(t) <= VALUE_WIDTH:
        return t
    return f"{t[:VALUE_WIDTH]}… ({len(t) - VALUE_WIDTH:,} more characters: --all or --json show it whole)"


def metadata_lines(md: dict, whole: bool = False) -> list[str]:
    """The metadata, one key per line under a ``metadata`` heading."""
    if not md:
        return []
    w = min(max(len(k) for k in md), KEY_WIDTH)
    return [f"  metadata  {plural(len(md), 'key')}"] + [f"    {k:<{w}}  {value_text(v, whole)}" for k, v in md.items()]


def _checksum_lines(checksums: list) -> list[str]:
    """The checksums computed so far, one line each; how many more only `validate --full` checks."""
    out = []
    for c in checksums:
        if c["ok"] is not None:
            state = "ok" if c["ok"] else f"MISMATCH (computed {_digest(c['actual'])})"
            out.append(f"  checksum  {c['algorithm']} {_digest(c['expected'])} over {c['covers']}: {state}")
    later = sum(c["ok"] is None for c in checksums)
    if later:
        out.append(f"  checksums {later:,} {'more' if out else 'declared'}, checked by `validate --full`")
    return out


def _digest(hexdigest: str | None) -> str:
    """A digest shortened for people (--json gives it whole)."""
    return hexdigest if hexdigest is None or len(hexdigest) <= 16 else hexdigest[:16] + "…"


def inspect(r, a, notes=lambda t: {}) -> str:
    """What ``inspect`` prints of the open reader ``r`` (``a``: the command's arguments: file,
    json, all, metadata, tensors; ``notes(t)``: more facts about a tensor for ``--json``)."""
    d = r.describe()
    pattern = getattr(a, "tensors", None)
    names = [n for n in r.tensors if pattern is None or fnmatch.fnmatchcase(str(n), pattern)]
    native = getattr(r, "NATIVE_DTYPES", False)
    tensors = [{"name": t.name, "dtype": t.common_dtype, "format_dtype": t.dtype_name, "shape": list(t.shape),
                "offset": t.offset, "nbytes": t.nbytes, **r.inspect_notes(t), **notes(t)}
               for t in (r.tensors[n] for n in names)]
    only_meta = getattr(a, "metadata", False)
    if a.json:
        if only_meta:
            return json_text({"format": d["format"], "metadata": d.get("metadata", {})}, indent=2)
        d["tensors"] = tensors
        return json_text(d, indent=2)
    out = [f"{a.file}: {d['format'].upper()} {d.get('version', '')}".rstrip()]
    if only_meta:
        return "\n".join(out + (metadata_lines(d.get("metadata") or {}, a.all) or ["  metadata  none"]))
    if "file_size" in d:
        out.append(f"  size      {d['file_size']:,} bytes ({human(d['file_size'])})")
    if "uuid" in d:
        out.append(f"  uuid      {d['uuid']}")
    if d.get("files"):  # (a model in several files)
        more = f" ... ({len(d['files']) - 3} more)" if len(d["files"]) > 3 else ""
        out.append(f"  files     {len(d['files'])}: {', '.join(d['files'][:3])}{more}")
    if d.get("parts"):
        out.append(f"  parts     {plural(len(d['parts']), 'part')}: "
                   + shortened(", ".join(p["path"] for p in d["parts"]), a.all))
    out.extend(_checksum_lines(d.get("checksums", [])))
    if d.get("sizevars"):
        out.append("  sizevars  " + ", ".join(f"{k} := {v}" for k, v in d["sizevars"].items()))
    out.extend(metadata_lines(d.get("metadata") or {}, a.all))
    if d.get("chunks"):
        out.append(f"  chunks    {len(d['chunks'])}")
        for c in d["chunks"]:
            flags = f"flags=0x{c['flags']:x}"
            comp = f" ({c['ulen']:,} unpacked)" if c["ulen"] != c["length"] else ""
            out.append(f"    [{c['index']}] {c['fourcc']} {c['name']:<24} @{c['offset']:<10} "
                       f"{c['length']:>12,} B{comp} {flags}")
    total = sum(t["nbytes"] for t in tensors)
    matching = f" of {len(r.tensors):,} matching {pattern!r}" if pattern is not None else ""
    out.append(f"  tensors   {len(tensors)}{matching} ({human(total)})")
    shown = tensors if a.all else tensors[:MAX_ROWS]
    w = max([len(t["name"]) for t in shown] + [4])
    for t in shown:
        note = "".join(f"  {k}={t[k]}" for k in ("layout", "shard", "file") if k in t)
        where = f"@{t['offset']}" if t["offset"] is not None else (
            "(no data)" if t.get("uninitialized") else "(in parts)")
        dtype = t["format_dtype"] if native or t["dtype"] == "packed" else t["dtype"]
        out.append(f"    {t['name']:<{w}}  {dtype:<8} {fmt_shape(t['shape']):<18} "
                   f"{where:<11} {t['nbytes']:>12,} B{note}")
    if len(shown) < len(tensors):
        out.append(f"    ... {len(tensors) - len(shown)} more (--all to list every tensor)")
    return "\n".join(out)
