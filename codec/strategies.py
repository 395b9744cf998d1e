"""Hypothesis strategies derived from the schema declarations (no per-field hand-written ones).

``records(struct)`` draws dicts that satisfy every declared constraint of a binary record;
``records(struct, valid=False)`` draws any value of each field's type (for byte-level round
trips and negative tests); ``payloads(map_decl)`` draws values of a declared payload map.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from schemas.dsl import (
    AnyValue, Bin, Bool, Eq, Int, KnownFlags, ListOf, Map, Multiple, OneOf, Range, Str, Zero,
)

from .engine import Field, record_of


def _int_strategy(lo: int, hi: int, valid: tuple) -> st.SearchStrategy:
    step = 1
    choices = None
    mask = None
    for c in valid:
        if isinstance(c, Eq):
            return st.just(c.value)
        if isinstance(c, Zero):
            return st.just(0)
        if isinstance(c, Range):
            lo = lo if c.lo is None else max(lo, c.lo)
            hi = hi if c.hi is None else min(hi, c.hi)
        elif isinstance(c, Multiple):
            step = step * c.n // math.gcd(step, c.n)
        elif isinstance(c, OneOf):
            choices = c.values()
        elif isinstance(c, KnownFlags):
            mask = c.mask()
    if choices is not None:
        ok = [v for v in choices if lo <= v <= hi and v % step == 0]
        return st.sampled_from(ok)
    base = st.integers(-(-lo // step), hi // step).map(lambda k: k * step)
    if mask is not None:
        base = st.integers(0, mask).map(lambda v: v & mask)
    return base


def field_strategy(f: Field, valid: bool = True) -> st.SearchStrategy:
    cons = f.valid if valid else ()
    if f.kind == "int":
        lo, hi = f.int_bounds()
        return _int_strategy(lo, hi, cons)
    if f.kind == "float":
        width = f.subcon.sizeof() * 8
        return st.floats(width=width, allow_nan=False)
    if f.kind == "bytes":
        n = f.subcon.length
        for c in cons:
            if isinstance(c, Eq):
                return st.just(c.value)
            if isinstance(c, Zero):
                return st.just(bytes(n))
        return st.binary(min_size=n, max_size=n)
    raise TypeError(f"no derived strategy for field {f.name} ({f.type_name})")


def records(struct, valid: bool = True) -> st.SearchStrategy:
    rec = record_of(struct)
    return st.fixed_dictionaries({f.name: field_strategy(f, valid) for f in rec.fields})


def payloads(decl, depth: int = 0) -> st.SearchStrategy:
    """Values that satisfy a payload declaration (optional keys sometimes present)."""
    if isinstance(decl, Map):
        req = {k.name: payloads(k.type, depth + 1) for k in decl.keys if k.required}
        opt = {k.name: payloads(k.type, depth + 1) for k in decl.keys if not k.required}
        return st.fixed_dictionaries(req, optional=opt)
    if isinstance(decl, ListOf):
        hi = decl.max_len if decl.max_len is not None else decl.min_len + 4
        return st.lists(payloads(decl.item, depth + 1), min_size=decl.min_len, max_size=min(hi, decl.min_len + 4))
    if isinstance(decl, Int):
        return _int_strategy(-(2**63), 2**64 - 1, decl.valid)
    if isinstance(decl, Str):
        if decl.charset is not None:
            return st.text(st.sampled_from(decl.charset), min_size=decl.min_len,
                           max_size=decl.max_len if decl.max_len is not None else decl.min_len + 20)
        if decl.pattern is not None:
            return st.from_regex(decl.pattern, fullmatch=True).filter(
                lambda s: decl.min_len <= len(s) <= (decl.max_len or len(s)))
        return st.text(min_size=decl.min_len, max_size=decl.max_len or 20)
    if isinstance(decl, Bin):
        n = decl.length
        return st.binary(min_size=n or 0, max_size=n if n is not None else 16)
    if isinstance(decl, Bool):
        return st.booleans()
    if isinstance(decl, AnyValue):
        scalar = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.booleans())
        return st.dictionaries(st.text(max_size=8), scalar, max_size=3) if decl.map_only or depth > 2 \
            else st.one_of(scalar, st.dictionaries(st.text(max_size=8), scalar, max_size=3))
    raise TypeError(decl)
