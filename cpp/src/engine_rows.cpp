// Relations on what rows hold (codec/engine/relations/rows.py): comparisons, references, unique keys,
// byte sizes from shapes and dtypes, the kinds of rows present or known, text.
#include "relations.hpp"

#include <cstdio>

namespace aero {
namespace detail {

bool numpy_can_hold(const std::vector<u64>& shape, u64 itemsize) {
    const u64 MAX = (u64(1) << 63) - 1;
    u64 n = itemsize;
    for (u64 d : shape) {
        if (d > MAX) return false;
        if (d) {
            auto p = mul(n, d);
            if (!p || *p > MAX) return false;
            n = *p;
        }
    }
    return true;
}

void Eval::row_rule(const gen::Relation& r) {
    const auto& col = column(r.a.name);
    std::vector<u64> rows;
    for (u64 i = 0; i < cx.table.n; ++i) {
        if (out.bad.count(i) || !when(r.when, i)) continue;
        bool bad;
        if (r.kind == gen::RelKind::Clear) bad = (col[i] & r.bits) != 0;
        else if (r.kind == gen::RelKind::Bound) bad = col[i] > at(r.b, i);
        else bad = col[i] != at(r.b, i);
        if (bad) rows.push_back(i);
    }
    for (std::size_t k = 0; k < rows.size() && k < gen::RELATION_LIMIT; ++k) {
        const u64 i = rows[k], got = col[i];
        const auto at_ = offset_of(r.a.name, i);
        const std::string path = path_of(r.a.name, i);
        if (r.kind == gen::RelKind::Clear) {
            char b[64];
            std::snprintf(b, sizeof b, "0x%llx set here (got 0x%llx)", static_cast<unsigned long long>(r.bits),
                          static_cast<unsigned long long>(got));
            row_error(i, finding(gen::ErrorKind::ConstraintError, cx.fmt, at_, path, r.rule,
                                 std::string("must not have the bits ") + b));
        } else {
            const u64 want = at(r.b, i);
            if (r.kind == gen::RelKind::Bound)
                row_error(i, finding(gen::ErrorKind::LimitError, cx.fmt, at_, path, r.rule,
                                     "must be <= " + std::to_string(want) + " (" + words(r.b) + ") (got " +
                                         std::to_string(got) + ")"));
            else
                row_error(i, finding(gen::ErrorKind::StructureError, cx.fmt, at_, path, r.rule,
                                     "must equal " + words(r.b) + " " + std::to_string(want) + " (got " +
                                         std::to_string(got) + ")"));
        }
    }
    if (!rows.empty()) left_out(rows.size(), rows[std::min(rows.size(), gen::RELATION_LIMIT) - 1]);
    out.bad.insert(rows.begin(), rows.end());
}

void Eval::refers_to(const gen::Relation& r) {
    const auto& col = column(r.a.name);
    const auto& known = cx.targets[r.target];
    std::vector<u64> length(cx.table.n, 0), missing;
    for (u64 i = 0; i < cx.table.n; ++i) {
        auto it = known.find(col[i]);
        if (it == known.end()) missing.push_back(i);
        else length[i] = it->second.second;
    }
    cx.table.cols[r.length_as] = length;
    for (std::size_t k = 0; k < missing.size() && k < gen::RELATION_LIMIT; ++k) {
        const u64 i = missing[k];
        out.errors.push_back(finding(gen::ErrorKind::StructureError, cx.fmt, offset_of(r.a.name, i),
                                     path_of(r.a.name, i), r.rule,
                                     std::string("no ") + r.target + " " + std::to_string(col[i])));
    }
    left_out(missing.size());
    out.bad.insert(missing.begin(), missing.end());
}

void Eval::unique(const gen::Relation& r) {
    auto [rec, name] = split(r.a.name);
    auto kit = cx.table.keys.find(name);
    auto sit = cx.table.shown.find(name);
    auto value = [&](u64 i) { return kit != cx.table.keys.end() ? kit->second[i] : std::to_string(column(r.a.name)[i]); };
    std::vector<u64> dup;
    std::map<std::string, u64> first;
    for (u64 i = 0; i < cx.table.n; ++i)
        if (!first.emplace(value(i), i).second) dup.push_back(i);
    for (std::size_t k = 0; k < dup.size() && k < gen::RELATION_LIMIT; ++k) {  // (only these are shown)
        const u64 i = dup[k];
        const std::string v = value(i);
        const std::string shown = sit != cx.table.shown.end() ? sit->second(i)
                                  : kit != cx.table.keys.end() ? py_repr(v) : v;
        row_error(i, finding(gen::ErrorKind::StructureError, cx.fmt, offset_of(r.a.name, i), path_of(r.a.name, i),
                             r.rule, name + " " + shown + " already used by " + cx.table.path + "[" +
                                         std::to_string(first[v]) + "]"));
    }
    if (!dup.empty()) left_out(dup.size(), dup[std::min(dup.size(), gen::RELATION_LIMIT) - 1]);
    out.bad.insert(dup.begin(), dup.end());
}

void Eval::nbytes(const gen::Relation& r) {
    const auto& length = column(r.a.name);
    const auto& dtype = column(r.b.name);
    auto [rec, dname] = split(r.dims);
    const auto& dims = cx.table.lists.at(dname);
    std::size_t found = 0;
    for (u64 i = 0; i < cx.table.n; ++i) {
        if (found >= gen::RELATION_LIMIT) break;
        const gen::IntPair* item = nullptr;
        for (std::size_t k = 0; k < r.nitemsize; ++k)
            if (r.itemsize[k].key == dtype[i]) item = &r.itemsize[k];
        if (item == nullptr) continue;
        std::string name = std::to_string(dtype[i]);
        for (std::size_t k = 0; k < r.nnames; ++k)
            if (r.names[k].key == dtype[i]) name = r.names[k].name;
        const auto& shape = dims[i];
        std::string shape_text = "[";
        for (std::size_t k = 0; k < shape.size(); ++k) shape_text += (k ? ", " : "") + std::to_string(shape[k]);
        shape_text += "]";
        if (!numpy_can_hold(shape, item->value)) {
            out.errors.push_back(finding(gen::ErrorKind::RangeError, cx.fmt, offset_of(r.dims, i), path_of(r.dims, i),
                                         r.rule_shape ? r.rule_shape : r.rule, "no array has the shape " + shape_text));
        } else {
            u64 want = item->value;
            for (u64 d : shape) want *= d;  // (cannot wrap: numpy_can_hold bounds it)
            if (want == length[i]) continue;
            out.errors.push_back(finding(gen::ErrorKind::StructureError, cx.fmt, offset_of(r.a.name, i),
                                         path_of(r.a.name, i), r.rule,
                                         name + shape_text + " needs " + std::to_string(want) + " bytes (got " +
                                             std::to_string(length[i]) + ")"));
        }
        ++found;
        out.bad.insert(i);
    }
}

/// Present: some row is of the kind `when` names
void Eval::present(const gen::Relation& r) {
    for (u64 i = 0; i < cx.table.n; ++i)
        if (when(r.when, i)) return;
    const std::optional<u64> where = r.at.kind == gen::TermKind::None ? std::nullopt : std::optional<u64>(scalar(r.at));
    out.errors.push_back(finding(gen::ErrorKind::StructureError, cx.fmt, where, cx.table.path, r.rule,
                                 r.what ? std::string("no ") + r.what
                                        : "no row has " + std::string(r.a.name) + " " + r.when.values[0]));
}

/// Known (warnings): every row whose value is not among the known ones (`when`), uncapped
void Eval::known(const gen::Relation& r) {
    const std::string field = split(r.a.name).second;
    for (u64 i = 0; i < cx.table.n; ++i) {
        if (when(r.when, i)) continue;
        Finding f = finding(gen::ErrorKind::StructureError, cx.fmt, offset_of(r.a.name, i), path_of(r.a.name, i),
                            r.rule, "unknown " + field + ": readers skip it");
        f.severity = "warning";
        out.errors.push_back(std::move(f));
    }
}

/// Text: every row's bytes (rows `absent` left out: their own rule reports them) are UTF-8
/// without NUL, decoded into the key column `name` (ill-formed bytes replaced); every row
/// that is not is a DecodeError at the start of its bytes and cannot be read
void Eval::text(const gen::Relation& r) {
    const std::string col = split(r.a.name).second;
    auto it = cx.table.keys.find(col);
    if (it == cx.table.keys.end()) throw Error("relations: unknown bytes column " + std::string(r.a.name));
    const std::vector<std::string>& raw = it->second;
    auto gone = cx.table.absent.find(col);
    std::vector<std::string> text(cx.table.n);
    std::vector<u64> bad;
    for (u64 i = 0; i < cx.table.n; ++i) {
        if (gone != cx.table.absent.end() && gone->second[i]) continue;
        const std::string& b = raw[i];
        const std::string why = utf8_error(b.data(), b.size());
        if (why.empty() && b.find('\0') == std::string::npos) {
            text[i] = b;
            continue;
        }
        bad.push_back(i);
        row_error(i, finding(gen::ErrorKind::DecodeError, cx.fmt, offset_of(r.a.name, i), path_of(r.name, i), r.rule,
                             "not valid UTF-8 text: " + (why.empty() ? std::string("NUL inside the text") : why)));
        text[i] = utf8_replace(b.data(), b.size());
    }
    out.bad.insert(bad.begin(), bad.end());
    cx.table.keys[split(r.name).second] = std::move(text);
}

}  // namespace detail
}  // namespace aero
