"""``modelcodec inspect FILE --html OUT.html [--full]``: one self-contained HTML page about a
model -- a summary (format, size, tensors, bytes by dtype, metadata, the validation verdict and
every violation), a byte map of each of its files drawn from the regions its reader declares
(``Reader.byte_maps()``, see :mod:`codec.tools.html_map`), and a table of its tensors with the
statistics and histogram of each one's values (:mod:`codec.tools.html_stats`).  Written for any
file whose format is recognised, however broken; the exit status is ``validate``'s."""
from __future__ import annotations

import json
import math
import os
from collections import Counter

import numpy as np

from .. import errors as E
from .html_map import MAP_CSS, MAP_JS, legend, map_section, tile
from .html_page import TABLE_CSS, TABLE_JS, esc, histogram, histogram_svg, json_script, page, tensor_table
from .html_stats import limit_for, stats_many, tensor_values

#: tensors up to which every numeric tensor's histogram is drawn in the page
MAX_HISTOGRAMS = 1000
#: metadata longer than this (as JSON) is folded
FOLD_METADATA = 600
#: values held for one batch of statistics
BATCH = 1 << 22
#: bytes checked at once for zeros (a gap's bytes)
_PIECE = 1 << 24


def open_collecting(source: str, strict: bool = True, **options):
    """The reader of ``source`` (a file, a set, a URL) that collects its violations instead of
    raising them: a report is made of any file whose format is recognised."""
    from .. import registry
    from ..remote_file import RemoteFile, is_url
    if is_url(source) and registry.claiming(source) is None:
        return RemoteFile(source, strict=strict, _collect=True, **options)
    entry = registry.resolve(source, None)
    return entry.reader(source, strict=strict, _collect=True, **options)


def _zero_test(src):
    """``zero(a, b)``: whether bytes [a, b) are all zero (None: not at hand)."""
    def zero(a: int, b: int):
        if not src.has(a, b - a):
            return None
        for s in range(a, b, _PIECE):
            if np.any(src.array(np.uint8, min(_PIECE, b - s), s)):
                return False
        return True
    return zero


def _round(x):
    """Six significant digits; None for none, and for a sum that overflowed (JSON has no Inf)."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.6g}")


def _tensor_rows(r, full: bool, remote: bool) -> tuple[list, list, dict]:
    """(rows for the page, histogram SVGs, name -> row index); statistics computed in batches
    of about :data:`BATCH` values (many small tensors at once, few large ones at a time)."""
    rows, svgs, index = [], [], {}
    names = list(r.tensors)
    draw = len(names) <= MAX_HISTOGRAMS
    limit = limit_for(len(names))
    pending: list = []  # (row, values)

    def flush():
        for (row, values), st in zip(pending, stats_many([v for _, v in pending])):
            row["stats"] = [_round(st[k]) for k in ("min", "max", "mean", "std")] + \
                [st["nan"], st["inf"], _round(st["zero_fraction"])]
            h = histogram(values, span=(st["min"], st["max"]), all_finite=not (st["nan"] or st["inf"])) if draw else None
            if h is not None:
                row["hist"] = 1
                svgs.append(histogram_svg(row["name"], h, label="sample" if "sample" in row else ""))
        pending.clear()
    held = 0
    for name in names:
        index[name] = len(rows)
        try:
            t = r.tensors[name]
        except E.FormatError as e:
            rows.append({"name": name, "dtype": "?", "shape": [], "offset": None, "nbytes": None,
                         "error": e.render()})
            continue
        row = {"name": name, "dtype": t.common_dtype, "fdtype": t.dtype_name, "shape": list(t.shape),
               "offset": t.offset, "nbytes": t.nbytes}
        values, said = tensor_values(r, t, remote=remote, full=full, limit=limit)
        row.update(said)
        rows.append(row)
        if values is not None:
            pending.append((row, values))
            held += values.size
            if held > BATCH:
                flush()
                held = 0
    flush()
    return rows, svgs, index


def _summary(r, rep, maps: list, rows: list) -> str:
    try:
        d = r.describe()
    except E.FormatError:
        d = {}
    size = sum(m[1] for m in maps)
    by_dtype: Counter = Counter()
    for row in rows:
        if row.get("nbytes") is not None:
            by_dtype[row["dtype"]] += row["nbytes"]
    meta = r.metadata if d.get("metadata") is None else d["metadata"]
    text = json.dumps(meta, indent=1, ensure_ascii=False, default=str)
    meta_html = f"<pre>{esc(text)}</pre>" if len(text) <= FOLD_METADATA else \
        f"<details><summary>{len(meta)} keys ({len(text):,} characters): show</summary><pre>{esc(text)}</pre></details>"
    verdict = ('<span class="verdict ok">valid</span>' if rep.ok else
               f'<span class="verdict bad">{len(rep.errors)} error(s)</span>')
    warn = f" <span class='muted'>{len(rep.warnings)} warning(s)</span>" if rep.warnings else ""
    kv = [("format", f"{esc(rep.format.upper())} {esc(d.get('version', ''))}"),
          ("size", f"{size:,} bytes" + (f" in {len(maps)} files" if len(maps) > 1 else "")),
          ("tensors", f"{len(rows):,}"),
          ("bytes by dtype", ", ".join(f"{esc(k)} {v:,}" for k, v in by_dtype.most_common()) or "—"),
          ("check", f"{verdict}{warn} <span class='muted'>{esc(rep.level)} level: "
                    f"{esc('; '.join(rep.checked))}</span>"),
          ("metadata", meta_html)]
    kv += [("note", esc(n)) for n in rep.notes]
    out = ['<table class="kv" id="summary">' + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in kv)
           + "</table>"]
    if rep.violations:
        out.append('<h2>Violations</h2><table id="violations"><thead><tr><th>severity</th><th>rule</th><th>path</th>'
                   '<th>offset</th><th>file</th><th>message</th></tr></thead><tbody>')
        for v in rep.violations:
            sev = rep.severity(v)
            out.append(f'<tr class="{"violation" if sev == "error" else "warning"}" data-rule="{esc(v.rule)}" '
                       f'data-offset="{"" if v.offset is None else v.offset}" data-file="{esc(v.source or "")}">'
                       f'<td>{sev}</td><td><code>{esc(v.rule)}</code></td><td><code>{esc(v.path)}</code></td>'
                       f'<td class="num">{"—" if v.offset is None else f"{v.offset:,}"}</td>'
                       f'<td>{esc(os.path.basename(v.source or ""))}</td><td>{esc(v.message)}</td></tr>')
        out.append("</tbody></table>")
    return "".join(out)


def build(source: str, *, full: bool = False, strict: bool = True, **options):
    """The page about ``source`` and the validation report it shows: (html, report)."""
    from ..remote_file import is_url
    with open_collecting(source, strict, **options) as r:
        rep = r.validate(full=full)
        remote = is_url(source)
        maps = r.byte_maps()
        rows, svgs, index = _tensor_rows(r, full, remote=remote)
        summary = _summary(r, rep, maps, rows)
        map_data = []
        for i, (name, size, regions, src) in enumerate(maps):
            here = [(v.offset, v.rule, rep.severity(v)) for v in rep.violations
                    if len(maps) == 1 or v.source == name]
            map_data.append(tile(size, regions, index, here, _zero_test(src)))
    title = f"{os.path.basename(source.rstrip('/')) or source} — modelcodec"
    body = [f"<h1>{esc(os.path.basename(source.rstrip('/')) or source)}</h1><div class='muted mono'>{esc(source)}</div>",
            summary, "<h2>Byte map</h2>", legend()]
    body += [map_section(i, m[0], m[1]) + json_script(f"map-{i}", d) for i, (m, d) in enumerate(zip(maps, map_data))]
    body += ["<h2>Tensors</h2>", '<div id="detail" class="detail muted">select a tensor</div>', tensor_table("tensors"),
             json_script("tensor-data", rows), '<div id="hists" hidden>' + "".join(svgs) + "</div>"]
    if len(rows) > MAX_HISTOGRAMS:
        body.append(f'<p class="muted">Histograms are drawn for models of up to {MAX_HISTOGRAMS:,} tensors '
                    f'(this one has {len(rows):,}); the statistics are in the table.</p>')
    return page(title, "\n".join(body), css=MAP_CSS + TABLE_CSS + REPORT_CSS, js=TABLE_JS + MAP_JS + REPORT_JS), rep


def write_report(source: str, out: str, *, full: bool = False, strict: bool = True, **options) -> int:
    """Write the page about ``source`` to ``out`` (atomically); ``validate``'s exit status."""
    from ..io.atomic import atomic_write
    text, rep = build(source, full=full, strict=strict, **options)
    with atomic_write(out) as f:
        f.write(text.encode("utf-8"))
    return 0 if rep.ok else 1


REPORT_CSS = """
.detail{border:1px solid var(--line);padding:8px 10px;margin:8px 0;min-height:40px;display:flex;gap:18px;
  flex-wrap:wrap;align-items:flex-start}.detail table td{border:none;padding:1px 8px 1px 0}
#violations tbody tr{cursor:pointer}
"""

REPORT_JS = r"""
(function(){
  var tensors = JSON.parse(document.getElementById('tensor-data').textContent), maps = [];
  document.querySelectorAll('.bytemap').forEach(function(sec, i){
    maps.push(mcMap(sec, JSON.parse(document.getElementById('map-' + i).textContent), tensors, select)); });
  var hists = {};
  document.querySelectorAll('#hists [data-histogram]').forEach(function(s){ hists[s.getAttribute('data-histogram')] = s; });
  function num(x){ return x === null || x === undefined ? '\u2014' : (typeof x === 'number' ? x.toLocaleString(undefined,
    {maximumSignificantDigits: 6}) : mcEsc(x)); }
  function select(i){
    var t = tensors[i], d = document.getElementById('detail'), s = t.stats, rows = [];
    rows.push(['name', mcEsc(t.name)], ['dtype', mcEsc(t.dtype) + (t.fdtype && t.fdtype !== t.dtype ? ' (' +
      mcEsc(t.fdtype) + ')' : '')], ['shape', '[' + t.shape.join(', ') + ']'], ['offset', num(t.offset)],
      ['bytes', num(t.nbytes)]);
    if (t.packed) rows.push(['packed', mcEsc(JSON.stringify(t.packed))]);
    if (s) rows.push(['min', num(s[0])], ['max', num(s[1])], ['mean', num(s[2])], ['std', num(s[3])],
      ['NaN', num(s[4])], ['Inf', num(s[5])], ['zeros', num(s[6])]);
    if (t.sample) rows.push(['sample', mcEsc(t.sample)]);
    if (t.error) rows.push(['error', mcEsc(t.error)]);
    d.className = 'detail';
    d.innerHTML = '<table>' + rows.map(function(r){ return '<tr><td class="muted">' + r[0] + '</td><td>' + r[1]
      + '</td></tr>'; }).join('') + '</table>';
    var h = hists[t.name]; if (h){ var c = h.cloneNode(true); c.removeAttribute('data-histogram'); d.appendChild(c); }
  }
  function focusTensor(t){ maps.forEach(function(m, k){ var sec = document.getElementById('bytemap-' + k);
    if (t.offset !== null && t.offset < m.size && (maps.length === 1 || !t.file || t.file === sec.dataset.file))
      m.zoom(t.offset, Math.max(t.nbytes, 1)); }); }
  var cols = [
    {key: 'name', title: 'name', get: function(t){ return t.name; }, filter: true},
    {key: 'dtype', title: 'dtype', get: function(t){ return t.packed && t.fdtype ? t.dtype + ' ' + t.fdtype : t.dtype; },
     filter: true},
    {key: 'shape', title: 'shape', get: function(t){ return '[' + t.shape.join(', ') + ']'; }, filter: true,
     sortKey: function(t){ return t.shape.reduce(function(a, b){ return a * b; }, 1); }},
    {key: 'offset', title: 'offset', get: function(t){ return t.offset; }, num: true, show: function(t){ return num(t.offset); }},
    {key: 'nbytes', title: 'bytes', get: function(t){ return t.nbytes; }, num: true, show: function(t){ return num(t.nbytes); }},
    {key: 'min', title: 'min', get: function(t){ return t.stats ? t.stats[0] : null; }, num: true,
     show: function(t){ return t.stats ? num(t.stats[0]) : (t.packed ? 'packed' : ''); }},
    {key: 'max', title: 'max', get: function(t){ return t.stats ? t.stats[1] : null; }, num: true,
     show: function(t){ return t.stats ? num(t.stats[1]) : ''; }},
    {key: 'mean', title: 'mean', get: function(t){ return t.stats ? t.stats[2] : null; }, num: true,
     show: function(t){ return t.stats ? num(t.stats[2]) : ''; }},
    {key: 'std', title: 'std', get: function(t){ return t.stats ? t.stats[3] : null; }, num: true,
     show: function(t){ return t.stats ? num(t.stats[3]) : ''; }},
    {key: 'naninf', title: 'NaN/Inf', get: function(t){ return t.stats ? t.stats[4] + t.stats[5] : null; }, num: true,
     show: function(t){ return t.stats ? t.stats[4] + '/' + t.stats[5] : ''; }},
    {key: 'zeros', title: 'zeros', get: function(t){ return t.stats ? t.stats[6] : null; }, num: true,
     show: function(t){ return t.stats ? num(t.stats[6]) : ''; }}
  ];
  tensors.forEach(function(t, i){ t.i = i; });
  mcTable(document.getElementById('tensors'), tensors, cols, {
    onSelect: function(t){ select(t.i); focusTensor(t); },
    rowAttrs: function(t, tr){ tr.dataset.name = t.name; }});
  document.querySelectorAll('#violations tbody tr').forEach(function(tr){ tr.onclick = function(){
    var off = tr.dataset.offset; if (off === '') return; off = +off;
    maps.forEach(function(m, k){ var sec = document.getElementById('bytemap-' + k);
      if (maps.length === 1 || sec.dataset.file === tr.dataset.file){ m.at(off);
        sec.scrollIntoView({block: 'center'}); } }); }; });
  if (tensors.length) select(0);
})();
"""
