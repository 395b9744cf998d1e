"""Format reference rendered from the schema objects (``modelcodec schema FMT``, docs/formats/).

Nothing here is typed by hand: records, payload maps, enums and limits are read from the
``schemas.<fmt>`` module, so the docs cannot drift from what the engine enforces.
"""
from __future__ import annotations

import enum
from types import ModuleType

from schemas.dsl import AnyValue, Bin, Bool, Checksum, Int, ListOf, Map, Str

from .engine import describe, record_of


def _md_table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        out.append("| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in r) + " |")
    return out


def type_text(t) -> str:
    if isinstance(t, Map):
        return t.name
    if isinstance(t, ListOf):
        n = f", exactly {t.max_len}" if t.max_len == t.min_len else ("" if t.max_len is None else f", <= {t.max_len}")
        return f"list of {type_text(t.item)}{n}"
    if isinstance(t, Int):
        c = "; ".join(describe(c) for c in t.valid)
        return "int" + (f" ({c})" if c else "")
    if isinstance(t, Str):
        extra = t.pattern_doc or (f"{t.pattern!r}" if t.pattern else "") or (f"chars {t.charset!r}" if t.charset else "")
        if t.min_len == 1:
            extra = f"{extra}; non-empty" if extra else "non-empty"
        return "str" + (f" ({extra})" if extra else "")
    if isinstance(t, Bin):
        return "bytes" + (f"[{t.length}]" if t.length is not None else "")
    if isinstance(t, Bool):
        return "bool"
    if isinstance(t, AnyValue):
        return "map" if t.map_only else "any"
    return repr(t)


def render(mod: ModuleType) -> str:
    fmt = mod.FORMAT
    lines = [f"# {fmt} — field reference", "",
             f"Generated from `schemas/{mod.__name__.split('.')[-1]}.py` by `modelcodec schema`; "
             "do not edit by hand.", ""]
    lines += [(mod.__doc__ or "").strip(), ""]
    for st in getattr(mod, "RECORDS", ()):
        rec = record_of(st)
        size = f"{rec.size} bytes" if rec.size is not None else "variable size"
        lines += [f"## {rec.name} ({size})", "", rec.doc, ""]
        lines += _md_table(["offset", "size", "field", "type", "constraint", "description"],
                           [list(r) for r in rec.rows()])
        rules = sorted({c.rule for f in rec.fields for c in f.valid})
        if rules:
            lines += ["", "Rules: " + ", ".join(f"`{r}`" for r in rules)]
        lines.append("")
    rels = getattr(mod, "RELATIONS", ())
    if rels:
        from .relations import describe_relation
        lines += ["## Relations", "",
                  "Rules between fields, declared in the schema and checked by the engine in this order "
                  "(vectorised over whole tables):", ""]
        lines += _md_table(["rule", "relation"],
                           [[", ".join(f"`{x}`" for x in dict.fromkeys(
                               x for x in (getattr(r, "rule_lo", None), getattr(r, "rule", None)) if x)) or "—",
                             describe_relation(r)] for r in rels])
        lines.append("")
    for cs_ in [v for v in vars(mod).values() if isinstance(v, Checksum)]:
        lines += ["## Checksum", "",
                  f"`{cs_.record.mc_name}.{cs_.field}` = {cs_.algorithm.upper()} of the bytes "
                  f"[{cs_.start}, {cs_.end}) — rule `{cs_.rule}`.", ""]
    extra_doc = getattr(mod, "STRING_TABLE_DOC", None)
    if extra_doc:
        lines += ["## String table", "", extra_doc, ""]
    for m in getattr(mod, "PAYLOADS", ()):
        lines += [f"## {m.name} (payload map)", "", m.doc, ""]
        lines += _md_table(["key", "type", "required", "description"],
                           [[k.name, type_text(k.type), "yes" if k.required else "no", k.doc] for k in m.keys])
        lines.append("")
    rules = getattr(mod, "Rule", None)
    if rules is not None:
        lines += ["## Rules", "", "Every error and validation finding names one of these ids.", ""]
        lines += _md_table(["rule", "requirement"], [[f"`{r.value}`", r.doc] for r in rules])
        lines.append("")
    enums = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, enum.Enum)
             and v.__module__ == mod.__name__ and v is not rules]
    for en in enums:
        lines += [f"## {en.__name__}", ""]
        lines += _md_table(["name", "value"], [[m.name, _val(m.value)] for m in en])
        lines.append("")
    limits = [(k, v) for k, v in vars(mod).items() if k.startswith("MAX_") and isinstance(v, int)]
    if limits:
        lines += ["## Limits", ""]
        lines += _md_table(["constant", "value"], [[k, f"{v:,}"] for k, v in limits])
        lines.append("")
    word = getattr(mod, "WORD", None)
    if word:
        lines += ["## Glyph word (u32, bit 31 = MSB)", ""]
        lines += _md_table(["bits", "field", "constraint", "description"],
                           [[f"{f.hi}-{f.lo}" if f.hi != f.lo else str(f.hi), f.name,
                             "; ".join(describe(c) for c in f.valid), f.doc] for f in word])
        for label, part in (("G_LOAD_BIN_TENSOR payload", getattr(mod, "LOAD_PAYLOAD", ())),
                            ("G_MMAP_BIN_REGION / G_PREFETCH_BIN payload", getattr(mod, "FILE_PAYLOAD", ()))):
            if part:
                lines += ["", f"{label}:", ""]
                lines += _md_table(["payload bits", "field", "description"],
                                   [[f"{f.hi}-{f.lo}", f.name, f.doc] for f in part])
        lines.append("")
    text = "\n".join(lines).rstrip() + "\n"
    for rel in getattr(mod, "RELATED", ()):
        text += "\n" + render(rel)
    return text


def _val(v) -> str:
    if isinstance(v, bytes):
        return repr(v)
    return f"0x{v:04x}" if isinstance(v, int) and v >= 0x100 else str(v)
