"""C++ code generation from the schemas: ``python -m codec.cgen [--check]``.

Writes the C++ header(s) that a native reader includes, from the same declarations the Python
engine reads -- so the two readers cannot disagree about a byte, a limit or a rule id:

* every UPPER_CASE constant of a schema module (ints, bytes, text, tuples of them) and its enums
  (``IntEnum``/``IntFlag`` as integer constants, byte enums as text), and its dicts keyed by an
  enum (``DTYPE_ITEMSIZE``, ``DTYPE_NAMES``) as lookup tables;
* its ``Rule`` ids as string constants;
* every fixed-size record (``RECORDS``): a plain struct, a little-endian parse function, and a
  table of its fields (offset, size, type) with their declared constraints as data (kind, bounds,
  rule id, error class) for the C++ engine to evaluate in the Python engine's order;
* the relations a schema declares (``TOC_RELATIONS``, ``RELATIONS``) as data;
* the payload declarations (``PAYLOADS``: Map / Key / ListOf / Int / Str / Bin / Any) as a flat
  node table for the C++ payload checker;
* the error classes of :mod:`codec.errors` (name and parent) and the engine's decode budgets.

Nothing here names a format.  Which schemas go into which header is a format's own choice: a
format descriptor's ``cgen`` hook (see :class:`codec.registry.FormatDescriptor`) returns a
:class:`CgenSpec`; formats naming the same target file share it.  ``--check`` exits 1 when a
committed header differs from what the schemas give (tests/test_cpp.py runs it).
"""
from __future__ import annotations

import argparse
import enum
import inspect
import os
import re
import sys
from dataclasses import dataclass, field as _dc_field
from typing import Any

from schemas import dsl

from . import engine, errors as E, payload, registry, relations

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class CgenSpec:
    """What one format contributes to one generated header: ``target`` (path from the project
    root), the C++ ``section`` namespace its schema goes to, the schema module, and ``extra``:
    format-specific tables (name -> {int key: str value}) computed by the format module (e.g.
    the common dtype names its reader gives)."""
    target: str
    section: str
    schema: Any
    extra: dict = _dc_field(default_factory=dict)
    order: int = 0


# ============================================================================ C++ literals
def _cstr(s: str | bytes) -> str:
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    out = []
    for ch in b:
        c = chr(ch)
        if c == "\\" or c == '"':
            out.append("\\" + c)
        elif 32 <= ch < 127 and c != "?":
            out.append(c)
        else:
            out.append(f"\\{ch:03o}")
    return '"' + "".join(out) + '"'


def _u64(v: int) -> str:
    if v < 0 or v >= 2**64:
        raise ValueError(f"{v} does not fit uint64")
    return f"UINT64_C({v})"


def _opt(s) -> str:
    return "nullptr" if s is None or s == "" else _cstr(str(s))


def _b(v: bool) -> str:
    return "true" if v else "false"


def _ident(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


#: error classes of codec.errors that describe data (every FormatError subclass), in declaration order
def error_classes() -> list[type]:
    out = [E.FormatError]
    for name in E.__all__:
        cls = getattr(E, name)
        if isinstance(cls, type) and issubclass(cls, E.FormatError) and cls is not E.FormatError:
            out.append(cls)
    return out


def _kind(cls: type) -> str:
    return f"ErrorKind::{cls.__name__}"


# ============================================================================ common part
def _common() -> list[str]:
    classes = error_classes()
    L = ["// ---------------------------------------------------------------- engine vocabulary",
         "/// the error classes of codec.errors (FormatError and its subclasses)",
         "enum class ErrorKind : std::uint8_t {"]
    L += [f"    {c.__name__}," for c in classes]
    L += ["};",
          "/// each class's name and its parent class (FormatError is its own parent)",
          "struct ErrorClassInfo { ErrorKind kind; const char* name; ErrorKind parent; };",
          "inline constexpr ErrorClassInfo ERROR_CLASSES[] = {"]
    for c in classes:
        parent = next((p for p in c.__mro__[1:] if p in classes), E.FormatError)
        L.append(f"    {{{_kind(c)}, {_cstr(c.__name__)}, {_kind(parent)}}},")
    L += ["};",
          "",
          "/// decode budgets (codec.payload): a document stored in n bytes decodes to at most",
          "/// DECODE_OBJECTS_ALLOWANCE + per_byte x n objects",
          f"inline constexpr std::uint64_t DECODE_OBJECTS_ALLOWANCE = {_u64(payload.DECODE_OBJECTS_ALLOWANCE)};",
          f"inline constexpr std::uint64_t DECODE_OBJECTS_PER_BYTE = {_u64(payload.DECODE_OBJECTS_PER_BYTE)};",
          "/// findings per column and constraint reported one by one (codec.engine.MAX_PER_RULE)",
          f"inline constexpr std::size_t MAX_PER_RULE = {engine.MAX_PER_RULE};",
          "/// findings per relation reported one by one (codec.relations.LIMIT)",
          f"inline constexpr std::size_t RELATION_LIMIT = {relations.LIMIT};",
          f"inline constexpr char FILE_END[] = {_cstr(dsl.FILE_END)};",
          "",
          "enum class FieldType : std::uint8_t { U8, U16, U32, U64, I8, I16, I32, I64, Bytes };",
          "enum class CKind : std::uint8_t { Eq, EqBytes, Zero, OneOf, Range, Multiple, KnownFlags };",
          "/// one declared constraint on a record field (schemas.dsl); `error` is codec.engine.error_class",
          "struct Constraint {",
          "    CKind kind; const char* rule; ErrorKind error;",
          "    std::uint64_t value;            // Eq value, Multiple n, KnownFlags mask",
          "    const unsigned char* bytes; std::size_t nbytes;  // EqBytes",
          "    bool has_lo; std::uint64_t lo; bool has_hi; std::uint64_t hi;  // Range",
          "    const std::uint64_t* choices; std::size_t nchoices;  // OneOf",
          "    const char* limit;              // Range: the limit's name",
          "    const char* eq_kind;            // Eq: \"magic\", \"version\" or \"\"",
          "    const char* text;               // how docs and messages say it (codec.engine.describe)",
          "};",
          "struct FieldSpec { const char* name; std::size_t offset; std::size_t size; FieldType type;",
          "                   const Constraint* constraints; std::size_t nconstraints; };",
          "struct RecordSpec { const char* format; const char* name; std::size_t size;",
          "                    const FieldSpec* fields; std::size_t nfields; };",
          "",
          "/// relations (schemas.dsl): terms are names (\"TocEntry.chunk_offset\", \"FileHeader.x\",",
          "/// \"$control_end\", FILE_END), constants or Affine (base + per x term)",
          "enum class TermKind : std::uint8_t { None, Name, Const, Affine };",
          "struct Term { TermKind kind; const char* name; std::uint64_t value; std::uint64_t base; std::uint64_t per; };",
          "enum class CondKind : std::uint8_t { None, In, Has, Lacks };",
          "struct Cond { CondKind kind; const char* column; std::uint64_t bits; const char* const* values; std::size_t nvalues; };",
          "enum class RelKind : std::uint8_t { Region, Clear, Equal, Bound, Disjoint, Unique, NBytes, RefersTo };",
          "struct IntPair { std::uint64_t key; std::uint64_t value; };",
          "struct IntName { std::uint64_t key; const char* name; };",
          "struct Relation {",
          "    RelKind kind; const char* rule;",
          "    Term a;      // Region/Disjoint: offset; Clear/Equal/Bound/Unique/RefersTo: column; NBytes: length",
          "    Term b;      // Region/Disjoint: length; Equal: other; Bound: most; NBytes: dtype",
          "    Term hi; Term lo; const char* rule_lo; bool empty_anywhere; bool hi_is_end; bool lo_is_end;",
          "    Cond when; std::uint64_t bits;                       // Clear",
          "    const char* dims; const IntPair* itemsize; std::size_t nitemsize;  // NBytes",
          "    const IntName* names; std::size_t nnames; const char* rule_shape;",
          "    const char* target; const char* length_as;          // RefersTo",
          "};",
          "",
          "/// payload declarations (schemas.dsl Map/Key/ListOf/Int/Str/Bin/Bool/AnyValue), flattened:",
          "/// nodes refer to each other by index",
          "enum class PKind : std::uint8_t { Map, List, Int, Str, Bin, Bool, Any };",
          "struct PKey { const char* name; int node; bool required; };",
          "struct PNode {",
          "    PKind kind; const char* name; const char* rule;",
          "    const PKey* keys; std::size_t nkeys;       // Map",
          "    int item;                                   // List",
          "    std::uint64_t min_len; bool has_max; std::uint64_t max_len;  // List, Str",
          "    const char* charset; const char* pattern; const char* pattern_doc;  // Str (pattern: a literal)",
          "    bool has_length; std::uint64_t length;     // Bin",
          "    bool map_only;                              // Any",
          "    const Constraint* constraints; std::size_t nconstraints;  // Int",
          "};",
          ""]
    return L


# ============================================================================ one schema
class _Section:
    def __init__(self, spec: CgenSpec):
        self.spec = spec
        self.S = spec.schema
        self.L: list[str] = []
        self.n = 0  # unique suffix for anonymous arrays

    def anon(self, what: str) -> str:
        self.n += 1
        return f"k{what}_{self.n}"

    # ------------------------------------------------------------------ constants
    def constants(self) -> None:
        S, L = self.S, self.L
        L.append("// constants and limits")
        for name, v in vars(S).items():
            if not name.isupper() or name.startswith("_") or isinstance(v, (dsl.Str, dsl.Int, dsl.Map, dsl.ListOf)):
                continue
            if getattr(dsl, name, None) is v:  # the vocabulary's own names (FILE_END): in the common part
                continue
            if isinstance(v, bool):
                continue
            if isinstance(v, enum.Enum):
                continue
            if isinstance(v, int):
                L.append(f"inline constexpr std::uint64_t {name} = {_u64(v)};")
            elif isinstance(v, bytes):
                L.append(f"inline constexpr unsigned char {name}[] = {{{', '.join(str(b) for b in v)}}};")
                L.append(f"inline constexpr std::size_t {name}_LEN = {len(v)};")
            elif isinstance(v, str):
                if "\n" in v or len(v) > 200:
                    continue
                L.append(f"inline constexpr char {name}[] = {_cstr(v)};")
            elif isinstance(v, (tuple, list)) and v and all(isinstance(x, enum.Enum) for x in v):
                vals = ", ".join(self._enum_value(x) for x in v)
                ctype = "const char*" if isinstance(v[0].value, bytes) else "std::uint64_t"
                L.append(f"inline constexpr {ctype} {name}[] = {{{vals}}};")
                L.append(f"inline constexpr std::size_t {name}_COUNT = {len(v)};")
            elif isinstance(v, (tuple, list)) and v and all(type(x) is int for x in v):
                L.append(f"inline constexpr std::uint64_t {name}[] = {{{', '.join(_u64(x) for x in v)}}};")
            elif isinstance(v, (tuple, list)) and v and all(isinstance(x, str) for x in v):
                L.append(f"inline constexpr const char* {name}[] = {{{', '.join(_cstr(x) for x in v)}}};")
                L.append(f"inline constexpr std::size_t {name}_COUNT = {len(v)};")
            elif isinstance(v, (tuple, list)) and v and all(isinstance(x, (list, tuple)) and all(type(y) is int for y in x)
                                                            for x in v) and len({len(x) for x in v}) == 1:
                rows = ", ".join("{" + ", ".join(_u64(y) for y in x) + "}" for x in v)
                L.append(f"inline constexpr std::uint64_t {name}[][{len(v[0])}] = {{{rows}}};")
                L.append(f"inline constexpr std::size_t {name}_COUNT = {len(v)};")
            elif isinstance(v, dict) and v and all(isinstance(k, enum.Enum) for k in v):
                self._enum_dict(name, v)
        L.append("")

    def _enum_value(self, x) -> str:
        v = x.value
        if isinstance(v, bytes):
            return _cstr(v)
        return _u64(int(v))

    def _enum_dict(self, name: str, d: dict) -> None:
        k0 = next(iter(d))
        vals = list(d.values())
        if isinstance(k0.value, bytes):
            if all(isinstance(x, int) for x in vals):
                self.L.append(f"struct {name}_Item {{ const char* key; std::uint64_t value; }};")
                rows = ", ".join(f"{{{_cstr(k.value)}, {_u64(int(x))}}}" for k, x in d.items())
            else:
                return
        elif all(isinstance(x, int) for x in vals):
            self.L.append(f"struct {name}_Item {{ std::uint64_t key; std::uint64_t value; }};")
            rows = ", ".join(f"{{{_u64(int(k))}, {_u64(int(x))}}}" for k, x in d.items())
        elif all(isinstance(x, str) for x in vals):
            self.L.append(f"struct {name}_Item {{ std::uint64_t key; const char* value; }};")
            rows = ", ".join(f"{{{_u64(int(k))}, {_cstr(x)}}}" for k, x in d.items())
        else:
            return
        self.L.append(f"inline constexpr {name}_Item {name}[] = {{{rows}}};")
        self.L.append(f"inline constexpr std::size_t {name}_COUNT = {len(d)};")

    def extra(self) -> None:
        for name, table in self.spec.extra.items():
            self.L.append(f"/// {name} (from the format module's cgen hook)")
            if all(isinstance(x, str) for x in table.values()):
                self.L.append(f"struct {name}_Item {{ std::uint64_t key; const char* value; }};")
                rows = ", ".join(f"{{{_u64(int(k))}, {_cstr(x)}}}" for k, x in table.items())
            else:
                self.L.append(f"struct {name}_Item {{ std::uint64_t key; std::uint64_t value; }};")
                rows = ", ".join(f"{{{_u64(int(k))}, {_u64(int(x))}}}" for k, x in table.items())
            self.L.append(f"inline constexpr {name}_Item {name}[] = {{{rows}}};")
            self.L.append(f"inline constexpr std::size_t {name}_COUNT = {len(table)};")
        if self.spec.extra:
            self.L.append("")

    # ------------------------------------------------------------------ enums and rules
    def enums(self) -> None:
        S, L = self.S, self.L
        for name, cls in vars(S).items():
            if not (inspect.isclass(cls) and issubclass(cls, enum.Enum) and cls.__module__ == S.__name__):
                continue
            if issubclass(cls, dsl.RuleId):
                L.append(f"/// {name}: every rule id ({S.__name__}.{name})")
                L.append(f"namespace {name.lower()} {{")
                for m in cls:
                    L.append(f"inline constexpr char {m.name}[] = {_cstr(m.value)};  // {m.doc}"[:400])
                L.append(f"inline constexpr const char* ALL[] = {{{', '.join(m.name for m in cls)}}};")
                L.append("}")
                continue
            L.append(f"namespace {name} {{")
            members = list(cls)
            if members and isinstance(members[0].value, bytes):
                for m in members:
                    L.append(f"inline constexpr char {m.name}[] = {_cstr(m.value)};")
                L.append(f"inline constexpr const char* ALL[] = {{{', '.join(m.name for m in members)}}};")
            else:
                for m in members:
                    L.append(f"inline constexpr std::uint64_t {m.name} = {_u64(int(m.value))};")
                L.append(f"inline constexpr std::uint64_t ALL[] = {{{', '.join(m.name for m in members)}}};")
                if issubclass(cls, enum.Flag):
                    mask = 0
                    for m in members:
                        mask |= int(m.value)
                    L.append(f"inline constexpr std::uint64_t MASK = {_u64(mask)};")
            L.append(f"inline constexpr std::size_t COUNT = {len(members)};")
            L.append("}")
        L.append("")
        # classes of text constants (e.g. the writer's chunk names), and their name patterns
        for name, cls in vars(S).items():
            if inspect.isclass(cls) and cls.__module__ == S.__name__ and not issubclass(cls, enum.Enum):
                consts = {k: v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str)}
                makers = {k: v for k, v in vars(cls).items() if isinstance(v, staticmethod)}
                if not consts and not makers:
                    continue
                L.append(f"namespace {name} {{")
                for k, v in consts.items():
                    L.append(f"inline constexpr char {k}[] = {_cstr(v)};")
                for k, m in makers.items():
                    # name patterns: f"prefix{n}suffix" -> prefix and suffix
                    full = m.__func__("\x00")
                    pre, _, post = full.partition("\x00")
                    L.append(f"inline constexpr char {k}_prefix[] = {_cstr(pre)};")
                    L.append(f"inline constexpr char {k}_suffix[] = {_cstr(post)};")
                L.append("}")
        L.append("")

    # ------------------------------------------------------------------ constraints
    def constraint(self, c, ftype: str | None) -> str:
        err = _kind(engine.error_class(c))
        rule = _cstr(c.rule)
        text = _cstr(engine.describe(c))
        base = dict(kind="CKind::Eq", value="0", bytes="nullptr", nbytes="0", has_lo="false", lo="0", has_hi="false",
                    hi="0", choices="nullptr", nchoices="0", limit="nullptr", eq_kind='""')
        if isinstance(c, dsl.Eq):
            if isinstance(c.value, bytes):
                arr = self.anon("bytes")
                self.pre.append(f"inline constexpr unsigned char {arr}[] = {{{', '.join(str(b) for b in c.value)}}};")
                base.update(kind="CKind::EqBytes", bytes=arr, nbytes=str(len(c.value)))
            else:
                base.update(value=_u64(int(c.value)))
            base["eq_kind"] = _cstr(c.kind)
        elif isinstance(c, dsl.Zero):
            base["kind"] = "CKind::Zero"
        elif isinstance(c, dsl.OneOf):
            arr = self.anon("choices")
            vals = c.values()
            self.pre.append(f"inline constexpr std::uint64_t {arr}[] = {{{', '.join(_u64(int(x)) for x in vals)}}};")
            base.update(kind="CKind::OneOf", choices=arr, nchoices=str(len(vals)))
        elif isinstance(c, dsl.Range):
            base.update(kind="CKind::Range", has_lo=_b(c.lo is not None), lo=_u64(max(int(c.lo or 0), 0)),
                        has_hi=_b(c.hi is not None), hi=_u64(int(c.hi or 0)), limit=_opt(c.limit))
            if c.lo is not None and c.lo < 0:
                raise ValueError("negative lower bounds are not generated")
        elif isinstance(c, dsl.Multiple):
            base.update(kind="CKind::Multiple", value=_u64(c.n))
        elif isinstance(c, dsl.KnownFlags):
            base.update(kind="CKind::KnownFlags", value=_u64(c.mask()))
        else:
            raise TypeError(f"constraint {c!r} is not generated")
        return (f"{{{base['kind']}, {rule}, {err}, {base['value']}, {base['bytes']}, {base['nbytes']}, "
                f"{base['has_lo']}, {base['lo']}, {base['has_hi']}, {base['hi']}, {base['choices']}, "
                f"{base['nchoices']}, {base['limit']}, {base['eq_kind']}, {text}}}")

    def constraints(self, cons) -> tuple[str, int]:
        if not cons:
            return "nullptr", 0
        rows = [self.constraint(c, None) for c in cons]
        arr = self.anon("cons")
        self.pre.append(f"inline constexpr Constraint {arr}[] = {{{', '.join(rows)}}};")
        return arr, len(rows)

    # ------------------------------------------------------------------ records
    def records(self) -> None:
        L = self.L
        for st in getattr(self.S, "RECORDS", ()):
            rec = engine.record_of(st)
            if rec.size is None:
                continue
            self.pre = []
            fields = []
            struct = [f"/// {rec.doc}", f"struct {rec.name} {{"]
            parse = [f"inline {rec.name} parse_{rec.name}(const unsigned char* p) {{", f"    {rec.name} r{{}};"]
            for f in rec.fields:
                if f.kind == "int":
                    ch = f.subcon.fmtstr[-1]
                    signed = ch in "bhilq"
                    bits = 8 * f.size
                    ftype = f"{'I' if signed else 'U'}{bits}"
                    ctype = f"std::{'int' if signed else 'uint'}{bits}_t"
                    struct.append(f"    {ctype} {f.name};  // @{f.offset}: {f.doc}")
                    parse.append(f"    r.{f.name} = static_cast<{ctype}>(detail_load_le(p + {f.offset}, {f.size}));")
                elif f.kind == "bytes":
                    ftype = "Bytes"
                    struct.append(f"    unsigned char {f.name}[{f.size}];  // @{f.offset}: {f.doc}")
                    parse.append(f"    std::memcpy(r.{f.name}, p + {f.offset}, {f.size});")
                else:
                    raise TypeError(f"{rec.name}.{f.name}: field kind {f.kind} is not generated")
                arr, n = self.constraints(f.valid)
                fields.append(f"    {{{_cstr(f.name)}, {f.offset}, {f.size}, FieldType::{ftype}, {arr}, {n}}},")
            struct.append("};")
            parse += ["    return r;", "}"]
            L += self.pre
            L += struct
            L.append(f"inline constexpr std::size_t {rec.name}_SIZE = {rec.size};")
            L += parse
            L.append(f"inline constexpr FieldSpec {rec.name}_FIELDS[] = {{")
            L += fields
            L.append("};")
            L.append(f"inline constexpr RecordSpec {rec.name}_RECORD = {{{_cstr(rec.format)}, {_cstr(rec.name)}, "
                     f"{rec.size}, {rec.name}_FIELDS, {len(fields)}}};")
            for f in rec.fields:
                L.append(f"inline constexpr std::size_t {rec.name}_{f.name}_OFFSET = {f.offset};")
            L.append("")

    # ------------------------------------------------------------------ relations
    def term(self, t) -> str:
        if t is None:
            return "{TermKind::None, nullptr, 0, 0, 0}"
        if isinstance(t, dsl.Affine):
            return f"{{TermKind::Affine, {_cstr(t.term)}, 0, {_u64(t.base)}, {_u64(t.per)}}}"
        if isinstance(t, int):
            return f"{{TermKind::Const, nullptr, {_u64(int(t))}, 0, 0}}"
        return f"{{TermKind::Name, {_cstr(str(t))}, 0, 0, 0}}"

    def cond(self, c) -> str:
        if c is None:
            return "{CondKind::None, nullptr, 0, nullptr, 0}"
        if isinstance(c, dsl.In):
            arr = self.anon("in")
            vals = [v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in c.values]
            self.pre.append(f"inline constexpr const char* {arr}[] = {{{', '.join(_cstr(v) for v in vals)}}};")
            return f"{{CondKind::In, {_cstr(c.column)}, 0, {arr}, {len(vals)}}}"
        kind = "Has" if isinstance(c, dsl.Has) else "Lacks"
        return f"{{CondKind::{kind}, {_cstr(c.column)}, {_u64(int(c.bits))}, nullptr, 0}}"

    def relation(self, r) -> str:
        none = self.term(None)
        f = dict(kind=None, rule=_cstr(r.rule), a=none, b=none, hi=none, lo=none, rule_lo="nullptr",
                 empty_anywhere="false", hi_is_end="false", lo_is_end="false", when=self.cond(None), bits="0",
                 dims="nullptr", itemsize="nullptr", nitemsize="0", names="nullptr", nnames="0", rule_shape="nullptr",
                 target="nullptr", length_as="nullptr")
        if isinstance(r, dsl.Region):
            f.update(kind="Region", a=self.term(r.offset), b=self.term(r.length), hi=self.term(r.hi),
                     lo=self.term(r.lo), rule_lo=_opt(r.rule_lo), empty_anywhere=_b(r.empty_anywhere),
                     hi_is_end=_b(r.hi_is_end), lo_is_end=_b(r.lo_is_end))
        elif isinstance(r, dsl.Clear):
            f.update(kind="Clear", a=self.term(r.column), when=self.cond(r.when), bits=_u64(int(r.bits)))
        elif isinstance(r, dsl.Equal):
            f.update(kind="Equal", a=self.term(r.column), b=self.term(r.other), when=self.cond(r.when))
        elif isinstance(r, dsl.Bound):
            f.update(kind="Bound", a=self.term(r.column), b=self.term(r.most), when=self.cond(r.when))
        elif isinstance(r, dsl.Disjoint):
            f.update(kind="Disjoint", a=self.term(r.offset), b=self.term(r.length))
        elif isinstance(r, dsl.Unique):
            f.update(kind="Unique", a=self.term(r.column))
        elif isinstance(r, dsl.NBytes):
            items = self.anon("itemsize")
            self.pre.append(f"inline constexpr IntPair {items}[] = {{"
                            + ", ".join(f"{{{_u64(int(k))}, {_u64(int(v))}}}" for k, v in r.itemsize.items()) + "};")
            names, nn = "nullptr", 0
            if r.names:
                names = self.anon("names")
                self.pre.append(f"inline constexpr IntName {names}[] = {{"
                                + ", ".join(f"{{{_u64(int(k))}, {_cstr(v)}}}" for k, v in r.names.items()) + "};")
                nn = len(r.names)
            f.update(kind="NBytes", a=self.term(r.length), b=self.term(r.dtype), dims=_cstr(r.dims),
                     itemsize=items, nitemsize=str(len(r.itemsize)), names=names, nnames=str(nn),
                     rule_shape=_opt(r.rule_shape))
        elif isinstance(r, dsl.RefersTo):
            f.update(kind="RefersTo", a=self.term(r.column), target=_cstr(r.target), length_as=_cstr(r.length_as))
        else:
            raise TypeError(f"relation {type(r).__name__} is not generated")
        return (f"    {{RelKind::{f['kind']}, {f['rule']}, {f['a']}, {f['b']}, {f['hi']}, {f['lo']}, {f['rule_lo']}, "
                f"{f['empty_anywhere']}, {f['hi_is_end']}, {f['lo_is_end']}, {f['when']}, {f['bits']}, {f['dims']}, "
                f"{f['itemsize']}, {f['nitemsize']}, {f['names']}, {f['nnames']}, {f['rule_shape']}, {f['target']}, "
                f"{f['length_as']}}},")

    def relation_sets(self) -> None:
        for name, v in vars(self.S).items():
            if name.isupper() and name.endswith("RELATIONS") and isinstance(v, tuple) \
                    and name not in getattr(self.S, "NOT_GENERATED", ()):
                self.pre = []
                rows = [self.relation(r) for r in v]
                self.L += self.pre
                self.L.append(f"/// {name}, in declaration order (evaluated in that order)")
                self.L.append(f"inline constexpr Relation {name}[] = {{")
                self.L += rows
                self.L.append("};")
                self.L.append(f"inline constexpr std::size_t {name}_COUNT = {len(rows)};")
        self.L.append("")

    # ------------------------------------------------------------------ payloads
    def payloads(self) -> None:
        decls = list(getattr(self.S, "PAYLOADS", ()))
        if not decls:
            return
        nodes: list[str] = []
        keys: list[str] = []
        self.pre = []
        memo: dict[int, int] = {}
        named: dict[str, int] = {}

        def node(d) -> int:
            if id(d) in memo:
                return memo[id(d)]
            i = len(nodes)
            nodes.append("")
            memo[id(d)] = i
            f = dict(kind=None, name="nullptr", rule=_opt(getattr(d, "rule", "")), keys="nullptr", nkeys="0",
                     item="-1", min_len="0", has_max="false", max_len="0", charset="nullptr", pattern="nullptr",
                     pattern_doc="nullptr", has_length="false", length="0", map_only="false", cons="nullptr",
                     ncons="0")
            if isinstance(d, dsl.Map):
                kids = [(k, node(k.type)) for k in d.keys]
                arr = self.anon("keys")
                self.pre.append(f"inline constexpr PKey {arr}[] = {{"
                                + ", ".join(f"{{{_cstr(k.name)}, {n}, {_b(k.required)}}}" for k, n in kids) + "};")
                f.update(kind="Map", name=_cstr(d.name), keys=arr, nkeys=str(len(kids)))
                named.setdefault(d.name, i)
            elif isinstance(d, dsl.ListOf):
                f.update(kind="List", item=str(node(d.item)), min_len=str(d.min_len), has_max=_b(d.max_len is not None),
                         max_len=str(d.max_len or 0))
            elif isinstance(d, dsl.Int):
                arr, n = self.constraints(d.valid)
                f.update(kind="Int", cons=arr, ncons=str(n))
            elif isinstance(d, dsl.Str):
                if d.pattern is not None and not re.fullmatch(r"[A-Za-z0-9_ -]*", d.pattern):
                    raise ValueError(f"Str pattern {d.pattern!r}: only literal patterns are generated (the C++ "
                                     "reader compares them exactly); declare a charset instead")
                f.update(kind="Str", min_len=str(d.min_len), has_max=_b(d.max_len is not None),
                         max_len=str(d.max_len or 0), charset=_opt(d.charset), pattern=_opt(d.pattern),
                         pattern_doc=_opt(d.pattern_doc))
            elif isinstance(d, dsl.Bin):
                f.update(kind="Bin", has_length=_b(d.length is not None), length=str(d.length or 0))
            elif isinstance(d, dsl.Bool):
                f.update(kind="Bool")
            elif isinstance(d, dsl.AnyValue):
                f.update(kind="Any", map_only=_b(d.map_only))
            else:
                raise TypeError(f"payload {d!r} is not generated")
            nodes[i] = (f"    {{PKind::{f['kind']}, {f['name']}, {f['rule']}, {f['keys']}, {f['nkeys']}, {f['item']}, "
                        f"{f['min_len']}, {f['has_max']}, {f['max_len']}, {f['charset']}, {f['pattern']}, "
                        f"{f['pattern_doc']}, {f['has_length']}, {f['length']}, {f['map_only']}, {f['cons']}, "
                        f"{f['ncons']}}},  // {i}")
            return i

        for d in decls:
            node(d)
        self.L += self.pre
        self.L.append("/// the payload declarations (PAYLOADS), flattened")
        self.L.append("inline constexpr PNode PAYLOAD_NODES[] = {")
        self.L += nodes
        self.L.append("};")
        for name, i in named.items():
            self.L.append(f"inline constexpr int PAYLOAD_{name} = {i};")
        self.L.append("")

    def render(self) -> list[str]:
        S = self.S
        self.L.append(f"// ================================================================ {S.__name__}")
        doc = (S.__doc__ or "").strip().splitlines()
        self.L.append(f"/// {doc[0] if doc else S.__name__}")
        self.L.append(f"namespace {self.spec.section} {{")
        self.constants()
        self.extra()
        self.enums()
        self.records()
        self.relation_sets()
        self.payloads()
        self.L.append(f"}}  // namespace {self.spec.section}")
        self.L.append("")
        return self.L


# ============================================================================ files
def specs() -> dict[str, list[CgenSpec]]:
    """target file -> the specs of the formats that generate into it (from the registry)."""
    out: dict[str, list[CgenSpec]] = {}
    for d in registry.formats():
        if d.cgen is None:
            continue
        for s in d.cgen():
            out.setdefault(s.target, []).append(s)
    return out


def render(target: str, parts: list[CgenSpec]) -> str:
    parts = sorted(parts, key=lambda s: s.order)
    srcs = ", ".join(s.schema.__name__.replace(".", "/") + ".py" for s in parts)
    L = ["// GENERATED by `python -m codec.cgen` from " + srcs + " and codec/errors.py.",
         "// Do not edit: change the schema and re-run the generator (tests/test_cpp.py fails when this",
         "// file differs from what the schemas give).",
         "#pragma once",
         "#include <cstddef>",
         "#include <cstdint>",
         "#include <cstring>",
         "",
         "namespace aero {",
         "namespace gen {",
         "",
         "/// little-endian load of n <= 8 bytes",
         "inline std::uint64_t detail_load_le(const unsigned char* p, std::size_t n) {",
         "    std::uint64_t v = 0;",
         "    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);",
         "    return v;",
         "}",
         ""]
    L += _common()
    for s in parts:
        L += _Section(s).render()
    L += ["}  // namespace gen", "}  // namespace aero", ""]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m codec.cgen", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed header is out of date")
    ap.add_argument("--root", default=ROOT, help="project root (default: this checkout)")
    a = ap.parse_args(argv)
    stale = []
    for target, parts in sorted(specs().items()):
        text = render(target, parts)
        path = os.path.join(a.root, target)
        try:
            with open(path, encoding="utf-8") as f:
                old = f.read()
        except FileNotFoundError:
            old = None
        if old == text:
            continue
        if a.check:
            stale.append(target)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {target}")
    if stale:
        print("out of date (run `python -m codec.cgen`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
