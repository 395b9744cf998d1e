"""C++ code generation from the schemas: ``python -m codec.tools.cgen [--check]``.

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

This module is the generator's core: the specs, the header's frame and its common part (the
engine's vocabulary as C++ types), the command.  The C++ literals and the section emitted for
each schema are :mod:`codec.tools.cgen_emit`.
"""
from __future__ import annotations

import argparse
import os
import sys

from ..schemas import dsl

from .. import errors as E, registry
from ..engine import nesting, payload, relations
from .cgen_emit import _b, _cstr, _ident, _kind, _opt, _Section, _u64  # noqa: F401  (the C++ emitters)
from ..engine.constraints import MAX_PER_RULE
from ..formats.hooks import CgenSpec  # noqa: F401  (what a format's cgen hook returns)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



#: error classes of codec.errors that describe data (every FormatError subclass), in declaration order
def error_classes() -> list[type]:
    out = [E.FormatError]
    for name in E.__all__:
        cls = getattr(E, name)
        if isinstance(cls, type) and issubclass(cls, E.FormatError) and cls is not E.FormatError:
            out.append(cls)
    return out


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
          "/// decode budgets (codec.engine.payload): a document stored in n bytes decodes to at most",
          "/// DECODE_OBJECTS_ALLOWANCE + per_byte x n objects",
          f"inline constexpr std::uint64_t DECODE_OBJECTS_ALLOWANCE = {_u64(payload.DECODE_OBJECTS_ALLOWANCE)};",
          f"inline constexpr std::uint64_t DECODE_OBJECTS_PER_BYTE = {_u64(payload.DECODE_OBJECTS_PER_BYTE)};",
          "/// a decoded document (JSON, msgpack) nests at most MAX_NESTING containers deep (the outermost counts 1)",
          f"inline constexpr std::size_t MAX_NESTING = {nesting.MAX_NESTING};",
          "/// the decoders' limits (codec.engine.payload): JSON nesting and integer digits as Python's json reads",
          "/// them, msgpack nesting (containers in one object unpacked) as msgpack-python's unpacker",
          f"inline constexpr std::size_t JSON_MAX_DEPTH = {payload.JSON_MAX_DEPTH};",
          f"inline constexpr std::size_t JSON_MAX_INT_DIGITS = {payload.JSON_MAX_INT_DIGITS};",
          f"inline constexpr std::size_t MSGPACK_MAX_DEPTH = {payload.MSGPACK_MAX_DEPTH};",
          "/// findings per column and constraint reported one by one (codec.engine.records.MAX_PER_RULE)",
          f"inline constexpr std::size_t MAX_PER_RULE = {MAX_PER_RULE};",
          "/// findings per relation reported one by one (codec.engine.relations.LIMIT)",
          f"inline constexpr std::size_t RELATION_LIMIT = {relations.LIMIT};",
          f"inline constexpr char FILE_END[] = {_cstr(dsl.FILE_END)};",
          "",
          "enum class FieldType : std::uint8_t { U8, U16, U32, U64, I8, I16, I32, I64, Bytes };",
          "enum class CKind : std::uint8_t { Eq, EqBytes, Zero, OneOf, Range, Multiple, KnownFlags };",
          "/// one declared constraint on a record field (schemas.dsl); `error` is codec.engine.records.error_class",
          "struct Constraint {",
          "    CKind kind; const char* rule; ErrorKind error;",
          "    std::uint64_t value;            // Eq value, Multiple n, KnownFlags mask",
          "    const unsigned char* bytes; std::size_t nbytes;  // EqBytes",
          "    bool has_lo; std::uint64_t lo; bool has_hi; std::uint64_t hi;  // Range",
          "    const std::uint64_t* choices; std::size_t nchoices;  // OneOf",
          "    const char* limit;              // Range: the limit's name",
          "    const char* eq_kind;            // Eq: \"magic\", \"version\" or \"\"",
          "    const char* text;               // how docs and messages say it (codec.engine.records.describe)",
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
          "enum class RelKind : std::uint8_t { Region, Clear, Equal, Bound, Disjoint, Unique, NBytes, RefersTo, Ordered, Present, Known, Text, Zeros };",
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
          "    Term clear_off; Term clear_len;                     // Region: a region of the same row it is clear of",
          "    const Term* terms; std::size_t nterms; const char* blame; bool structure; bool fatal;  // Ordered",
          "    Term at; const char* what;  // Present (`when`: the rows of the kind that must be there); Known: `when` says known",
          "    const char* name;           // Text: the column the text is decoded into (a: the bytes column)",
          "    // Zeros: a/b the rows' offset/length (None: no rows), lo/hi the range's start/end, what its tail's name",
          "};",
          "/// a checksum stored in record.field (schemas.dsl Checksum)",
          "struct Checksum { const char* record; const char* field; const char* algorithm; const char* rule; };",
          "/// relations between files (schemas.dsl Linked, Agrees), evaluated by a set reader",
          "struct Linked { const char* const* at; std::size_t nat; const char* path; const char* size; const char* digest;",
          "                const char* algorithm; const char* rule_missing; const char* rule; };",
          "struct Agrees { const char* source; const char* target; const char* key; const char* const* fields;",
          "                std::size_t nfields; const char* rule; };",
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
    ns = os.path.basename(os.path.dirname(target))  # the library's namespace: its include directory
    srcs = ", ".join(os.path.relpath(s.schema.__file__, ROOT) for s in parts)  # the repository's files
    L = ["// GENERATED by `python -m codec.tools.cgen` from " + srcs + " and codec/errors.py.",
         "// Do not edit: change the schema and re-run the generator (tests/test_cpp.py fails when this",
         "// file differs from what the schemas give).",
         "#pragma once",
         "#include <cstddef>",
         "#include <cstdint>",
         "#include <cstring>",
         "",
         f"namespace {ns} {{",
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
    L += ["}  // namespace gen", f"}}  // namespace {ns}", ""]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m codec.tools.cgen", description=__doc__.splitlines()[0])
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
        print("out of date (run `python -m codec.tools.cgen`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
