"""The byte map of one file: the regions its reader declares (``Reader.regions()``: header,
tables, string tables, metadata, chunks, tensors), reduced to the innermost ones, which tile
``[0, size)`` exactly -- bytes no region explains become ``padding`` (all zero) or ``gap``
regions, bytes two regions claim that neither contains the other an ``overlap`` region -- and
the page's script that draws them to scale, zoomable, aggregating at coarse zoom."""
from __future__ import annotations

import bisect
from collections import defaultdict
from itertools import islice
from typing import Callable

#: when two regions have the same extent, the one of the later kind is the inner one
RANK = {"section": 0, "chunk": 1, "header": 2, "table": 3, "strings": 3, "metadata": 4, "tensor": 5}

#: regions over one byte beyond which they are taken to overlap (and named, that many of them)
MAX_NESTED = 8

#: the kinds of the innermost regions (their index in a leaf's record)
KINDS = ["header", "table", "strings", "metadata", "chunk", "section", "tensor", "padding", "gap", "overlap"]


def tile(size: int, regions: list, tensor_index: dict, violations: list,
         zero: Callable[[int, int], bool | None]) -> dict:
    """The map's data for a file of ``size`` bytes: ``leaves`` (flat: offset, length, kind,
    ref, mark per leaf; ref indexes ``tensor_index``'s list for a tensor, else ``labels``;
    mark indexes ``marks``, -1 when no violation is at the leaf), ``outer`` (regions that hold
    others: offset, length, kind, label), ``labels``, ``marks`` ([rule ids, severity]).
    ``violations``: (offset, rule, severity) of this file; ``zero(a, b)``: whether those bytes
    are all zero (None: not at hand)."""
    regs = []
    for kind, name, off, ln, extra in regions:
        a, b = max(int(off), 0), min(int(off) + int(ln), size)
        if b > a:
            regs.append((a, b, RANK.get(kind, 3), kind, name, extra))
    starts, ends = defaultdict(list), defaultdict(list)
    for i, (a, b, *_) in enumerate(regs):
        starts[a].append(i)
        ends[b].append(i)
    bounds = sorted({0, size, *starts, *ends})
    active: dict[int, None] = {}
    segs = []  # (a, b, state): state None (nothing), an int (the innermost region), a tuple (overlap)
    containers: set[int] = set()
    for x, y in zip(bounds, bounds[1:]):
        for i in ends.get(x, ()):
            active.pop(i, None)
        for i in starts.get(x, ()):
            active[i] = None
        segs.append((x, y, _inner(active, regs, containers)))
    labels: list[str] = []
    label_of: dict = {}

    def label(text: str) -> int:
        k = label_of.get(text)
        if k is None:
            k = label_of[text] = len(labels)
            labels.append(text)
        return k
    leaves: list = []
    for a, b, state in segs:
        if isinstance(state, tuple):
            kind, ref = "overlap", label("overlap: " + ", ".join(f"{regs[i][3]} {regs[i][4]}" for i in state))
        elif state is None or state in containers:
            z = zero(a, b)
            kind = "padding" if z else "gap"
            where = "" if state is None else f" in {regs[state][3]} {regs[state][4]}"
            ref = label(("zero bytes" if z else "bytes no declaration explains" if z is False else
                         "bytes not read") + where)
        else:
            kind = regs[state][3]
            ref = tensor_index.get(regs[state][4], -1) if kind == "tensor" else label(f"{kind} {regs[state][4]}")
            if kind == "tensor" and ref < 0:
                ref = label(f"tensor {regs[state][4]}")
                kind = "metadata"
        k = KINDS.index(kind) if kind in KINDS else KINDS.index("table")
        if leaves and leaves[-1][2] == k and leaves[-1][3] == ref and leaves[-1][0] + leaves[-1][1] == a and \
                (kind != "tensor" or state == leaves[-1][5]):
            leaves[-1][1] += b - a
        else:
            leaves.append([a, b - a, k, ref, -1, state])
    marks, mark_of = _marks(leaves, violations, size)
    for i, m in mark_of.items():
        leaves[i][4] = m
    outer = [[regs[i][0], regs[i][1] - regs[i][0], regs[i][3], label(f"{regs[i][3]} {regs[i][4]}")]
             for i in sorted(containers, key=lambda i: (regs[i][0], -regs[i][1]))]
    return {"size": size, "leaves": [v for leaf in leaves for v in leaf[:5]], "outer": outer, "labels": labels,
            "marks": marks, "kinds": KINDS}


def _inner(active: dict, regs: list, containers: set):
    """The innermost of the regions over one stretch: one region, None, or the regions that
    overlap there (a tuple)."""
    if not active:
        return None
    if len(active) == 1:
        return next(iter(active))
    if len(active) > MAX_NESTED:  # deeper than any nesting a format declares: regions that overlap
        return tuple(sorted(islice(active, MAX_NESTED)))
    m = min(active, key=lambda i: (regs[i][1] - regs[i][0], -regs[i][2], i))
    a, b, rank = regs[m][0], regs[m][1], regs[m][2]
    clash = [i for i in active if i != m and not (regs[i][0] <= a and regs[i][1] >= b and
                                                  (regs[i][1] - regs[i][0] > b - a or regs[i][2] < rank))]
    if clash:
        return tuple(sorted([m, *clash]))
    containers.update(i for i in active if i != m)
    return m


def _marks(leaves: list, violations: list, size: int) -> tuple[list, dict]:
    """Each violation at the leaf holding its offset (past the end: the last leaf)."""
    if not leaves:
        return [], {}
    offs = [leaf[0] for leaf in leaves]
    at: dict[int, list] = {}
    for off, rule, severity in violations:
        if off is None:
            continue
        i = len(leaves) - 1 if off >= size else max(bisect.bisect_right(offs, int(off)) - 1, 0)
        at.setdefault(i, []).append((rule, severity))
    marks, mark_of, seen = [], {}, {}
    for i, found in sorted(at.items()):
        rules = " ".join(dict.fromkeys(r for r, _ in found))
        sev = "error" if any(s == "error" for _, s in found) else "warning"
        key = (rules, sev)
        if key not in seen:
            seen[key] = len(marks)
            marks.append([rules, sev])
        mark_of[i] = seen[key]
    return marks, mark_of


MAP_CSS = """
.bytemap{margin:10px 0 18px}.bytemap .file{font-weight:600}
.mapbox{position:relative;border:1px solid var(--line);background:#fafbfc;user-select:none}
.outer,.bar{position:relative;overflow:hidden}.outer{height:16px;border-bottom:1px solid var(--line)}.bar{height:54px}
.r{position:absolute;top:0;bottom:0;cursor:zoom-in;border-right:1px solid rgba(255,255,255,.55)}
.r.tiny{z-index:2;border-right:none}.r:hover{outline:2px solid #111;z-index:3}
.outer .r{border:1px solid #7a8691;border-top:none;border-bottom:none;font-size:10px;color:#333;overflow:hidden;
  white-space:nowrap;padding-left:2px}
.k-header{background:#6a4c93}.k-table{background:#1982c4}.k-strings{background:#52a675}.k-metadata{background:#e0b400}
.k-chunk{background:#b8c0c8}.k-section{background:#d6dbe0}.k-tensor{background:#4d9de0}.k-tensor.alt{background:#2f6fae}
.k-padding{background:repeating-linear-gradient(45deg,#eceff2 0 4px,#dfe3e7 4px 8px)}
.k-gap{background:#ff8c1a}.k-overlap{background:#9b1de5}.k-mixed{background:#8fb8de}
.outer .k-chunk,.outer .k-section,.outer .k-table,.outer .k-metadata{background:#eef1f4}
.r[data-violation]{background:repeating-linear-gradient(135deg,#e4003a 0 5px,#ff5c7a 5px 10px)!important;
  z-index:4;box-shadow:inset 0 0 0 2px #7a001f}
.r[data-severity=warning]{background:repeating-linear-gradient(135deg,#e8a200 0 5px,#ffd35c 5px 10px)!important}
.maptools{margin:4px 0;display:flex;gap:8px;align-items:center;flex-wrap:wrap}
.maptools button{font:inherit;font-size:12px}.axis{display:flex;justify-content:space-between;font-size:11px;
  color:var(--mute)}.info{min-height:1.4em;font-size:12.5px}
.legend span{display:inline-block;margin-right:10px;font-size:12px}.legend i{display:inline-block;width:12px;
  height:12px;vertical-align:-2px;margin-right:4px;border-radius:2px}
"""

#: the map's script: mcMap(section element, data, tensors) draws the leaves between lo and hi,
#: each its own element while few enough, else consecutive leaves grouped to about a pixel's worth
MAP_JS = r"""
var MC_MAX_DRAWN = 3000;
function mcMap(sec, d, tensors, onTensor){
  var L = d.leaves, n = L.length / 5, lo = 0, hi = d.size, bar = sec.querySelector('.bar'),
      outer = sec.querySelector('.outer'), info = sec.querySelector('.info'), axis = sec.querySelector('.axis');
  function first(x){ var a = 0, b = n - 1, r = n; while (a <= b){ var m = (a + b) >> 1;
    if (L[5*m] + L[5*m+1] > x){ r = m; b = m - 1; } else a = m + 1; } return r; }
  function name(i){ var k = d.kinds[L[5*i+2]], ref = L[5*i+3];
    return k === 'tensor' ? tensors[ref].name : d.labels[ref]; }
  function describe(el){
    var s = el.dataset.kind + ' ' + (el.dataset.name || el.dataset.label || '') + ' @' + Number(el.dataset.offset)
      .toLocaleString() + ', ' + Number(el.dataset.length).toLocaleString() + ' B';
    if (el.dataset.count) s += ' (' + el.dataset.count + ' regions: click to zoom)';
    if (el.dataset.tensor){ var t = tensors[+el.dataset.tensor]; s += ' ' + t.dtype + ' [' + t.shape.join(', ') + ']'; }
    if (el.dataset.violation) s += ' \u2014 ' + el.dataset.severity + ': ' + el.dataset.violation;
    return s;
  }
  function draw(){
    var W = bar.clientWidth || 1000, span = hi - lo, px = W / span, i0 = first(lo), out = [], j = i0;
    while (j < n && L[5*j] < hi) j++;
    var many = j - i0 > MC_MAX_DRAWN, quantum = span / 1200;
    function el(a, len, kind, attrs, cls){
      var x0 = (Math.max(a, lo) - lo) * px, x1 = (Math.min(a + len, hi) - lo) * px, w = x1 - x0, tiny = w < 2;
      out.push('<div class="r leaf k-' + kind + (cls || '') + (tiny ? ' tiny' : '') + '" data-kind="' + kind
        + '" data-offset="' + a + '" data-length="' + len + '"' + attrs + ' style="left:' + x0.toFixed(2)
        + 'px;width:' + Math.max(w, 2).toFixed(2) + 'px"></div>');
    }
    function mark(m){ return m < 0 ? '' : ' data-violation="' + mcEsc(d.marks[m][0]) + '" data-severity="'
      + d.marks[m][1] + '"'; }
    function one(i){
      var k = d.kinds[L[5*i+2]], ref = L[5*i+3], attrs = mark(L[5*i+4]);
      if (k === 'tensor') attrs += ' data-name="' + mcEsc(tensors[ref].name) + '" data-tensor="' + ref + '"';
      else attrs += ' data-label="' + mcEsc(d.labels[ref]) + '"';
      el(L[5*i], L[5*i+1], k, attrs, k === 'tensor' && (i & 1) ? ' alt' : '');
    }
    for (var i = i0; i < j; ){
      if (!many){ one(i); i++; continue; }
      var a = L[5*i], e = a, kinds = {}, cnt = 0, m = -1, sev = '', rules = {};
      while (i < j && (cnt === 0 || (e - a < quantum && L[5*i+1] < quantum))){
        kinds[d.kinds[L[5*i+2]]] = 1; e = L[5*i] + L[5*i+1];
        if (L[5*i+4] >= 0){ var mk = d.marks[L[5*i+4]]; mk[0].split(' ').forEach(function(r){ rules[r] = 1; });
          if (sev !== 'error') sev = mk[1]; m = 1; }
        cnt++; i++;
      }
      if (cnt === 1){ one(i - 1); continue; }
      var ks = Object.keys(kinds), kind = ks.length === 1 ? ks[0] : 'mixed';
      el(a, e - a, kind, (m < 0 ? '' : ' data-violation="' + mcEsc(Object.keys(rules).join(' ')) + '" data-severity="'
        + sev + '"') + ' data-count="' + cnt + '" data-label="' + cnt + ' regions"', '');
    }
    bar.innerHTML = out.join('');
    var o = [];
    d.outer.forEach(function(r){ if (r[0] >= hi || r[0] + r[1] <= lo) return;
      var x0 = (Math.max(r[0], lo) - lo) * px, x1 = (Math.min(r[0] + r[1], hi) - lo) * px;
      o.push('<div class="r k-' + r[2] + '" data-kind="' + r[2] + '" data-offset="' + r[0] + '" data-length="'
        + r[1] + '" data-label="' + mcEsc(d.labels[r[3]]) + '" style="left:' + x0.toFixed(2) + 'px;width:'
        + Math.max(x1 - x0, 2).toFixed(2) + 'px">' + mcEsc(d.labels[r[3]]) + '</div>'); });
    outer.innerHTML = o.join('');
    axis.innerHTML = '<span>' + lo.toLocaleString() + '</span><span>' + (hi - lo).toLocaleString()
      + ' bytes shown' + (many ? ' (regions grouped: click to zoom)' : '') + '</span><span>' + hi.toLocaleString()
      + '</span>';
  }
  function zoom(a, len){ var pad = Math.max(len * 0.04, 1); lo = Math.max(0, Math.floor(a - pad));
    hi = Math.min(d.size, Math.ceil(a + len + pad)); if (hi <= lo) hi = Math.min(d.size, lo + 1); draw(); }
  function onClick(ev){ var t = ev.target.closest('.r'); if (!t) return;
    zoom(+t.dataset.offset, +t.dataset.length); if (t.dataset.tensor && onTensor) onTensor(+t.dataset.tensor); }
  function onOver(ev){ var t = ev.target.closest('.r'); if (t){ info.textContent = describe(t);
    if (!t.title) t.title = info.textContent; } }
  bar.addEventListener('click', onClick); outer.addEventListener('click', onClick);
  bar.addEventListener('mouseover', onOver); outer.addEventListener('mouseover', onOver);
  sec.querySelector('.whole').onclick = function(){ lo = 0; hi = d.size; draw(); };
  sec.querySelector('.out').onclick = function(){ var c = (lo + hi) / 2, s = (hi - lo) * 4;
    lo = Math.max(0, Math.floor(c - s / 2)); hi = Math.min(d.size, Math.ceil(c + s / 2)); draw(); };
  window.addEventListener('resize', draw);
  draw();
  function at(off){ var i = Math.min(first(off), n - 1); if (i >= 0) zoom(L[5*i], L[5*i+1]); }
  return {zoom: zoom, at: at, size: d.size, name: name};
}
"""


def legend() -> str:
    colours = {"header": "#6a4c93", "table": "#1982c4", "strings": "#52a675", "metadata": "#e0b400",
               "chunk": "#b8c0c8", "section": "#d6dbe0", "tensor": "#4d9de0", "padding": "#dfe3e7", "gap": "#ff8c1a",
               "overlap": "#9b1de5", "violation": "#e4003a"}
    return '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{k}</span>'
                                            for k, c in colours.items()) + "</div>"


def map_section(index: int, file: str, size: int) -> str:
    """The elements a map is drawn into (``mcMap`` fills them from the JSON ``map-<index>``)."""
    from .html_page import esc
    return (f'<section class="bytemap" id="bytemap-{index}" data-file="{esc(file)}" data-size="{size}">'
            f'<div class="file">{esc(file)} <span class="muted">{size:,} bytes</span></div>'
            '<div class="maptools"><button class="whole">whole file</button><button class="out">zoom out</button>'
            '<span class="muted">click a region to zoom into it</span></div>'
            '<div class="mapbox"><div class="outer"></div><div class="bar"></div></div>'
            '<div class="axis"></div><div class="info muted"></div></section>')
