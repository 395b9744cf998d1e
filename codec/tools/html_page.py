"""The pieces every HTML report of modelcodec is built from: one self-contained page (inline CSS,
JS and SVG, a Content-Security-Policy that forbids the network), data embedded as JSON, a
histogram drawn as SVG, a sortable and filterable table of tensors.  ``inspect --html`` and
``diff --html`` build their pages from them."""
from __future__ import annotations

import html
import json
import math

import numpy as np

from ..ui.display import finite as _finite

#: what the page may load: nothing from anywhere; its own inline styles and scripts, data: images
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; form-action 'none'; " \
      "base-uri 'none'"

BASE_CSS = """
:root{--fg:#1d232a;--mute:#5b6672;--line:#d5dbe1;--bg:#fff;--bad:#d0021b;--warn:#e8a200;--ok:#1a7f37}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);
  margin:0;padding:16px 22px}
h1{font-size:20px;margin:0 0 6px}h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid var(--line)}
code,.mono,td.num{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;
  vertical-align:top}
th{background:#f3f5f7;position:sticky;top:0;cursor:pointer;user-select:none;white-space:nowrap}
td.num{text-align:right;white-space:nowrap}
.verdict{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;font-weight:600}
.verdict.ok{background:var(--ok)}.verdict.bad{background:var(--bad)}
.kv td:first-child{color:var(--mute);white-space:nowrap}
details summary{cursor:pointer;color:var(--mute)}
pre{white-space:pre-wrap;word-break:break-all;margin:4px 0;max-width:100%}
.violation td{background:#fff1f0}.warning td{background:#fff8e1}
.muted{color:var(--mute)}
"""


def esc(text) -> str:
    """Text as HTML (quotes too: safe in attributes)."""
    return html.escape(str(text), quote=True)


def json_script(element_id: str, obj) -> str:
    """``obj`` as JSON in a non-executed script element (``</`` cannot end it early)."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=_plain, allow_nan=False)
    except ValueError:  # a NaN or Inf (JSON has none): as text
        text = json.dumps(_finite(obj), separators=(",", ":"), ensure_ascii=False, default=_plain, allow_nan=False)
    text = text.replace("</", "<\\/").replace("<!--", "<\\!--").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def _plain(o):
    """JSON for what the readers hand out: numpy scalars and arrays, bytes, anything else as text."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (bytes, bytearray, memoryview)):
        return bytes(o).hex()
    return str(o)


def page(title: str, body: str, *, css: str = "", js: str = "") -> str:
    """A whole self-contained HTML document: nothing in it reaches the network."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{BASE_CSS}{css}</style></head>\n<body>\n{body}\n"
            f"<script>{js}</script>\n</body></html>\n")


def finite_range(values: np.ndarray) -> tuple[float, float] | None:
    """(min, max) of the finite values (None: there is none)."""
    v = values[np.isfinite(values)]
    return (float(v.min()), float(v.max())) if v.size else None


#: values a histogram is counted over at most (evenly strided over those given)
HISTOGRAM_SAMPLE = 1 << 16


def histogram(values: np.ndarray, bins: int = 48, *, span: tuple | None = None, all_finite: bool = False) -> dict | None:
    """The finite values' histogram: {"lo", "hi", "counts"} (None: no finite value); ``span``:
    their (min, max) when known, ``all_finite``: no NaN or Inf among them (passes saved)."""
    r = span if span is not None and None not in span else finite_range(values)
    if r is None:
        return None
    lo, hi = r
    if hi == lo:
        hi = lo + 1.0 if lo == 0 else lo + abs(lo) * 1e-6
    v = values if all_finite else values[np.isfinite(values)]
    if v.size > HISTOGRAM_SAMPLE:  # (48 bins' shape does not need more: every k-th value)
        v = v[::-(-v.size // HISTOGRAM_SAMPLE)]
    if v.dtype.kind != "f" or v.dtype.itemsize < 4:
        v = v.astype(np.float64)
    # equal-width bins, [lo, hi] closed at the top (as numpy.histogram's), by one bincount
    step = (hi - lo) / bins
    with np.errstate(over="ignore", invalid="ignore"):
        at = (v - v.dtype.type(lo)) / v.dtype.type(step) if step > 0 and np.isfinite(step) else np.zeros(v.size)
        if not np.all(np.isfinite(at)):  # (a range past the dtype's: in float64)
            at = (v.astype(np.float64) - lo) / step
    idx = np.clip(at, 0, bins - 1).astype(np.intp)
    return {"lo": lo, "hi": hi, "counts": np.bincount(idx, minlength=bins).tolist()}


def histogram_svg(name: str, hist: dict, *, width: int = 320, height: int = 96, attr: str = "data-histogram",
                  colour: str = "#3d7cc9", label: str = "") -> str:
    """A histogram as an inline SVG element carrying ``attr`` = ``name`` (log-scaled counts so
    that rare values stay visible; its axis says the range)."""
    counts = hist["counts"]
    n = len(counts) or 1
    top = math.log1p(max(counts) if counts else 1) or 1.0
    bw = width / n
    plot = height - 16
    bars = "".join(
        f'<rect x="{i * bw:.2f}" y="{plot - plot * math.log1p(c) / top:.2f}" width="{max(bw - 0.6, 0.6):.2f}" '
        f'height="{plot * math.log1p(c) / top:.2f}"><title>{c:,}</title></rect>' for i, c in enumerate(counts) if c)
    lo, hi = hist["lo"], hist["hi"]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" {attr}="{esc(name)}" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="histogram of {esc(name)}">'
            f'<rect width="{width}" height="{plot}" fill="#f6f8fa"/><g fill="{colour}">{bars}</g>'
            f'<text x="0" y="{height - 3}" font-size="10" fill="#5b6672">{lo:.4g}</text>'
            f'<text x="{width / 2}" y="{height - 3}" font-size="10" fill="#5b6672" text-anchor="middle">'
            f'{esc(label)}</text>'
            f'<text x="{width}" y="{height - 3}" font-size="10" fill="#5b6672" text-anchor="end">{hi:.4g}</text></svg>')


TABLE_CSS = """
.ttools{margin:6px 0}.ttools input{font:inherit;padding:3px 6px;width:320px}
.tscroll{max-height:520px;overflow:auto;border:1px solid var(--line)}
.tscroll tr.sel td{background:#e6f0fb}.tscroll tbody tr{cursor:pointer}
th.asc:after{content:" \\25B2"}th.desc:after{content:" \\25BC"}
"""

#: a table filled from JSON rows: sort by a click on a column's head, filter by text, rows drawn
#: a page at a time (100,000 rows stay fast); a click on a row calls window.onRowSelect(row)
TABLE_JS = r"""
function mcTable(el, rows, cols, opts){
  opts = opts || {};
  var shown = 500, key = null, dir = 1, view = rows.slice(), q = '';
  el.innerHTML = '<div class="ttools"><input type="search" placeholder="filter: name, dtype, shape\u2026" '
    + 'aria-label="filter"> <span class="muted count"></span></div><div class="tscroll"><table><thead><tr></tr>'
    + '</thead><tbody></tbody></table></div><button class="more" hidden>show more</button>';
  var input = el.querySelector('input'), head = el.querySelector('thead tr'), body = el.querySelector('tbody'),
      more = el.querySelector('.more'), count = el.querySelector('.count');
  cols.forEach(function(c, i){
    var th = document.createElement('th'); th.textContent = c.title; th.dataset.col = c.key;
    th.onclick = function(){ if (key === i) dir = -dir; else { key = i; dir = 1; }
      head.querySelectorAll('th').forEach(function(t){ t.className = ''; });
      th.className = dir > 0 ? 'asc' : 'desc'; apply(); };
    head.appendChild(th);
  });
  function text(r){ return cols.map(function(c){ return c.filter ? String(c.get(r)) : ''; }).join(' ').toLowerCase(); }
  function apply(){
    var words = q.toLowerCase().split(/\s+/).filter(Boolean);
    view = rows.filter(function(r){ if (!words.length) return true; var t = text(r);
      return words.every(function(w){ return t.indexOf(w) >= 0; }); });
    if (key !== null){ var c = cols[key];
      view.sort(function(a, b){ var x = c.sortKey ? c.sortKey(a) : c.get(a), y = c.sortKey ? c.sortKey(b) : c.get(b);
        if (x === y) return 0; if (x === null || x === undefined) return 1; if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir; }); }
    shown = 500; draw();
  }
  function draw(){
    var html = [];
    for (var i = 0; i < Math.min(shown, view.length); i++){
      var r = view[i];
      html.push('<tr>');
      html.push(cols.map(function(c){ var v = c.show ? c.show(r) : mcEsc(c.get(r));
        return '<td' + (c.num ? ' class="num"' : '') + '>' + v + '</td>'; }).join(''));
      html.push('</tr>');
    }
    body.innerHTML = html.join('');
    var trs = body.children;
    for (var j = 0; j < trs.length; j++) (function(r, tr){ tr.onclick = function(){
      body.querySelectorAll('tr.sel').forEach(function(t){ t.classList.remove('sel'); }); tr.classList.add('sel');
      if (opts.onSelect) opts.onSelect(r); }; if (opts.rowAttrs) opts.rowAttrs(r, tr); })(view[j], trs[j]);
    more.hidden = view.length <= shown;
    count.textContent = view.length + ' of ' + rows.length + (view.length > shown ? ' (first ' + shown + ' shown)' : '');
  }
  input.oninput = function(){ q = input.value; apply(); };
  more.onclick = function(){ shown += 2000; draw(); };
  apply();
}
function mcEsc(s){ return String(s === null || s === undefined ? '' : s).replace(/[&<>"']/g,
  function(c){ return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]; }); }
"""


def tensor_table(element_id: str) -> str:
    """Where :data:`TABLE_JS`'s ``mcTable`` draws a table (the page's script calls it with the rows)."""
    return f'<div id="{esc(element_id)}" class="ttable"></div>'
