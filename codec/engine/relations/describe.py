"""One sentence per declared relation, for the format reference (``modelcodec schema``)."""
from __future__ import annotations

from ...schemas.dsl import Affine, Agrees, Aligned, Bound, Clear, DeclaresSize, Disjoint, Equal, Extents, Fits, Has, In, Known, Linked, Member, NBytes, Ordered, Present, Records, RefersTo, Region, Size, Table, Text, Tiles, Unique, Zeroed, Zeros

from ..records import record_of


def describe_relation(r) -> str:
    """One sentence per relation, for the format reference."""
    if isinstance(r, (Linked, Agrees)):
        return _linked(r)
    if isinstance(r, Table):
        return (f"`{r.count}` {record_of(r.record).name} records ({record_of(r.record).size} bytes each) start at "
                f"{r.at} and lie inside the file")
    if isinstance(r, Records):
        inside = f"the section ending at `{r.end}`" if r.end is not None else "the file"
        return (f"`{r.count}` {record_of(r.record).name} records (variable size) follow back to back from "
                f"`{r.at}`; each parses inside {inside}")
    if isinstance(r, Zeros) and r.offset is None:
        return f"the bytes [`{r.start}`, `{r.end}`) are zero (padding)"
    if isinstance(r, Zeros):
        return (f"the bytes of [`{r.start}`, `{r.end}`) outside every row's [`{r.offset}`, + `{r.length}`) are zero "
                f"(every row counts, readable or not)")
    if isinstance(r, Fits):
        counts = " + ".join(f"`{c}` x smallest {record_of(rec).name} ({record_of(rec).min_size()} bytes)"
                            for c, rec in r.counts)
        return f"{counts} <= the bytes after `{r.at}` (checked before anything is parsed)"
    if isinstance(r, Size):
        return f"`{r.name}` = `{r.count}` x element size of `{r.dtype}` (derived)"
    if isinstance(r, Disjoint):
        return f"no two rows' [`{r.offset}`, `{r.offset}` + `{r.length}`) overlap"
    if isinstance(r, RefersTo):
        return f"every `{r.column}` names an existing {r.target} (its length: `{r.length_as}`)"
    if isinstance(r, Aligned):
        return f"every `{r.column}` is a multiple of `{r.n}`"
    if isinstance(r, Tiles):
        return (f"in offset order the rows' [`{r.offset}`, + `{r.length}`) tile [`{r.start}`, `{r.end}`) exactly "
                "(no gap, no overlap, nothing after)")
    if isinstance(r, DeclaresSize):
        return f"`{r.field}` equals the file's length (a shorter file is truncated)"
    if isinstance(r, Ordered):
        return " <= ".join(f"`{t}`" for t in r.terms)
    if isinstance(r, Unique):
        return f"no two rows share `{r.column}`"
    if isinstance(r, Member):
        return f"every `{r.column}` is one of {', '.join(str((r.names or {}).get(v, v)) for v in r.values)}"
    if isinstance(r, (Bound, Equal, Clear)):
        when = "" if r.when is None else f" where {_describe_condition(r.when)}"
        if isinstance(r, Clear):
            return f"every row{when}: `{r.column}` has none of the bits 0x{r.bits:x}"
        other = r.most if isinstance(r, Bound) else r.other
        other = (f"{other.base} + {other.per} x `{other.term}`" if isinstance(other, Affine) else
                 f"{other:,}" if isinstance(other, int) else f"`{other}`")
        return f"every row{when}: `{r.column}` {'<=' if isinstance(r, Bound) else '='} {other}"
    if isinstance(r, NBytes):
        dims = f"`{r.dims}`[:`{r.rank}`]" if r.rank else f"`{r.dims}`"
        skip = f" (rows of rank <= {r.max_rank})" if r.max_rank is not None else ""
        item = f" x element size of `{r.dtype}`" if r.dtype is not None else ""
        where = "" if r.when is None else f"every row {_condition_words(r.when).rstrip(', ')}: "
        shape = f"; a shape no array can have breaks `{r.rule_shape}`" if r.rule_shape else ""
        return f"{where}`{r.length}` = product({dims}){item}{skip}{shape}"
    when = lambda w: "every row" + ("" if w is None else " " + _condition_words(w).rstrip(", "))  # noqa: E731
    if isinstance(r, Zeroed):
        blame = f" (a finding names `{r.blame}`)" if r.blame else ""
        return f"{when(r.when)}: {' and '.join(f'`{c}`' for c in r.columns)} are 0{blame}"
    if isinstance(r, Region):
        lo = f"`{r.lo}` <= `{r.offset}` and " if r.lo is not None else ""
        return (f"{when(r.when)}: {lo}`{r.offset}` + `{r.length}` <= `{r.hi}` (no wrap-around)"
                + (" (an empty row may start anywhere)" if r.empty_anywhere else "")
                + (f"; clear of [`{r.clear_of[0]}`, +`{r.clear_of[1]}`)" if r.clear_of is not None else "")
                + (f"; the start rule is `{r.rule_lo}`" if r.rule_lo else ""))
    if isinstance(r, Extents):
        return f"every extent of `{r.dims}` is in [{r.lo}, {r.hi}]"
    if isinstance(r, Present):
        return f"some row's `{r.column}` is {_show(r.value)}"
    if isinstance(r, Known):
        return (f"every `{r.column}` is one of {', '.join(_show(v) for v in r.values)} (else a warning: readers "
                "skip the row)")
    if isinstance(r, Text):
        return f"every `{r.column}` is UTF-8 text" + (f" without NUL (decoded as `{r.name}`)" if r.name else "")
    return repr(r)


def _describe_condition(c) -> str:
    if isinstance(c, In):
        vals = ", ".join(_show(v) for v in c.values)
        return f"`{c.column}` is one of {vals}"
    return f"`{c.column}` {'has' if isinstance(c, Has) else 'lacks'} the bits 0x{c.bits:x}"


def _condition_words(when) -> str:
    """How a message says where a rule applies ("where flags lacks the bits 0x1, ")."""
    conds = [c for c in (when if isinstance(when, tuple) else (when,)) if c is not None]
    words = [f"{c.column} is a multiple of {c.n}" if isinstance(c, Aligned) else
             _describe_condition(c).replace("`", "") for c in conds]
    return f"where {' and '.join(words)}, " if words else ""


def _show(v) -> str:
    return v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)


def _linked(r) -> str:
    """The sentence of a relation between files (Linked, Agrees)."""
    if isinstance(r, Linked):
        said = [f"{what} equals its `{k}`" for what, k in (("size", r.size), (f"{r.algorithm} digest", r.digest)) if k]
        return (f"every entry at {', '.join(f'`{a}`' for a in r.at)} names an existing regular file by `{r.path}`"
                f" (`{r.rule_missing}`)" + (f", whose {' and '.join(said)} when given (`{r.rule}`)" if said else "")
                + (" (a file of another size: that one finding)" if r.size and r.digest else ""))
    return (f"every {r.source} record has a {r.target} record of the same `{r.key}`, with equal "
            + ", ".join(f"`{f}`" for f in r.fields))
