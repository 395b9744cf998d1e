"""What rows hold: comparisons, references, alignment, members, unique keys, byte sizes from
shapes and dtypes, extents, text and the fields a kind of row leaves zero."""
from __future__ import annotations

import math

import numpy as np

from ...schemas.dsl import Aligned, Bound, Clear, Extents, In, Member, NBytes, Present, RefersTo, Text, Unique, Zeroed

from ... import errors as E
from ..dtypes import numpy_can_hold
from .context import LIMIT, Context, Findings, _bad, _left_out, _row_error, _where, _where_all, element_sizes
from .describe import _condition_words


def _row_rule(r, ctx: Context, out: Findings) -> None:
    """Bound, Equal and Clear: one comparison per row, where ``when`` holds, rows already
    unreadable left out (their values are not to be trusted)."""
    col = ctx.value(r.column)
    n = len(col)
    hit = _where(r.when, ctx, n)
    gone = out.bad.get(r.column.partition(".")[0])
    if gone:
        hit[list(gone)] = False
    if isinstance(r, Clear):
        bad = hit & ((col & np.uint64(r.bits)) != 0)
    else:
        other = ctx.value(r.most if isinstance(r, Bound) else r.other)
        other = other if isinstance(other, np.ndarray) else np.uint64(other)
        bad = hit & ((col > other) if isinstance(r, Bound) else (col != other))
    rows = np.flatnonzero(bad)
    for i in rows[:LIMIT].tolist():
        got = int(col[i])
        at, path = ctx.offset_of(r.column, i), ctx.path_of(r.column, i)
        if isinstance(r, Clear):
            err = E.ConstraintError(ctx.fmt, at, path, r.rule, f"must not have the bits 0x{r.bits:x} set here "
                                    f"(got 0x{got:x})", expected=0, actual=got & r.bits)
        else:
            want = int(other[i]) if isinstance(other, np.ndarray) and other.ndim else int(other)
            words = ctx.words(r.most if isinstance(r, Bound) else r.other)
            if isinstance(r, Bound):
                err = E.LimitError(ctx.fmt, at, path, r.rule, f"must be <= {want} ({words}) (got {got})",
                                   expected=want, actual=got)
            else:
                err = E.StructureError(ctx.fmt, at, path, r.rule, f"must equal {words} {want} (got {got})",
                                       expected=want, actual=got)
        _row_error(out, r.column, i, err)
    _left_out(out, len(rows))
    _bad(out, r.column, rows)


def _refers_to(r: RefersTo, ctx: Context, out: Findings) -> None:
    tab = r.column.partition(".")[0]
    col = ctx.value(r.column)
    known = ctx.targets.get(r.target, {})
    if len(col) and col.min() == col.max():  # (one target for every row: no sort)
        uniq, inv = col[:1], np.zeros(len(col), dtype=np.intp)
    else:
        uniq, inv = np.unique(col, return_inverse=True)
    found = [known.get(int(u)) for u in uniq]
    missing = np.array([f is None for f in found], dtype=bool)[inv]
    length = np.array([0 if f is None else f[1] for f in found], dtype=np.uint64)[inv]
    ctx.tables[tab].cols[r.length_as] = length
    rows = np.flatnonzero(missing)
    for i in rows[:LIMIT].tolist():
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                           f"no {r.target} {int(col[i])}", actual=int(col[i])))
    _left_out(out, len(rows))
    _bad(out, r.column, rows)


def _aligned(r: Aligned, ctx: Context, out: Findings) -> None:
    if r.rule is None:
        raise TypeError(f"{r!r} has no rule: it is a condition (in a `when`), not a relation")
    col, n = ctx.value(r.column), ctx.value(r.n)
    if not len(col):
        return
    if isinstance(n, np.ndarray):  # each row its own (rows already unreadable left out)
        n = n.astype(np.uint64)
        hit = (col % np.maximum(n, np.uint64(1))) != 0
        gone = out.bad.get(r.column.partition(".")[0])
        if gone:
            hit[list(gone)] = False
        off = np.flatnonzero(hit)
    else:
        n = int(n)
        if n <= 1:
            return
        off = np.flatnonzero(col % np.uint64(n))
    for i in off[:LIMIT].tolist():
        want = int(n[i]) if isinstance(n, np.ndarray) else n
        _row_error(out, r.column, i, E.AlignmentError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i),
                                                      r.rule, f"must be a multiple of {want} (got {int(col[i])})",
                                                      expected=want, actual=int(col[i])))
    _left_out(out, len(off))
    _bad(out, r.column, off)


def _member(r: Member, ctx: Context, out: Findings) -> None:
    col = ctx.value(r.column)
    if not len(col):
        return
    rows = np.flatnonzero(~np.isin(col, np.array(r.values, dtype=col.dtype)))
    known = ", ".join(str((r.names or {}).get(v, v)) for v in r.values)
    for i in rows[:LIMIT].tolist():
        got = col[i].item()
        _row_error(out, r.column, i, E.EnumError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                                 f"unknown value {got} (known: {known})", actual=got))
    _left_out(out, len(rows))
    _bad(out, r.column, rows)


def _unique(r: Unique, ctx: Context, out: Findings) -> None:
    col = ctx.value(r.column)
    tab, _, name = r.column.partition(".")
    first: dict = {}
    dup = []
    if isinstance(col, np.ndarray) and col.dtype != object:
        if len(col) < 2:
            return
        order = np.argsort(col, kind="stable")
        s = col[order]
        same = s[1:] == s[:-1]
        dup = np.sort(order[1:][same]).tolist()  # every later occurrence of a value
        if not dup:
            return
        # a value's first row: the head of its run in the stable order
        head = order[np.flatnonzero(np.concatenate(([True], ~same)))]
        run = np.concatenate(([0], np.cumsum(~same)))  # (the run of each sorted position)
        first_row = np.empty(len(col), dtype=np.int64)
        first_row[order] = head[run]
        first = {col[i].item(): int(first_row[i]) for i in dup[:LIMIT]}
    else:  # Python values (keys); None: a value its own rule already refused
        for i, v in enumerate(col):
            if v is None:
                continue
            if v in first:
                dup.append(i)
            else:
                first[v] = i
    for i in dup[:LIMIT]:
        v = col[i].item() if isinstance(col, np.ndarray) and col.dtype != object else col[i]
        _row_error(out, r.column, i, E.StructureError(
            ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
            f"{name} {v!r} already used by {ctx.tables[tab].path}[{first[v]}]",
            actual=v if isinstance(v, (int, str)) else None))
    _left_out(out, len(dup))
    _bad(out, r.column, dup)


def _nbytes_ragged(r: NBytes, ctx: Context, out: Findings, length, dims, hit) -> None:
    """One list of extents per row (variable ranks): exact integers, row by row (extents and
    products reach past 2^64).  A row whose dtype or rank cannot be sized cannot be read."""
    n = len(length)
    codes = ctx.value(r.dtype).tolist() if r.dtype is not None else [None] * n
    lengths = length.tolist()
    ranks = ctx.value(r.rank).tolist() if r.rank is not None else [len(d) for d in dims]
    bad, found = [], 0
    for i in range(n):
        if found >= LIMIT and r.dtype is None:  # (a plain element count stops at the cap, as the
            break                               # vectorised paths do: the rows after it stay readable)
        shape, item = dims[i], (1 if r.dtype is None else r.itemsize.get(codes[i]))
        term, err = r.dims, (None if r.dtype is None else _shape_error(r, ctx, i, shape, item or 1))
        if err is None:
            if item is None or (r.max_rank is not None and ranks[i] > r.max_rank):
                bad.append(i)  # its dtype or rank constraint reports it
                continue
            term, err = r.length, (_length_error(r, ctx, i, shape, item, codes[i], lengths[i]) if hit[i] else None)
            if err is None:
                continue
        bad.append(i)
        if found < LIMIT:
            found += 1
            _row_error(out, term, i, err)
    _bad(out, r.length, bad)


def _shape_error(r, ctx: Context, i: int, shape, item: int) -> E.FormatError | None:
    """NBytes: no array has row i's shape (a RangeError at its extents), else None."""
    if numpy_can_hold(shape, item):
        return None
    return E.RangeError(ctx.fmt, ctx.offset_of(r.dims, i), ctx.path_of(r.dims, i), r.rule_shape or r.rule,
                        f"no array has the shape {list(shape)}")


def _length_error(r, ctx: Context, i: int, shape, item: int, code: int, got: int) -> E.FormatError | None:
    """NBytes: row i's length is not product(shape) x element size (a StructureError at the
    length), else None."""
    want = math.prod(shape) * item
    if want == got:
        return None
    name = r.names[code] if r.names else str(code)
    what = f"{name}{list(shape)} needs {E.show_int(want)} bytes" if r.dtype is not None else \
        f"must equal the product of shape {list(shape)} = {E.show_int(want)}"
    return E.StructureError(ctx.fmt, ctx.offset_of(r.length, i), ctx.path_of(r.length, i), r.rule,
                            f"{what} (got {got})", expected=want, actual=got)


def _exact(r: NBytes, ctx: Context, out: Findings, rows, shape_of, dtype, length, hit) -> None:
    """The rows a vectorised pre-check doubts, in exact integers: at most LIMIT findings (a
    shape no array can have, else a length where ``when`` holds); each such row cannot be read."""
    found = 0
    for i in rows:
        if found >= LIMIT:
            break
        shape, code = shape_of(i), int(dtype[i])
        item = r.itemsize[code]
        err = _shape_error(r, ctx, i, shape, item) or \
            (_length_error(r, ctx, i, shape, item, code, int(length[i])) if hit[i] else None)
        if err is not None:
            out.errors.append(err)
            found += 1
            _bad(out, r.length, [i])


def _nbytes_flat(r: NBytes, ctx: Context, out: Findings, length, dims, hit) -> None:
    """Extents as one flat array and a length per row: products vectorised (float pre-check,
    exact integers only for the rows it doubts)."""
    lens, flat = dims
    n = len(length)
    starts = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(lens[:-1], out=starts[1:])
    dtype = ctx.value(r.dtype)
    known, isz = element_sizes(r.itemsize, dtype)
    if lens.min() == lens.max():  # every row of one rank: a product along the rows
        numel = flat.astype(np.float64).reshape(n, int(lens[0])).prod(axis=1)
    else:
        numel = np.ones(n, dtype=np.float64)
        ranked = lens > 0
        if ranked.any():
            numel[ranked] = np.multiply.reduceat(flat.astype(np.float64), starts[ranked])
    got = length.astype(np.float64)
    suspect = known & ((numel * isz != got) | (got >= 2.0**53) | (numel * isz >= 2.0**53))
    zero = np.zeros(n, dtype=bool)
    if len(flat) and not flat.all():
        zero[np.repeat(np.arange(n), lens)[flat == 0]] = True  # numpy's shape limit holds with a 0 extent too
    _exact(r, ctx, out, np.flatnonzero(suspect | (known & ((numel * isz >= 2.0**62) | zero))).tolist(),
           lambda i: [int(x) for x in flat[starts[i]:starts[i] + lens[i]]], dtype, length, hit)


def _nbytes(r: NBytes, ctx: Context, out: Findings) -> None:
    length, dims = ctx.value(r.length), ctx.value(r.dims)
    n = len(length)
    if not n:
        return
    hit = _where_all(r.when, ctx, n)
    if isinstance(dims, tuple):  # (lengths, flat extents): a ragged numpy column
        _nbytes_flat(r, ctx, out, length, dims, hit)
        return
    if not (isinstance(dims, np.ndarray) and dims.ndim == 2):
        _nbytes_ragged(r, ctx, out, length, dims, hit.tolist())
        return
    dtype = ctx.value(r.dtype)
    w = dims.shape[1]
    rank = ctx.value(r.rank) if r.rank is not None else np.full(n, w, dtype=np.uint64)
    known, isz = element_sizes(r.itemsize, dtype)
    keep = known & (rank <= np.uint64(min(r.max_rank if r.max_rank is not None else w, w)))
    if not keep.any():
        return
    d = dims.astype(np.float64)
    d[np.arange(w)[None, :] >= np.minimum(rank, w).astype(np.int64)[:, None]] = 1.0  # extents past the rank
    want = d.prod(axis=1) * isz
    # doubted: a length that differs, a product floats cannot hold exactly, or an extent of 0
    # (numpy's limit on shapes applies when another extent is 0); exact integers decide
    doubt = keep & ((want != length.astype(np.float64)) | (want >= 2.0**53) | (d == 0).any(axis=1))
    _exact(r, ctx, out, np.flatnonzero(doubt).tolist(), lambda i: [int(x) for x in dims[i][:int(rank[i])]],
           dtype, length, hit)


def _extents(r: Extents, ctx: Context, out: Findings) -> None:
    dims = ctx.value(r.dims)
    flat = np.fromiter((d for shape in dims for d in shape), dtype=np.uint64)
    outside = (flat < np.uint64(r.lo)) | (flat > np.uint64(r.hi))
    if not len(flat) or not outside.any():
        return
    lens = np.fromiter((len(shape) for shape in dims), dtype=np.int64, count=len(dims))
    row_of = np.repeat(np.arange(len(dims)), lens)  # (the row of each extent)
    starts = np.cumsum(lens) - lens
    hits = np.flatnonzero(outside)
    for p in hits[:LIMIT].tolist():  # row by row, extent by extent
        i = int(row_of[p])
        k, d = p - int(starts[i]), int(flat[p])
        _row_error(out, r.dims, i, E.RangeError(
            ctx.fmt, ctx.offset_of(r.dims, i) + r.width * k, f"{ctx.path_of(r.dims, i)}[{k}]", r.rule,
            f"dimension must be {r.lo}..{E.show_int(r.hi) if r.hi < 2**63 - 1 else '2^63-1'} (got {d})",
            expected=[r.lo, r.hi], actual=d))
    _left_out(out, len(hits))
    _bad(out, r.dims, np.unique(row_of[hits]).tolist())


def _zeroed(r: Zeroed, ctx: Context, out: Findings) -> None:
    cols = [ctx.value(c) for c in r.columns]
    n = len(cols[0])
    if not n:
        return
    nonzero = np.zeros(n, dtype=bool)
    for c in cols:
        nonzero |= c != 0
    rows = np.flatnonzero(_where_all(r.when, ctx, n) & nonzero)
    blame = r.blame or r.columns[0]
    names = " and ".join(c.partition(".")[2] for c in r.columns)
    for i in rows[:LIMIT].tolist():
        got = [int(c[i]) for c in cols]
        _row_error(out, blame, i, E.StructureError(
            ctx.fmt, ctx.offset_of(blame, i), ctx.path_of(blame, i), r.rule,
            f"{_condition_words(r.when)}{names} must be 0 (got {', '.join(map(str, got))})", expected=0,
            actual=got[r.columns.index(blame)] if blame in r.columns else None))
    _left_out(out, len(rows))
    _bad(out, blame, rows)


def _presence(r, ctx: Context, out: Findings) -> None:
    """Present (some row has the value) and Known (every row's value is known, else a warning)."""
    tab = r.column.partition(".")[0]
    n = ctx.tables[tab].n
    if isinstance(r, Present):
        if not _where(In(r.column, (r.value,)), ctx, n).any():
            out.errors.append(E.StructureError(ctx.fmt, ctx.value(r.at) if r.at is not None else None,
                                               ctx.tables[tab].path, r.rule,
                                               f"no {r.what}" if r.what else f"no row has {r.column} {r.value!r}"))
        return
    for i in np.flatnonzero(~_where(In(r.column, r.values), ctx, n)).tolist():
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                           f"unknown {r.column.partition('.')[2]}: readers skip it"))


def _text(r: Text, ctx: Context, out: Findings) -> None:
    """Text: every row's bytes are UTF-8 (decoded into ``name`` when declared: then without NUL)."""
    col = ctx.value(r.column)
    if r.name is None and max(b"".join(col), default=0) < 0x80:  # all ASCII (the usual case): all UTF-8
        return
    text, bad = [], []
    for i, raw in enumerate(col):
        s = None
        if raw is not None:
            try:
                s = bytes(raw).decode("utf-8")
                if r.name is not None and "\x00" in s:
                    raise UnicodeError("NUL inside the text")
            except UnicodeError as ex:
                bad.append(i)
                if r.name is not None:  # (a decoded name: at its start, every row)
                    _row_error(out, r.column, i, E.DecodeError(ctx.fmt, ctx.offset_of(r.column, i),
                                                               ctx.path_of(r.name, i), r.rule,
                                                               f"not valid UTF-8 text: {ex}"))
                elif len(bad) <= LIMIT:  # (a key: at its first byte that does not decode)
                    _row_error(out, r.column, i, E.DecodeError(
                        ctx.fmt, ctx.offset_of(r.column, i) + ex.start, ctx.path_of(r.column, i), r.rule,
                        f"{r.column.partition('.')[2]} is not UTF-8: {ex.reason} at byte {ex.start}"))
                s = bytes(raw).decode("utf-8", "replace")
        text.append(s)
    _bad(out, r.column, bad)
    if r.name is not None:
        ctx.tables[r.column.partition(".")[0]].cols[r.name.partition(".")[2]] = text
