"""Where bytes lie: tables and records, counts bounded by the bytes that exist, declared sizes,
order, zero padding, regions inside bounds, tiling and overlaps."""
from __future__ import annotations

import numpy as np

from ...schemas.dsl import FILE_END, DeclaresSize, Disjoint, Fits, Ordered, Records, Region, Size, Tiles, Zeros

from ... import errors as E
from ..records import record_of
from .context import LIMIT, Context, Findings, _bad, _Cols, _left_out, _row_error, _Tab, _where_all, element_sizes


def _records(r: Records, ctx: Context, buf, out: Findings) -> bool:
    rec = record_of(r.record)
    n, at = int(ctx.header[r.count]), ctx.value(r.at)
    if r.end is not None:  # the section they must lie in: counts bounded by it first
        end = ctx.value(r.end)
        if n * rec.min_size() > end - at:
            term = f"{ctx.hrec.name}.{r.count}"
            out.errors.append(E.TruncatedError(ctx.fmt, ctx.offset_of(term), term, r.rule,
                                               f"{n} {r.path} entries need at least {n * rec.min_size()} bytes, the "
                                               f"section has {end - at}", expected=end - at, actual=n * rec.min_size()))
            out.stopped_at = at
            return False
        buf = memoryview(buf)[:end] if not isinstance(buf, memoryview) else buf[:end]
    rows: list = []
    pos = at
    failed = None
    try:
        rows.extend(rec.iter_parse(buf, at, n, r.path))
    except E.FormatError as e:  # the rows before it are still there to be checked
        failed = e
    if rows:
        pos = rows[-1][0] + rec.size_of(rows[-1][1])
    cols: dict = {}
    for f in rec.fields:
        vals = [row[f.name] for _, row in rows]
        cols[f.name] = (np.array(vals, dtype=np.uint64) if f.kind == "int" else vals)
    # (a field's offset in a row: worked out only for the rows a finding names, once per row)
    offsets: dict = {}

    def field_at(i: int, f: str | None) -> int:
        if not f:
            return rows[i][0]
        o = offsets.get(i)
        if o is None:
            o = offsets[i] = rec.field_offsets(rows[i][1])
        return rows[i][0] + o[f]
    ctx.tables[rec.name] = _Tab(rec.name, r.path, _Cols(cols), len(rows), pos, field_at, rows)
    if failed is not None:
        out.errors.append(failed)
        out.stopped_at = failed.offset if failed.offset is not None else pos
        return False
    return True


def _fits(r: Fits, ctx: Context, out: Findings) -> bool:
    at = ctx.value(r.at)
    need = sum(int(ctx.header[c]) * record_of(rec).min_size() for c, rec in r.counts)
    if need <= ctx.size - at:
        return True
    first = f"{ctx.hrec.name}.{r.counts[-1][0]}"
    counts = " + ".join(f"{int(ctx.header[c])} {record_of(rec).name}" for c, rec in r.counts)
    out.errors.append(E.TruncatedError(ctx.fmt, ctx.offset_of(first), first, r.rule,
                                       f"{counts} records need at least {need} bytes, the file has {ctx.size - at} "
                                       f"after offset {at}", expected=ctx.size - at, actual=need))
    return False


def _size(r: Size, ctx: Context) -> None:
    tab, _, name = r.name.partition(".")
    count, dtype = ctx.value(r.count), ctx.value(r.dtype)
    _, item = element_sizes(r.itemsize, dtype)
    # exact (Python ints), then uint64 where it fits: counts up to 2^63 x 8 bytes do not
    total = [int(c) * int(i) for c, i in zip(count.tolist(), item.tolist())]
    ctx.tables[tab].cols[name] = np.array(total, dtype=np.uint64) if all(t < 2**64 for t in total) else \
        np.array(total, dtype=object)


def _declares_size(r: DeclaresSize, ctx: Context, out: Findings) -> None:
    term = f"{ctx.hrec.name}.{r.field}"
    declared = ctx.value(term)
    ctx.declared = declared
    if declared != ctx.size:  # shorter than it says: truncated (one finding with what follows)
        cls = E.TruncatedError if declared > ctx.size else E.StructureError
        out.errors.append(cls(ctx.fmt, ctx.offset_of(term), term, r.rule,
                              f"says {declared} bytes, the file has {ctx.size}", expected=ctx.size, actual=declared))


def _ordered(r: Ordered, ctx: Context, out: Findings) -> bool:
    vals = [ctx.value(t) for t in r.terms]
    pairs = list(zip(vals, vals[1:]))
    if all(a <= b for a, b in pairs):
        return True
    k = next(i for i, (a, b) in enumerate(pairs) if a > b)
    def field_term(t) -> bool:
        return (isinstance(t, str) and ctx.hrec is not None and t.startswith(ctx.hrec.name + ".")
                and not t.endswith(".END"))
    blame = r.blame or (r.terms[k] if field_term(r.terms[k]) else r.terms[k + 1])
    i = r.terms.index(blame)
    lo, hi = (vals[i - 1] if i else None), (vals[i + 1] if i + 1 < len(vals) else None)
    # in order once the end is what the header declares: the data was cut short
    cut = (FILE_END in r.terms and ctx.declared is not None and ctx.declared > ctx.size and
           all(a <= b for a, b in zip(*(lambda w: (w, w[1:]))([ctx.declared if t == FILE_END else v
                                                                 for t, v in zip(r.terms, vals)]))))
    cls = E.TruncatedError if cut else (E.StructureError if r.error == "structure" else E.BoundsError)
    order = " <= ".join(f"{ctx.words(t)}={v}" for t, v in zip(r.terms, vals))
    out.errors.append(cls(ctx.fmt, ctx.offset_of(blame), blame, r.rule,
                          f"must be within [{lo if lo is not None else ''}, {hi if hi is not None else ''}] "
                          f"(got {vals[i]}): {order} does not hold", expected=[lo, hi], actual=vals[i]))
    return False


def _one_row(v):
    """A header field's value as a column of one row."""
    return v if isinstance(v, np.ndarray) else np.array([v], dtype=np.uint64)


def _region(r: Region, ctx: Context, out: Findings) -> None:
    off, ln = _one_row(ctx.value(r.offset)), _one_row(ctx.value(r.length))
    hi = ctx.value(r.hi)
    # rows where ``when`` does not hold, and rows already unreadable (their bounds would be a cascade)
    skip = ~_where_all(r.when, ctx, len(off))
    gone = out.bad.get(r.offset.partition(".")[0])
    if gone:
        skip[list(gone)] = True
    if ln.dtype == object:  # lengths past 2^64 (derived sizes): exact, row by row
        his = hi.tolist() if isinstance(hi, np.ndarray) else [hi] * len(off)
        past = np.array([int(o) + int(n) > int(h) for o, n, h in zip(off.tolist(), ln.tolist(), his)], dtype=bool)
    else:
        h = hi if isinstance(hi, np.ndarray) else np.uint64(hi)
        past = (off > h) | (ln > h - np.minimum(off, h))  # end > hi, without wrap-around
    past &= ~skip
    lo = ctx.value(r.lo) if r.lo is not None else 0
    below = (off < np.uint64(lo)) & ~skip
    if r.empty_anywhere:
        below &= np.array([int(n) > 0 for n in ln.tolist()], dtype=bool)
    hi_at = (lambda i: int(hi[i])) if isinstance(hi, np.ndarray) else (lambda i: hi)
    # past the end of what exists, inside what the file says it holds: the file was cut
    cut = lambda end: (r.hi == FILE_END or r.hi_is_end) and (ctx.declared is None or end <= ctx.declared)  # noqa: E731
    if r.what is not None:  # one finding per row, naming its offset
        rows = np.flatnonzero(below | past)
        for i in rows[:LIMIT].tolist():
            o, k = int(off[i]), int(ln[i])
            _row_error(out, r.offset, i, (E.TruncatedError if not below[i] and cut(o + k) else E.BoundsError)(
                ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule,
                f"{r.what} [{o}, +{E.show_int(k)}) is outside [{lo}, {hi_at(i)}) ({ctx.words(r.lo)} to "
                f"{ctx.words(r.hi)})", expected=[lo, hi_at(i)], actual=[o, o + k]))
        _left_out(out, len(rows))
        _bad(out, r.offset, rows)
    else:  # an end past ``hi`` names the length, a start before ``lo`` the offset
        rows = np.flatnonzero(past)
        # (a cut file: what the rows past its end promise, all of them, not only those listed)
        promised = 0
        if len(rows) and (r.hi == FILE_END or r.hi_is_end):
            promised = max(int(off[i]) + int(ln[i]) for i in rows.tolist()) if ln.dtype == object else \
                int((off[rows] + np.minimum(ln[rows], ~off[rows])).max())  # (saturated: no wrap-around)
        for i in rows[:LIMIT].tolist():
            o, n = int(off[i]), int(ln[i])
            where = f"the end of the file ({hi_at(i)} bytes)" if r.hi == FILE_END else f"{ctx.words(r.hi)} ({hi_at(i)})"
            term = r.offset if ctx.offset_of(r.length, i) is None else r.length
            err = (E.TruncatedError if cut(o + n) else E.BoundsError)(
                ctx.fmt, ctx.offset_of(term, i), ctx.path_of(term, i), r.rule,
                f"data [{o}, +{E.show_int(n)}) extends past {where}", expected=hi_at(i), actual=o + n)
            if isinstance(err, E.TruncatedError):
                err.extent = (hi_at(i), promised)
            _row_error(out, r.offset, i, err)
        _left_out(out, len(rows))
        _bad(out, r.offset, rows)
        if r.lo is not None:
            inside = r.lo_is_end or (isinstance(r.lo, str) and r.lo.endswith(".END"))  # data inside a region
            for i in np.flatnonzero(below)[:LIMIT].tolist():
                msg = (f"data at {int(off[i])} starts inside {ctx.words(r.lo)} (it ends at {lo})" if inside else
                       f"must be >= {ctx.words(r.lo)} {lo} (got {int(off[i])})")
                _row_error(out, r.offset, i, (E.OverlapError if inside else E.BoundsError)(
                    ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule_lo or r.rule, msg,
                    expected=lo, actual=int(off[i])))
            _left_out(out, int(np.count_nonzero(below)))
            _bad(out, r.offset, np.flatnonzero(below))
    if r.clear_of is not None:
        _clear_of(r, ctx, out, off, ln, skip | below | past)


def _clear_of(r: Region, ctx: Context, out: Findings, off, ln, skip) -> None:
    """A row's bytes do not overlap the region ``clear_of`` names in the same row."""
    o2, l2 = (_one_row(ctx.value(t)) for t in r.clear_of)
    end, end2 = off + np.minimum(ln, ~off), o2 + np.minimum(l2, ~o2)  # (saturated: no wrap-around)
    hit = ~skip & (ln > 0) & (l2 > 0) & (off < end2) & (o2 < end)
    for i in np.flatnonzero(hit)[:LIMIT].tolist():
        a, b, c, d = int(off[i]), int(off[i]) + int(ln[i]), int(o2[i]), int(o2[i]) + int(l2[i])
        _row_error(out, r.offset, i, E.OverlapError(
            ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule_lo or r.rule,
            f"[{a}, {b}) overlaps [{c}, {d}) ({ctx.words(r.clear_of[0])}, +{ctx.words(r.clear_of[1])})",
            expected=[c, d], actual=[a, b]))
    _left_out(out, int(np.count_nonzero(hit)))
    _bad(out, r.offset, np.flatnonzero(hit))


def _tiles(r: Tiles, ctx: Context, out: Findings) -> None:
    tab = r.offset.partition(".")[0]
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    start, end = ctx.value(r.start), ctx.value(r.end)
    n = len(off)
    if not n:
        if end is not None and end != start:
            out.errors.append(E.StructureError(ctx.fmt, None, tab, r.rule, f"no tensor covers the {end - start} "
                                               f"bytes of data", expected=start, actual=end))
        return
    order = np.lexsort((np.arange(n), ln, off))  # (an empty row before a row that starts where it is)
    o = off[order].astype(object) if ln.dtype == object else off[order]
    e = o + ln[order]
    want = np.concatenate(([start], e[:-1])).astype(o.dtype) if o.dtype != object else \
        np.array([start] + list(e[:-1]), dtype=object)
    where = np.flatnonzero(o != want)
    for k in where[:LIMIT].tolist():
        i = int(order[k])
        at, w = int(o[k]), int(want[k])
        if k == 0:
            msg = f"begins at {at}, the data at {w}"
        else:
            j, label = int(order[k - 1]), ctx.labels.get(tab)
            prev = f"{ctx.tables[tab].path}[{label(j) if label else j}]"
            msg = f"begins at {at}, before {prev} ends ({w}): they overlap" if at < w else \
                f"begins at {at}, {at - w} bytes after {prev} ends ({w}): a gap"
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule,
                                           msg, expected=w, actual=at))
    _left_out(out, len(where))
    if end is not None and int(e[-1]) != end:
        i = int(order[-1])
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.length, i), ctx.path_of(r.length, i), r.rule,
                                           f"the last tensor ends at {int(e[-1])}, " + (
                                               f"{end - int(e[-1])} bytes before the end of the data ({end}): "
                                               "bytes no tensor covers" if end > int(e[-1]) else
                                               f"{int(e[-1]) - end} bytes past the end of the data ({end}): "
                                               "the data ends early"),
                                           expected=end, actual=int(e[-1])))


def _disjoint(r: Disjoint, ctx: Context, out: Findings) -> None:
    tab = r.offset.partition(".")[0]
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    keep = np.array([int(x) > 0 for x in ln.tolist()], dtype=bool) if ln.dtype == object else ln > 0
    gone = out.bad.get(tab)
    if gone:  # (rows already unreadable: their extent is not to be trusted)
        keep[list(gone)] = False
    idx = np.flatnonzero(keep)
    if len(idx) < 2:
        return
    order = idx[np.lexsort((idx, off[idx]))]  # by offset, then by row
    start = off[order]
    end = start + ln[order]
    reach = np.maximum.accumulate(end)  # the furthest end so far
    hits = np.flatnonzero(start[1:] < reach[:-1]) + 1  # starts before an earlier row ends
    for k in hits[:LIMIT].tolist():
        i = int(order[k])
        j = int(order[int(np.argmax(end[:k]))])  # the earlier row reaching furthest
        a, b = int(start[k]), int(end[k])
        out.errors.append(E.OverlapError(ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule,
                                         f"data [{a}, {b}) overlaps {ctx.tables[tab].path}[{j}] "
                                         f"[{int(off[j])}, {int(off[j]) + int(ln[j])})"))
    _left_out(out, len(hits))


def _zeros(r: Zeros, ctx: Context, buf, out: Findings) -> None:
    """Zeros: the uncovered bytes of [start, end) are zero (rows in offset order, exact integers)."""
    start, end = int(ctx.value(r.start)), int(ctx.value(r.end))
    regions, pos = [], start
    if r.offset is not None:
        tab = r.offset.partition(".")[0]
        off, ln = ctx.value(r.offset), ctx.value(r.length)
        name = ctx.row_paths.get(tab, lambda i: f"{ctx.tables[tab].path}[{i}]")
        for i, o, n in sorted(zip(range(len(off)), off.tolist(), ln.tolist()), key=lambda x: x[1]):
            if o > pos:
                regions.append((pos, o, f"gap before {name(i)}"))
            pos = max(pos, o + n)
    regions.append((pos, end, r.tail or f"{r.start.partition('.')[0]} padding"))
    covered = getattr(ctx, "covered", None) or (lambda a, b: [(a, b)] if a < b else [])
    unread = 0
    for a0, b0, what in regions:
        a0, b0 = min(a0, ctx.size), min(b0, ctx.size)
        here = covered(a0, b0)
        unread += max(b0 - a0, 0) - sum(b - a for a, b in here)
        for a, b in here:
            nz = np.flatnonzero(np.frombuffer(buf, np.uint8, b - a, a))
            if nz.size:
                out.errors.append(E.ReservedError(ctx.fmt, a + int(nz[0]), what, r.rule,
                                                  f"{nz.size} non-zero byte(s) in [{a}, {b}); padding must be zero"
                                                  if r.offset is not None else
                                                  f"bytes [{a}, {b}) must be zero ({nz.size} are not)"))
    ctx.values["unchecked_padding"] = ctx.values.get("unchecked_padding", 0) + unread
