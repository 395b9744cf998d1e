"""``modelcodec diff A B --html OUT``: what :func:`codec.diff` found, as one self-contained page
(the inspector's page shell, table and histograms: :mod:`codec.tools.html_page`).

The page holds the two sides, the verdict and the count of each status, the metadata keys
added, removed and changed, a table of every tensor (sortable, filterable: name, status,
dtypes, shapes, differing elements, largest absolute and relative difference) and, for each
tensor whose values differ, a histogram of ``|a - b|`` over the decades of
:data:`codec.compare.HISTOGRAM_EDGES` (an SVG element with ``data-diff-histogram`` = the
tensor's name).
"""
from __future__ import annotations

from ..compare import HISTOGRAM_EDGES, Diff
from .html_page import TABLE_CSS, TABLE_JS, esc, histogram_svg, json_script, page, tensor_table

_CSS = """
.verdict{font-weight:600}.verdict.same{color:#1a7f37}.verdict.differ{color:#c62828}
.sides td,.sides th{padding:2px 10px 2px 0;text-align:left}
.st-different,.st-dtype_changed,.st-shape_changed,.st-unreadable{color:#c62828}
.st-only_a,.st-only_b{color:#9a6700}.st-identical,.st-equal{color:#1a7f37}
.hists{display:flex;flex-wrap:wrap;gap:12px}.hists figure{margin:0}.hists figcaption{font-size:12px}
"""

_JS = r"""
(function(){
  var rows = JSON.parse(document.getElementById('diff-rows').textContent);
  var cols = [
    {key:'name', title:'name', get:function(r){ return r.name; }, filter:true},
    {key:'status', title:'status', get:function(r){ return r.status; }, filter:true,
     show:function(r){ return '<span class="st-' + mcEsc(r.status) + '">' + mcEsc(r.status) + '</span>'; }},
    {key:'dtype', title:'dtype A \u2192 B', get:function(r){ return r.dtype; }, filter:true},
    {key:'shape', title:'shape A \u2192 B', get:function(r){ return r.shape; }, filter:true},
    {key:'differing', title:'differing', get:function(r){ return r.differing; }, num:true},
    {key:'max_abs', title:'max |a\u2212b|', get:function(r){ return r.max_abs; }, num:true},
    {key:'max_rel', title:'max rel', get:function(r){ return r.max_rel; }, num:true}
  ];
  mcTable(document.getElementById('diff-tensors'), rows, cols, {
    rowAttrs: function(r, tr){ tr.dataset.name = r.name; tr.dataset.status = r.status; },
    onSelect: function(r){ var h = document.querySelector('[data-diff-histogram="' + CSS.escape(r.name) + '"]');
      if (h) h.scrollIntoView({block: 'nearest'}); }
  });
})();
"""


def _pair(a, b) -> str:
    return "" if a is None and b is None else str(a) if a == b else f"{a} \u2192 {b}"


def _decades(counts) -> dict | None:
    """The bins of ``counts`` (over HISTOGRAM_EDGES) from the first to the last that holds an
    element, as the histogram drawing takes them; None: nothing differs."""
    held = [i for i, c in enumerate(counts) if c]
    if not held:
        return None
    lo, hi = held[0], held[-1]
    return {"lo": HISTOGRAM_EDGES[lo], "hi": HISTOGRAM_EDGES[hi + 1], "counts": list(counts[lo:hi + 1])}


def render_html(d: Diff) -> str:
    """The whole page of the comparison ``d``."""
    verdict = ("every tensor equal" + (" (within the tolerances)" if d.rtol or d.atol else " (bit for bit)")
               if d.equal else "the models differ")
    counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in d.counts().items() if n)
    body = [f"<h1>diff: {esc(d.a.source)} \u2194 {esc(d.b.source)}</h1>",
            f'<p class="verdict {"same" if d.equal else "differ"}" data-equal="{str(d.equal).lower()}">'
            f"{esc(verdict)}</p>",
            f"<p>{esc(counts or 'no tensors')}; rtol {d.rtol:g}, atol {d.atol:g}</p>",
            '<table class="sides"><tr><th></th><th>source</th><th>format</th><th>tensors</th><th>bytes</th></tr>']
    for label, s in (("A", d.a), ("B", d.b)):
        body.append(f"<tr><th>{label}</th><td>{esc(s.source)}</td><td>{esc(s.format)}</td>"
                    f'<td class="num">{s.tensors:,}</td><td class="num">{s.nbytes:,}</td></tr>')
    body.append("</table>")
    body.append("<h2>Metadata</h2>")
    if d.metadata_equal:
        body.append('<p class="muted">the same keys with the same values</p>')
    else:
        body.append('<table class="metadata"><tr><th>key</th><th>change</th><th>A</th><th>B</th></tr>')
        for what, items in (("added", {k: (None, v) for k, v in d.metadata_added.items()}),
                            ("removed", {k: (v, None) for k, v in d.metadata_removed.items()}),
                            ("changed", d.metadata_changed)):
            for k, (va, vb) in sorted(items.items()):
                body.append(f'<tr data-key="{esc(k)}" data-change="{what}"><td>{esc(k)}</td><td>{what}</td>'
                            f"<td>{'' if va is None else esc(_short(va))}</td>"
                            f"<td>{'' if vb is None else esc(_short(vb))}</td></tr>")
        body.append("</table>")
    rows = [{"name": t.name, "status": t.status, "dtype": _pair(t.dtype_a, t.dtype_b),
             "shape": _pair(_shape(t.shape_a), _shape(t.shape_b)), "differing": t.differing,
             "max_abs": t.max_abs, "max_rel": t.max_rel} for t in d.tensors]
    body += ["<h2>Tensors</h2>", tensor_table("diff-tensors"), json_script("diff-rows", rows)]
    hists = [(t, h) for t in d.tensors if t.histogram is not None and (h := _decades(t.histogram)) is not None]
    if hists:
        body.append("<h2>Differences by size</h2><div class=\"hists\">")
        for t, h in hists:
            body.append(f"<figure>{histogram_svg(t.name, h, attr='data-diff-histogram', colour='#c62828', label='|a - b|')}"
                        f"<figcaption>{esc(t.name)}: {t.differing:,} of {t.compared:,} differ</figcaption></figure>")
        body.append("</div>")
    return page(f"diff {d.a.source} {d.b.source}", "\n".join(body), css=TABLE_CSS + _CSS, js=TABLE_JS + _JS)


def _shape(s) -> str | None:
    return None if s is None else "[" + ", ".join(map(str, s)) + "]"


def _short(v, n: int = 200) -> str:
    r = repr(v)
    return r if len(r) <= n else r[:n - 1] + "\u2026"


def write_html(d: Diff, out: str) -> None:
    """Write the page of ``d`` to ``out`` (atomically)."""
    from ..io.atomic import atomic_write
    with atomic_write(out) as f:
        f.write(render_html(d).encode("utf-8"))
