"""``modelcodec diff``'s human report of a :class:`codec.compare.Diff`: one line per tensor that
is not bit-identical, the metadata keys that differ, a summary line."""
from __future__ import annotations

import json

from ..compare import Diff, TensorDiff
from ..ui.display import fmt_shape, json_default, shortened


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.6g}"


def _line(t: TensorDiff) -> str:
    kind_a = f"{t.dtype_a} {fmt_shape(t.shape_a)}" if t.dtype_a is not None else ""
    kind_b = f"{t.dtype_b} {fmt_shape(t.shape_b)}" if t.dtype_b is not None else ""
    if t.status == "only_a":
        return f"- {t.name}: only in A ({kind_a})"
    if t.status == "only_b":
        return f"+ {t.name}: only in B ({kind_b})"
    if t.status == "shape_changed":
        return f"! {t.name}: shape changed, {kind_a} -> {kind_b}"
    if t.status == "unreadable":
        return f"! {t.name}: could not be read: {t.error}"
    if t.status == "different" and t.error:
        return f"~ {t.name}: {kind_a}: {t.error}"
    what = "elements" if not t.bytewise else "bytes"
    head = f"~ {t.name}: {kind_a}"
    if t.status == "dtype_changed":
        head = f"! {t.name}: dtype changed, {kind_a} -> {kind_b}"
        if t.bytewise or t.dtype_a == "packed" or t.dtype_b == "packed":
            return head + (": values not compared" if not t.compared else
                           f": {t.differing:,} of {t.compared:,} bytes differ")
        if not t.differing and t.max_abs is None:
            return head + ", every value the same"
    elif t.status == "equal":
        how = (f"each within the tolerances (max |a-b| {_num(t.max_abs)})" if t.max_abs is not None else
               "each the same value (-0.0 and 0.0, or NaNs of other payloads)")
        return f"= {t.name}: {kind_a}: {t.bits_differ:,} of {t.compared:,} {what} differ in their bits, {how}"
    parts = [f"{t.differing:,} of {t.compared:,} {what} differ"]
    if t.max_abs is not None:
        at = "[" + ", ".join(map(str, t.max_at)) + "]" if t.max_at is not None else "?"
        parts.append(f"max |a-b| {_num(t.max_abs)} at {at} ({_num(t.a_value)} vs {_num(t.b_value)}), "
                     f"max rel {_num(t.max_rel)}")
    if t.nan_mismatches:
        parts.append(f"{t.nan_mismatches:,} NaN against a number")
    return f"{head}: " + ", ".join(parts)


def render(d: Diff, *, whole_metadata: bool = False) -> str:
    """The human report: one line per tensor that is not bit-identical, the metadata keys that
    differ, and a summary line."""
    def show(v) -> str:
        return shortened(json.dumps(v, ensure_ascii=False, default=json_default), whole_metadata)
    out = [f"A: {d.a.source} ({d.a.format}, {d.a.tensors} tensors)", f"B: {d.b.source} ({d.b.format}, "
           f"{d.b.tensors} tensors)"]
    out += [_line(t) for t in d.changed]
    out += [f"- metadata {k!r}: only in A ({show(v)})" for k, v in d.metadata_removed.items()]
    out += [f"+ metadata {k!r}: only in B ({show(v)})" for k, v in d.metadata_added.items()]
    out += [f"~ metadata {k!r}: {show(x)} -> {show(y)}" for k, (x, y) in d.metadata_changed.items()]
    c = d.counts()
    names = {"identical": "identical", "equal": "equal in value", "different": "different",
             "dtype_changed": "dtype changed", "shape_changed": "shape changed", "only_a": "only in A",
             "only_b": "only in B", "unreadable": "unreadable"}
    tol = f" (rtol {_num(d.rtol)}, atol {_num(d.atol)})" if d.rtol or d.atol else ""
    summary = ", ".join(f"{n} {names[s]}" for s, n in c.items() if n) or "no tensors"
    meta = ("metadata equal" if d.metadata_equal else
            f"metadata: {len(d.metadata_added)} added, {len(d.metadata_removed)} removed, "
            f"{len(d.metadata_changed)} changed")
    out.append(f"{'equal' if d.equal else 'DIFFERENT'}{tol}: {len(d.tensors)} tensors: {summary}; {meta}")
    return "\n".join(out) + "\n"
