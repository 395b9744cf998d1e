// Records (codec/engine/records.py's Record): the integer fields of a fixed-size record, and the
// constraints its fields declare, checked for one record or a table of them column by column.
#include "internal.hpp"

#include <algorithm>
#include <cstring>

namespace aero {
namespace detail {

// ================================================================================ declarations
u64 field_u64(const gen::FieldSpec& f, const unsigned char* p) { return gen::detail_load_le(p + f.offset, f.size); }

const gen::FieldSpec* field_of(const gen::RecordSpec& rec, const std::string& name) {
    for (std::size_t i = 0; i < rec.nfields; ++i)
        if (name == rec.fields[i].name) return &rec.fields[i];
    return nullptr;
}

bool holds(const gen::Constraint& c, bool neg, u64 v, bool huge) {
    if (huge) {  // a Python int beyond 64 bits: outside every declared bound on its side
        if (c.kind == gen::CKind::Range) return neg ? !c.has_lo : !c.has_hi;
        return false;
    }
    switch (c.kind) {
        case gen::CKind::Eq: return !neg && v == c.value;
        case gen::CKind::Zero: return !neg && v == 0;
        case gen::CKind::OneOf:
            if (neg) return false;
            for (std::size_t i = 0; i < c.nchoices; ++i)
                if (c.choices[i] == v) return true;
            return false;
        case gen::CKind::Range:
            if (neg) return !c.has_lo;  // (declared lower bounds are never negative)
            return (!c.has_lo || v >= c.lo) && (!c.has_hi || v <= c.hi);
        case gen::CKind::Multiple: return c.value != 0 && !neg && v % c.value == 0;
        case gen::CKind::KnownFlags: return !neg && (v & ~c.value) == 0;
        default: return true;
    }
}

Finding violation(const std::string& fmt, const gen::Constraint& c, const std::string& shown, std::optional<u64> offset,
                  const std::string& path) {
    std::string want = c.text;
    if (want.rfind("= ", 0) == 0) want = want.substr(2);
    std::string msg = "must be " + want + " (got " + shown + ")";
    if (std::string(c.eq_kind) == "version") msg = "unsupported version: " + msg;
    return finding(c.error, fmt, offset, path, c.rule, msg);
}

static bool bytes_hold(const gen::Constraint& c, const unsigned char* p, std::size_t n) {
    if (c.kind == gen::CKind::Zero) return std::all_of(p, p + n, [](unsigned char x) { return x == 0; });
    if (c.kind == gen::CKind::EqBytes) return n == c.nbytes && std::memcmp(p, c.bytes, n) == 0;
    return true;
}

static std::string shown_bytes(const unsigned char* p, std::size_t n) {
    return n <= 16 ? py_bytes_repr(p, n) : py_bytes_repr(p, 16) + "...";
}

std::vector<Finding> check_record(const gen::RecordSpec& rec, const unsigned char* p, u64 base,
                                  const std::string& path) {
    std::vector<Finding> out;
    for (std::size_t i = 0; i < rec.nfields; ++i) {
        const gen::FieldSpec& f = rec.fields[i];
        for (std::size_t k = 0; k < f.nconstraints; ++k) {
            const gen::Constraint& c = f.constraints[k];
            if (f.type == gen::FieldType::Bytes) {
                if (!bytes_hold(c, p + f.offset, f.size))
                    out.push_back(violation(rec.format, c, shown_bytes(p + f.offset, f.size), base + f.offset,
                                            path + "." + f.name));
            } else {
                u64 v = field_u64(f, p);
                if (!holds(c, false, v))
                    out.push_back(violation(rec.format, c, std::to_string(v), base + f.offset, path + "." + f.name));
            }
        }
    }
    return out;
}

std::vector<Finding> check_table(const gen::RecordSpec& rec, const unsigned char* p, u64 base, u64 n,
                                 const std::string& path) {
    std::vector<Finding> out;
    for (std::size_t i = 0; i < rec.nfields; ++i) {
        const gen::FieldSpec& f = rec.fields[i];
        for (std::size_t k = 0; k < f.nconstraints; ++k) {
            const gen::Constraint& c = f.constraints[k];
            u64 bad = 0;
            for (u64 r = 0; r < n; ++r) {
                const unsigned char* row = p + r * rec.size;
                bool ok;
                std::string shown;
                if (f.type == gen::FieldType::Bytes) {
                    ok = bytes_hold(c, row + f.offset, f.size);
                    if (!ok) shown = shown_bytes(row + f.offset, f.size);
                } else {
                    u64 v = field_u64(f, row);
                    ok = holds(c, false, v);
                    if (!ok) shown = std::to_string(v);
                }
                if (ok) continue;
                if (++bad <= gen::MAX_PER_RULE)
                    out.push_back(violation(rec.format, c, shown, base + r * rec.size + f.offset,
                                            path + "[" + std::to_string(r) + "]." + f.name));
            }
            if (bad > gen::MAX_PER_RULE)
                out.push_back(finding(c.error, rec.format, std::nullopt, path + "[]." + f.name, c.rule,
                                      std::to_string(bad - gen::MAX_PER_RULE) + " more entries break this rule"));
        }
    }
    return out;
}

}  // namespace detail
}  // namespace aero
