"""A vectorised decoder for long msgpack lists of maps that share one layout (a tensor index).

msgpack is decoded one object after the other: a list of a million maps costs a million dicts
(and their keys, ints and strings) before a single column exists.  Yet the maps of a tensor
index are alike: the same keys in the same order, each value of the same kind.  This module
decodes a run of such maps straight from the bytes into numpy columns, for all of them at once:

1. a *layout* is taken from one map decoded the ordinary way: its keys in order, and for each the
   kind of value a declared key holds (``Int`` -> an integer, ``Str`` -> a string, ``ListOf(Int)``
   -> a short list of integers); a map holding anything else has no layout;
2. every place in the buffer where the map header and first key of the layout occur is a
   candidate start; all candidates are parsed together, field by field (keys compared byte for
   byte, integers, strings and lists of integers read by their msgpack type byte) -- a candidate
   that does not parse, or whose values break a declared constraint, is dropped;
3. the rows are the candidates that *chain* from the known start: each begins exactly where the
   previous one ends.  A candidate found inside a string (a name that happens to contain the
   bytes of a map header) never chains, since the true row around it ends after it; so what is
   returned is exactly what a sequential decoder would have read.  The chain stops at the first
   map that does not fit: the caller decodes that one the ordinary way, and goes on.

Nothing here trusts the bytes: every read is bounded by the buffer (which carries zero padding,
so fixed-width gathers never leave it), every length is checked against what is there, and a
value that would need a Python object the columns cannot hold (a negative number in an unsigned
column, an integer past 64 bits, a string that is not UTF-8) makes that map fall back to the
ordinary decoder -- which reports the exact error.
"""
from __future__ import annotations

import msgpack
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..schemas.dsl import Int, ListOf, Str

from .records import column_holds

#: zero bytes after the buffer's end, so that fixed-width gathers (9 bytes of an integer, 5 of
#: a string header) at any position up to the end stay inside the array
PAD = 16

# total width of an integer by its first byte (0: not an integer); which of those are signed
_INT_W = np.zeros(256, np.int64)
_INT_W[:0x80] = 1
_INT_W[0xe0:] = 1
_INT_W[[0xcc, 0xcd, 0xce, 0xcf]] = [2, 3, 5, 9]
_INT_W[[0xd0, 0xd1, 0xd2, 0xd3]] = [2, 3, 5, 9]
_SIGNED = np.zeros(256, bool)
_SIGNED[0xe0:] = True
_SIGNED[0xd0:0xd4] = True
# width of a string header by its first byte (0: not a string)
_STR_H = np.zeros(256, np.int64)
_STR_H[0xa0:0xc0] = 1
_STR_H[[0xd9, 0xda, 0xdb]] = [2, 3, 5]
#: the longest list of integers read here (a fixarray; longer lists are left to the decoder)
MAX_LIST = 15


def _gather(w: np.ndarray, p: np.ndarray, width: int) -> np.ndarray:
    """(len(p), width) bytes at each position (positions past the end read the padding)."""
    return sliding_window_view(w, width)[np.minimum(p, len(w) - width)]


def _words(w: np.ndarray) -> np.ndarray:
    """The 8 bytes at every position of ``w`` as a big-endian uint64 (an unaligned view, no copy)."""
    return np.ndarray((len(w) - 7,), ">u8", w, 0, (1,))


def _word_at(be: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The 8 bytes at positions ``p`` (past the end: the last word; such rows fail their bound)."""
    return be[np.minimum(p, len(be) - 1)].astype(np.uint64)


def _key_match(le: np.ndarray, p: np.ndarray, kb: bytes) -> np.ndarray:
    """Whether the bytes at each of ``p`` are ``kb`` (compared 8 at a time, as little-endian
    words: ``le`` is :func:`_words_le`, no byte swap)."""
    ok = None
    last = len(le) - 1
    for j in range(0, len(kb), 8):
        part = kb[j:j + 8]
        want = np.uint64(int.from_bytes(part, "little"))
        word = le[np.minimum(p + j, last)]
        if len(part) < 8:
            word &= np.uint64((1 << (8 * len(part))) - 1)
        eq = word == want
        ok = eq if ok is None else ok & eq
    return ok


def _words_le(w: np.ndarray) -> np.ndarray:
    """The 8 bytes at every position of ``w`` as a little-endian uint64 (an unaligned view)."""
    return np.ndarray((len(w) - 7,), "<u8", w, 0, (1,))


def _ints_at(w: np.ndarray, be: np.ndarray, p: np.ndarray, end: int):
    """The msgpack integers at positions ``p``: (value as uint64 bits, negative?, width, ok)."""
    b = w[np.minimum(p, len(w) - 1)]
    if len(b) and b.max() < 0x80:  # every one a positive fixint (a dtype, a flag, a small count)
        return b.astype(np.uint64), np.zeros(len(p), bool), 1, p < end
    width = _INT_W[b]
    ok = (width > 0) & (p + width <= end)
    nb = np.clip(width - 1, 0, 8)  # payload bytes
    raw = _word_at(be, p + 1)
    val = np.where(nb > 0, raw >> ((8 - nb) * 8).astype(np.uint64) % np.uint64(64), b.astype(np.uint64))
    signed = _SIGNED[b]
    if signed.any():
        sh = ((8 - nb) * 8 % 64).astype(np.uint64)  # sign-extend the nb payload bytes (fixint: b)
        s = np.where(nb > 0, (val << sh).view(np.int64) >> sh.view(np.int64), b.astype(np.int8).astype(np.int64))
        val = np.where(signed, s.view(np.uint64), val)
        neg = signed & (s < 0)
    else:
        neg = np.zeros(len(p), bool)
    return val, neg, width, ok


def _strs_at(be: np.ndarray, p: np.ndarray, end: int):
    """The msgpack strings at ``p``: (start of the bytes, their length, ok)."""
    x = _word_at(be, p)
    b0 = (x >> np.uint64(56)).astype(np.int64)
    hw = _STR_H[b0]
    y = x.view(np.int64) >> 24  # (the bytes after the first: at most 32 bits of them are used)
    n = np.select([hw == 1, hw == 2, hw == 3, hw == 5],
                  [b0 - 0xa0, (y >> 24) & 0xff, (y >> 16) & 0xffff, y & 0xffffffff], 0)
    start = p + hw
    return start, n, (hw > 0) & (start + n <= end)


def _int_column(t: Int, val: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values as the column's dtype (uint64, or int64 when the declaration allows negative
    values), and which rows hold a value the column and its constraints accept."""
    from .columns import _int_kind  # (the column types are the table's)
    if _int_kind(t) == "u8":
        col, ok = val, ~neg
    else:
        col, ok = val.view(np.int64), neg | (val < np.uint64(1 << 63))
    for c in t.valid:
        try:
            ok &= np.asarray(column_holds(c, col), dtype=bool)
        except (TypeError, OverflowError):
            ok &= False
    return col, ok


class Layout:
    """The shape of one map: its keys in order and what kind of value each holds."""

    def __init__(self, fields: list):
        self.fields = fields  # (name, Key, kind, encoded key)
        self.head = np.frombuffer(bytes([0x80 | len(fields)]) + fields[0][3], np.uint8)
        self.signature = tuple((f[0], f[2]) for f in fields)

    @classmethod
    def of(cls, decl, row) -> "Layout | None":
        """The layout of ``row`` (a decoded map), or None when it has none (an undeclared key, a
        value of another kind, more than 15 keys)."""
        if type(row) is not dict or not 1 <= len(row) <= 15:
            return None
        keys = {k.name: k for k in decl.keys}
        if any(k.required and k.name not in row for k in decl.keys):
            return None
        fields = []
        for name, v in row.items():
            k = keys.get(name) if type(name) is str else None
            if k is None:
                return None
            t = k.type
            if isinstance(t, Int) and type(v) is int:
                kind = "int"
            elif isinstance(t, Str) and type(v) is str and t.pattern is None:
                kind = "str"
            elif isinstance(t, ListOf) and isinstance(t.item, Int) and type(v) is list:
                kind = "ints"
            else:
                return None
            fields.append((name, k, kind, msgpack.packb(name)))
        return cls(fields)

    def scan(self, w: np.ndarray, end: int, start: int, region: int, most: int):
        """The rows of this layout that chain from ``start`` in ``w[:end]`` (``w`` padded with
        PAD zero bytes), candidates looked for in ``[start, start + region)``, at most ``most``:
        (rows, end of the last row, {key: column}) -- (0, start, None) when the map at ``start``
        does not fit.  Columns: uint64/int64 arrays for integers, (bytes buffer, starts,
        lengths) for strings, (lengths, flat values) for lists of integers."""
        head = self.head
        hi = min(end, start + region) - len(head) + 1
        if hi <= start:
            return 0, start, None
        c = np.flatnonzero(w[start:hi] == head[0]) + start
        for j in range(1, len(head)):
            c = c[w[c + j] == head[j]]
        if not len(c) or c[0] != start:
            return 0, start, None
        ok = np.ones(len(c), bool)
        be, le = _words(w), _words_le(w)
        p = c + len(head)
        vals = {}
        objects = 1 + len(self.fields)  # per row: the map and its keys (the decode budget's count)
        extra = np.zeros(len(c), np.int64)  # and its lists' items
        for i, (name, key, kind, kb) in enumerate(self.fields):
            if i:
                ok &= _key_match(le, p, kb)
                p = p + len(kb)
            t = key.type
            if kind == "int":
                val, neg, width, good = _ints_at(w, be, p, end)
                col, fits = _int_column(t, val, neg)
                ok &= good & fits
                vals[name] = col
                p = p + width
            elif kind == "str":
                s, n, good = _strs_at(be, p, end)
                ok &= good & (n >= t.min_len)  # (bytes >= characters: the exact check follows)
                vals[name] = (s, n)
                p = s + np.where(good, n, 0)
            else:
                b = w[np.minimum(p, len(w) - 1)].astype(np.int64)
                n = np.where((b >= 0x90) & (b <= 0x9f), b - 0x90, -1)
                ok &= (n >= t.min_len) & (n >= 0) & ((n <= t.max_len) if t.max_len is not None else True)
                n = np.where(ok, n, 0)
                p = p + 1
                items = np.zeros((len(c), int(n.max(initial=0))), np.uint64)  # (as wide as the longest)
                for j in range(items.shape[1]):
                    has = n > j
                    val, neg, width, good = _ints_at(w, be, p, end)
                    col, fits = _int_column(t.item, val, neg)
                    ok &= ~has | (good & fits)
                    items[:, j] = np.where(has, col.view(np.uint64), 0)
                    p = p + np.where(has & good, width, 0)
                vals[name] = (n, items)
                extra += 1 + n
        ok &= p <= end
        sel = np.flatnonzero(ok)
        if not len(sel) or c[sel[0]] != start:
            return 0, start, None
        s, e = c[sel], p[sel]
        brk = np.flatnonzero(s[1:] != e[:-1])
        k = min(int(brk[0]) + 1 if len(brk) else len(sel), most)
        sel = sel[:k]
        cols = {}
        for name, key, kind, _ in self.fields:
            v = vals[name]
            if kind == "int":
                cols[name] = v[sel]
            elif kind == "str":
                cols[name] = (v[0][sel], v[1][sel])
            else:
                n, items = v[0][sel], v[1][sel]
                if len(n) and n.min() == n.max():  # lists of one length (the rank of every tensor)
                    flat = items[:, :int(n[0])].ravel()
                else:
                    flat = items[np.arange(items.shape[1])[None, :] < n[:, None]]
                cols[name] = (n, flat if _unsigned(key.type.item) else flat.view(np.int64))
        return k, int(e[k - 1]), (cols, int(objects * k + extra[sel].sum()))


def _unsigned(t: Int) -> bool:
    from .columns import _int_kind
    return _int_kind(t) == "u8"


def strings(w: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[list[str] | None, bool]:
    """(the strings at ``starts`` of ``lens`` bytes, all ASCII?); None when one is not UTF-8 (the
    ordinary decoder then reports it).  The strings are gathered into one buffer, separated by a
    newline (when none of them holds one), and decoded and split by two C calls: a separator is
    ASCII, so the whole is valid UTF-8 exactly when every string is."""
    k = len(starts)
    if not k:
        return [], True
    # each string gathered with the byte before it (one pass over them all); that byte becomes
    # the separator (the first one is dropped)
    lens1 = lens + 1
    total = int(lens1.sum())
    ends = np.cumsum(lens1)
    seg = ends - lens1  # where each string's piece starts in ``out``
    src = np.arange(total, dtype=np.int64) + np.repeat(starts - 1 - seg, lens1)
    out = w[src]
    out[seg] = 0
    if (out == 0x0A).any():
        return _strings_sliced(w, starts, lens)
    out[seg] = 0x0A
    out = out[1:]
    raw = out.tobytes()
    if raw.isascii():
        return raw.decode("ascii").split("\n"), True
    try:
        return raw.decode("utf-8").split("\n"), False
    except UnicodeDecodeError:
        return None, False


def _strings_sliced(w: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[list[str] | None, bool]:
    """:func:`strings`, one slice a string (names that hold a newline)."""
    base = int(starts[0])
    raw = w[base:int(starts[-1] + lens[-1])].tobytes()
    a, b = (starts - base).tolist(), (starts + lens - base).tolist()
    out = [raw[i:j] for i, j in zip(a, b)]
    try:
        return [x.decode("utf-8") for x in out], all(x.isascii() for x in out)
    except UnicodeDecodeError:
        return None, False
