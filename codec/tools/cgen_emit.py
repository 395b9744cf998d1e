"""The C++ emitters of :mod:`codec.tools.cgen`: C++ literals of Python values, and one schema's
section of a generated header (:class:`_Section`: its constants, enums and rule ids, fixed-size
records with their parse functions and constraint tables, relation sets and flattened payload
declarations).

Every value comes from the schema module and the engine's reading of it (:func:`record_of`,
:func:`describe`, :func:`error_class`), never from a second table here.  Nothing here names a
format.
"""
from __future__ import annotations

import enum
import inspect
import re
from typing import TYPE_CHECKING

from ..schemas import dsl

from ..engine.constraints import describe, error_class
from ..engine.records import record_of

if TYPE_CHECKING:
    from ..formats.hooks import CgenSpec


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


def _kind(cls: type) -> str:
    return f"ErrorKind::{cls.__name__}"


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
            if isinstance(v, dsl.Checksum):
                rec = getattr(v.record, "mc_name", None) or str(v.record)
                L.append(f"inline constexpr Checksum {name} = {{{_cstr(rec)}, {_cstr(v.field)}, {_cstr(v.algorithm)}, "
                         f"{_cstr(v.rule)}}};  // over {v.end}")
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
                ctype = "const char*" if isinstance(v[0].value, (bytes, str)) else "std::uint64_t"
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
        if isinstance(v, (bytes, str)):  # (a fourcc; a rule id, e.g. of WARNINGS)
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
        err = _kind(error_class(c))
        rule = _cstr(c.rule)
        text = _cstr(describe(c))
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
            rec = record_of(st)
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
            vals = [v if isinstance(v, bytes) else str(v) for v in c.values]  # (bytes exactly, as the keys hold them)
            self.pre.append(f"inline constexpr const char* {arr}[] = {{{', '.join(_cstr(v) for v in vals)}}};")
            return f"{{CondKind::In, {_cstr(c.column)}, 0, {arr}, {len(vals)}}}"
        kind = "Has" if isinstance(c, dsl.Has) else "Lacks"
        return f"{{CondKind::{kind}, {_cstr(c.column)}, {_u64(int(c.bits))}, nullptr, 0}}"

    def relation(self, r) -> str:
        none = self.term(None)
        f = dict(kind=None, rule=_cstr(r.rule), a=none, b=none, hi=none, lo=none, rule_lo="nullptr",
                 empty_anywhere="false", hi_is_end="false", lo_is_end="false", when=self.cond(None), bits="0",
                 dims="nullptr", itemsize="nullptr", nitemsize="0", names="nullptr", nnames="0", rule_shape="nullptr",
                 target="nullptr", length_as="nullptr", clear_off=none, clear_len=none, terms="nullptr",
                 nterms="0", blame="nullptr", structure="false", fatal="false", at=none, what="nullptr",
                 name="nullptr")
        if isinstance(r, dsl.Region):
            if r.when is not None or r.what is not None:  # (the C++ Region has neither)
                raise TypeError("a Region with `when` or `what` is not generated")
            f.update(kind="Region", a=self.term(r.offset), b=self.term(r.length), hi=self.term(r.hi),
                     lo=self.term(r.lo), rule_lo=_opt(r.rule_lo), empty_anywhere=_b(r.empty_anywhere),
                     hi_is_end=_b(r.hi_is_end), lo_is_end=_b(r.lo_is_end))
            if r.clear_of is not None:
                f.update(clear_off=self.term(r.clear_of[0]), clear_len=self.term(r.clear_of[1]))
        elif isinstance(r, dsl.Ordered):
            if dsl.FILE_END in r.terms:  # (a cut file, told by DeclaresSize: the C++ reader has no such header)
                raise TypeError("an Ordered over FILE_END is not generated")
            terms = self.anon("terms")
            self.pre.append(f"inline constexpr Term {terms}[] = {{{', '.join(self.term(t) for t in r.terms)}}};")
            f.update(kind="Ordered", terms=terms, nterms=str(len(r.terms)), blame=_opt(r.blame),
                     structure=_b(r.error == "structure"), fatal=_b(r.fatal))
        elif isinstance(r, dsl.Present):
            f.update(kind="Present", a=self.term(r.column), when=self.cond(dsl.In(r.column, (r.value,))),
                     at=self.term(r.at), what=_opt(r.what))
        elif isinstance(r, dsl.Known):
            f.update(kind="Known", a=self.term(r.column), when=self.cond(dsl.In(r.column, r.values)))
        elif isinstance(r, dsl.Text):
            if r.name is None:  # (the C++ Text decodes names; a key's first bad byte is not located)
                raise TypeError("a Text without `name` is not generated")
            f.update(kind="Text", a=self.term(r.column), name=_cstr(r.name))
        elif isinstance(r, dsl.Zeros):
            f.update(kind="Zeros", a=self.term(r.offset), b=self.term(r.length), lo=self.term(r.start),
                     hi=self.term(r.end), what=_cstr(r.tail or f"{str(r.start).partition('.')[0]} padding"))
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
            if r.when is not None:  # (the C++ NBytes has none)
                raise TypeError("an NBytes with `when` is not generated")
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
                f"{f['length_as']}, {f['clear_off']}, {f['clear_len']}, {f['terms']}, {f['nterms']}, {f['blame']}, "
                f"{f['structure']}, {f['fatal']}, {f['at']}, {f['what']}, {f['name']}}},")

    def between_files(self, name: str, rels: tuple) -> None:
        """A set of relations between files: its Linked and its Agrees declarations, each kind in
        declaration order (a set reader walks the files and compares the records they name)."""
        self.L.append(f"/// {name}: relations between files, evaluated by the set reader")
        for kind, cls in (("LINKED", dsl.Linked), ("AGREES", dsl.Agrees)):
            rows = []
            for r in (r for r in rels if isinstance(r, cls)):
                arr = self.anon("names")
                items = r.at if cls is dsl.Linked else r.fields
                self.L.append(f"inline constexpr const char* {arr}[] = {{{', '.join(_cstr(x) for x in items)}}};")
                if cls is dsl.Linked:
                    rows.append(f"    {{{arr}, {len(items)}, {_cstr(r.path)}, {_opt(r.size)}, {_opt(r.digest)}, "
                                f"{_cstr(r.algorithm)}, {_cstr(r.rule_missing)}, {_cstr(r.rule)}}},")
                else:
                    rows.append(f"    {{{_cstr(r.source)}, {_cstr(r.target)}, {_cstr(r.key)}, {arr}, {len(items)}, "
                                f"{_cstr(r.rule)}}},")
            if rows:
                self.L.append(f"inline constexpr {cls.__name__} {name}_{kind}[] = {{")
                self.L += rows
                self.L.append("};")
            self.L.append(f"inline constexpr std::size_t {name}_{kind}_COUNT = {len(rows)};")

    def relation_sets(self) -> None:
        for name, v in vars(self.S).items():
            if name.isupper() and name.endswith("RELATIONS") and isinstance(v, tuple):
                if all(isinstance(r, (dsl.Linked, dsl.Agrees)) for r in v):
                    self.between_files(name, v)
                    continue
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

