"""Format reference rendered from the schema objects (``modelcodec schema FMT``, docs/formats/).

Nothing here is typed by hand: records, payload maps, enums and limits are read from the
``schemas.<fmt>`` module, so the docs cannot drift from what the engine enforces.
"""
from __future__ import annotations

import enum
from types import ModuleType

from ..schemas.dsl import AnyValue, Bin, Bool, Checksum, Int, Key, ListOf, Map, MapOf, Str

from ..engine.records import describe, record_of


def _md_table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        out.append("| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in r) + " |")
    return out


def type_text(t) -> str:
    if isinstance(t, Map):
        return t.name
    if isinstance(t, MapOf):
        return f"map of text to {type_text(t.value)}"
    if isinstance(t, ListOf):
        n = f", exactly {t.max_len}" if t.max_len == t.min_len else ("" if t.max_len is None else f", <= {t.max_len}")
        return f"list of {type_text(t.item)}{n}" + (", ascending" if t.ascending else "")
    if isinstance(t, Int):
        c = "; ".join(describe(c) for c in t.valid)
        return "int" + (f" ({c})" if c else "")
    if isinstance(t, Str):
        if t.one_of is not None:
            return f"str, one of: {' '.join(t.one_of)}"
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


def _rules_of(r) -> list[str]:
    """The rule ids a relation declares (its fields named ``rule`` or ``rule_*``)."""
    return [v for k, v in sorted(vars(r).items(), key=lambda kv: kv[0] != "rule_lo") if
            (k == "rule" or k.startswith("rule_")) and v]


def relation_sets(mod: ModuleType) -> list[tuple[str, tuple]]:
    """The schema's declared relations: every module-level tuple named ``*RELATIONS`` (the
    rules between the fields of one part of the file each), in declaration order."""
    from ..schemas.dsl import RELATION_KINDS
    return [(k, v) for k, v in vars(mod).items() if k.endswith("RELATIONS") and isinstance(v, tuple) and v
            and all(isinstance(r, RELATION_KINDS) for r in v)]


def render(mod: ModuleType) -> str:
    fmt = mod.FORMAT
    lines = [f"# {fmt} — field reference", "",
             f"Generated from `schemas/{mod.__name__.split('.')[-1]}.py` by `modelcodec schema`; "
             "do not edit by hand.", ""]
    lines += [(mod.__doc__ or "").strip(), ""]
    # (DATA_RECORDS: records inside the tensors' data, e.g. quantized blocks)
    for st in (*getattr(mod, "RECORDS", ()), *getattr(mod, "DATA_RECORDS", ())):
        rec = record_of(st)
        size = f"{rec.size} bytes" if rec.size is not None else "variable size"
        lines += [f"## {rec.name} ({size})", "", rec.doc, ""]
        lines += _md_table(["offset", "size", "field", "type", "constraint", "description"],
                           [list(r) for r in rec.rows()])
        rules = sorted({c.rule for f in rec.fields for c in f.valid})
        if rules:
            lines += ["", "Rules: " + ", ".join(f"`{r}`" for r in rules)]
        lines.append("")
    for set_name, rels in relation_sets(mod):
        from ..engine.relations import describe_relation
        lines += [f"## Relations{'' if set_name == 'RELATIONS' else ' (' + set_name + ')'}", "",
                  "Rules between fields, declared in the schema and checked by the engine in this order "
                  "(vectorised over whole tables):", ""]
        lines += _md_table(["rule", "relation"],
                           [[", ".join(f"`{x}`" for x in dict.fromkeys(
                               x for x in _rules_of(r) if x)) or "—",
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
        keys = m.keys if isinstance(m, Map) else (Key("(any text)", m.value, required=False),)
        lines += _md_table(["key", "type", "required", "description"],
                           [[k.name, type_text(k.type), "yes" if k.required else "no", k.doc] for k in keys])
        lines.append("")
    rules = getattr(mod, "Rule", None)
    if rules is not None:
        lines += ["## Rules", "", "Every error and validation finding names one of these ids.", ""]
        lines += _md_table(["rule", "requirement"], [[f"`{r.value}`", r.doc] for r in rules])
        relaxable = getattr(mod, "RELAXABLE", ())
        if relaxable:
            lines += ["", "A lenient reader (`strict=False`) reports these as warnings: "
                      + ", ".join(f"`{r}`" for r in relaxable) + "."]
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


# --------------------------------------------------------------------------- rule audit
def _payload_rules(t, where: str, out: dict) -> None:
    """Rules declared in a payload declaration (Map / ListOf / Int / Str ...), by where."""
    from ..schemas.dsl import Key
    if isinstance(t, Key):
        _payload_rules(t.type, f"{where}.{t.name}", out)
        return
    rule = getattr(t, "rule", "")
    if rule:
        out.setdefault(str(rule), []).append(where)
    if isinstance(t, Map):
        for k in t.keys:
            _payload_rules(k, where, out)
    elif isinstance(t, ListOf):
        _payload_rules(t.item, f"{where}[]", out)
    elif isinstance(t, MapOf):
        _payload_rules(t.value, f"{where}[]", out)
    for c in getattr(t, "valid", ()):
        out.setdefault(str(c.rule), []).append(where)


def declared_rules(mod: ModuleType) -> dict[str, list[str]]:
    """rule id -> where the schema module declares it (field constraints, relations,
    checksums, payload declarations)."""
    out: dict[str, list[str]] = {}
    for st in getattr(mod, "RECORDS", ()):
        rec = record_of(st)
        for f in rec.fields:
            for c in f.valid:
                out.setdefault(str(c.rule), []).append(f"{rec.name}.{f.name}")
    for set_name, rels in relation_sets(mod):
        for r in rels:
            for rule in _rules_of(r):
                out.setdefault(str(rule), []).append(f"{set_name}: {type(r).__name__}")
    for v in vars(mod).values():
        if isinstance(v, Checksum):
            out.setdefault(str(v.rule), []).append(f"Checksum {v.record.mc_name}.{v.field}")
        elif isinstance(v, (Map, MapOf, ListOf)) and getattr(v, "name", "") != "":
            _payload_rules(v, getattr(v, "name", "payload"), out)
    for w in getattr(mod, "WORD", ()) or ():
        for c in getattr(w, "valid", ()):
            out.setdefault(str(c.rule), []).append(f"WORD.{w.name}")
    return out


def code_rules(mod: ModuleType) -> dict[str, list[str]]:
    """rule id -> file:line of the modules of ``codec`` that name it in code (``Rule.NAME``,
    in a module that imports this schema's ``Rule``)."""
    import pathlib
    import re
    rules = getattr(mod, "Rule", None)
    if rules is None:
        return {}
    short = mod.__name__.rsplit(".", 1)[-1]
    imports = re.compile(rf"from (?:\.+|codec\.)schemas\.{short} import [^\n]*\bRule\b")
    root = pathlib.Path(__file__).resolve().parent.parent  # the codec package
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not imports.search(text):
            continue
        rel = path.relative_to(root.parent).as_posix()
        for n, line in enumerate(text.splitlines(), 1):
            for name in re.findall(r"\bRule\.([A-Z0-9_]+)", line):
                member = getattr(rules, name, None)
                if member is not None:
                    out.setdefault(str(member), []).append(f"{rel}:{n}")
    return out


def rule_audit(mod: ModuleType) -> list[dict]:
    """Every rule id of a schema module: its doc, where it is declared and where code names it;
    ``declared`` is True when the schema declares it (the engine enforces it from there)."""
    rules = getattr(mod, "Rule", None)
    if rules is None:
        return []
    dec, code = declared_rules(mod), code_rules(mod)
    return [{"rule": str(r), "doc": r.doc, "declared": bool(dec.get(str(r))), "declared_in": dec.get(str(r), []),
             "code": code.get(str(r), [])} for r in rules]


def render_audit(mod: ModuleType) -> str:
    rows = rule_audit(mod)
    if not rows:
        return f"{mod.FORMAT}: no rules\n"
    n = sum(r["declared"] for r in rows)
    lines = [f"{mod.FORMAT}: {n} of {len(rows)} rules declared in the schema ({100 * n // len(rows)}%)", ""]
    lines += _md_table(["rule", "declared in", "named in code", "requirement"],
                       [[f"`{r['rule']}`", ", ".join(dict.fromkeys(r["declared_in"])) or "—",
                         ", ".join(r["code"][:4]) + (f" (+{len(r['code']) - 4})" if len(r["code"]) > 4 else "")
                         or "—", r["doc"]] for r in rows])
    out = "\n".join(lines) + "\n"
    for rel in getattr(mod, "RELATED", ()):
        out += "\n" + render_audit(rel)
    return out


#: what each metadata model keeps, in words (see registry.Capabilities.metadata)
METADATA_MODELS = {
    "json": "a JSON object (typed values keep their types under `modelcodec.value_types`)",
    "typed-arrays": "typed key/values: every integer and float width, bool, text, nested arrays",
    "typed": "typed scalars, text, arrays of numbers",
    "scalars": "int, float and bool only",
    "text": "text -> text only",
    "none": "none",
}


def capabilities_table() -> str:
    """What every format's files can hold, from the format descriptors (``modelcodec formats``;
    the conversion guide, docs/guide/convert.md, holds this table)."""
    from .. import registry
    rows = []
    for d in registry.formats():
        c = d.capabilities
        if c is None:
            continue
        magic = "".join(chr(b) if 32 < b < 127 else f"\\x{b:02x}" for b in d.magic or b"")
        detect = (f"magic `{magic}`" if d.magic is not None else
                  "content" if d.sniff is not None else "")
        claims = d.claims_doc if d.claims is not None else ""
        ranks = f"{c.min_rank}..{c.max_rank if c.max_rank is not None else 'any'}"
        plain = sorted(t for t in c.dtypes if t != "packed")
        packed = ("yes" if c.packed is None else "yes (codecs it knows)") if "packed" in c.dtypes else "no"
        rows.append([f"**{d.name}**", " ".join(d.extensions) or "", ", ".join(x for x in (detect, claims) if x),
                     " ".join(plain), packed, ranks + ("" if c.zero_extents else ", no 0 extent"),
                     c.names_doc or "any non-empty text",
                     METADATA_MODELS[c.metadata] + (f" (text of {c.text})" if c.text else "")])
    head = ["format", "written as", "recognised by", "element types", "packed (quantized)", "ranks", "tensor names",
            "metadata"]
    return "\n".join(_md_table(head, rows)) + "\n"
