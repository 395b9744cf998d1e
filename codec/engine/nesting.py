"""Nesting: one explicit limit on how deep a decoded document (JSON, msgpack) or a metadata value
may nest, and the walks that measure it without recursion -- so that a reader's verdict and a
writer's refusal are the same whatever the depth of the caller's own stack.

:data:`MAX_NESTING` is the engine's limit (the C++ header gets it from ``python -m codec.tools.cgen``);
a format may declare a smaller one of its own in its schema.
"""
from __future__ import annotations

import json
import re
import threading

import numpy as np

from .. import errors as E

#: A decoded document (JSON or msgpack) nests at most MAX_NESTING containers deep (the outermost
#: one counts 1: ``{"k": [1]}`` is 2 deep).  Readers refuse a deeper document with a LimitError
#: before anything walks it (JSON: before decoding it), writers refuse to write one (UsageError):
#: no walk of a value then goes deeper than this, whatever the caller's own stack depth.
MAX_NESTING = 64


def nesting(obj) -> int:
    """How deep ``obj`` nests (dicts, lists, tuples and numpy arrays each count 1; anything else
    0), found without recursion: a value of any depth gives its number, never a RecursionError."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, np.ndarray):
            deepest = max(deepest, d - 1 + max(v.ndim, 1))
            if v.dtype == object:
                todo.extend((x, d + max(v.ndim, 1)) for x in v.ravel())
            continue
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, (list, tuple)):
            continue
        deepest = max(deepest, d)
        todo.extend((x, d + 1) for x in v if isinstance(x, (dict, list, tuple, np.ndarray)))
    return deepest


def refuse_nesting(obj, what: str, most: int = MAX_NESTING) -> None:
    """A writer's check: UsageError when ``obj`` nests deeper than ``most`` (see MAX_NESTING)."""
    n = nesting(obj)
    if n > most:
        raise E.UsageError(f"{what} nests {n} deep: at most {most} (its readers refuse deeper values)")


#: what is not a string in a JSON document: strings (escapes included) are cut out first
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


_STEP = np.zeros(256, np.int32)
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1


_NOT_QUOTES_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')


def _brackets_outside_strings(raw: bytes, piece: int) -> bytes:
    """The brackets of a JSON document that are outside its strings, in order.  Without a
    backslash (no escapes) its strings are the text between pairs of quotes: only the quotes
    and brackets are kept, and a bracket counts where the quotes before it are even in number
    (a running parity, piece by piece) -- 5x faster than the escape-aware pattern, the same
    brackets (an unterminated last string's count, as the pattern leaves it)."""
    if b"\\" in raw:
        return _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    small = np.frombuffer(raw.translate(None, _NOT_QUOTES_BRACKETS), np.uint8)
    quotes = small == ord('"')
    last = int(np.flatnonzero(quotes)[-1]) if quotes.any() else -1
    unterminated = bool(np.count_nonzero(quotes) % 2)
    out, carry = [], False
    for i in range(0, len(small), piece):
        q = quotes[i:i + piece]
        inside = np.logical_xor.accumulate(q)
        if carry:
            inside = ~inside
        carry = bool(inside[-1])
        keep = ~(q | inside)
        if unterminated and i + len(q) > last:  # (after the lone last quote: outside)
            keep[max(last - i, 0):] = ~q[max(last - i, 0):]
        out.append(small[i:i + piece][keep].tobytes())
    return b"".join(out)


def json_shape(raw: bytes, piece: int = 1 << 20) -> tuple[int, int]:
    """(how deep a JSON document nests, how many containers it opens), from its bytes without
    decoding them (no recursion; memory: a few copies of a piece of the document).  An upper bound for text
    that is not JSON (an unterminated string's brackets count)."""
    marks = _brackets_outside_strings(raw, piece)
    opened = marks.count(b"[") + marks.count(b"{")
    if not marks:
        return 0, 0
    a = np.frombuffer(marks, np.uint8)
    deepest, level = 0, 0
    for i in range(0, len(a), piece):
        part = a[i:i + piece]
        run = np.cumsum(_STEP[part], dtype=np.int64) + level
        deepest, level = max(deepest, int(run.max())), int(run[-1])
    return deepest, opened


def fresh_stack(fn, *args, **kw):
    """``fn(*args, **kw)`` on a new thread: its own, empty stack (a decoder that recurses in C
    counts against the caller's depth; the depth of what it decodes is bounded before)."""
    box: dict = {}

    def run():
        try:
            box["v"] = fn(*args, **kw)
        except BaseException as e:  # (handed to the caller)
            box["e"] = e
    t = threading.Thread(target=run, name="modelcodec-decode")
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]


def json_loads(text: str, **kw):
    """json.loads of a document whose depth is at most MAX_NESTING: the same answer at any depth
    of the caller's stack (where the caller's frames leave no room, on a fresh stack)."""
    try:
        return json.loads(text, **kw)
    except RecursionError:
        return fresh_stack(json.loads, text, **kw)
