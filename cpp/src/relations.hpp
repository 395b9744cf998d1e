// The relations' evaluator (codec/engine/relations/context.py): the terms, conditions and findings every
// relation kind shares.  Each kind's evaluation lives with its kin, as in the Python package:
// engine_layout.cpp (where bytes lie: Region, Zeros, Ordered, Disjoint), engine_rows.cpp (what
// rows hold: Clear / Equal / Bound, RefersTo, Unique, NBytes, Present, Known, Text), and
// engine_relations.cpp runs them in their declared order.  Internal, like internal.hpp.
#pragma once

#include "internal.hpp"

#include <algorithm>

namespace aero {
namespace detail {

struct Eval {
    RelContext& cx;
    RelFindings& out;

    static std::pair<std::string, std::string> split(const std::string& term) {
        auto dot = term.find('.');
        if (dot == std::string::npos) return {term, ""};
        return {term.substr(0, dot), term.substr(dot + 1)};
    }
    bool is_column(const gen::Term& t) const {
        if (t.kind != gen::TermKind::Name && t.kind != gen::TermKind::Affine) return false;
        auto [rec, name] = split(t.name);
        return rec == cx.table.name;
    }
    /// a scalar term's value
    u64 scalar(const gen::Term& t) const {
        if (t.kind == gen::TermKind::Const) return t.value;
        const std::string name = t.name;
        if (name == gen::FILE_END) return cx.size;
        auto it = cx.scalars.find(name);
        if (it == cx.scalars.end()) throw Error("relations: unknown term " + name);
        return it->second;
    }
    const std::vector<u64>& column(const std::string& term) const {
        auto [rec, name] = split(term);
        auto it = cx.table.cols.find(name);
        if (rec != cx.table.name || it == cx.table.cols.end()) throw Error("relations: unknown column " + term);
        return it->second;
    }
    /// the term's value at a row (a column, a scalar, or an Affine of either; wraps like numpy's uint64)
    u64 at(const gen::Term& t, u64 row) const {
        if (t.kind == gen::TermKind::Affine) {
            gen::Term inner{gen::TermKind::Name, t.name, 0, 0, 0};
            return t.base + t.per * at(inner, row);
        }
        if (t.kind == gen::TermKind::Name && is_column(t)) {
            const auto& col = column(t.name);
            if (row >= col.size()) throw Error("relations: no row " + std::to_string(row) + " of " + t.name);
            return col[row];
        }
        return scalar(t);
    }
    std::optional<u64> offset_of(const std::string& term, u64 row) const {
        auto [rec, name] = split(term);
        if (rec != cx.table.name || !cx.table.field_at) return std::nullopt;
        return cx.table.field_at(row, name);
    }
    std::string path_of(const std::string& term, u64 row) const {
        auto [rec, name] = split(term);
        if (cx.table.row_path) return cx.table.row_path(row) + "." + name;
        return cx.table.path + "[" + std::to_string(row) + "]." + name;
    }
    std::string words(const gen::Term& t) const {
        if (t.kind == gen::TermKind::Const) return "the limit";
        if (t.kind == gen::TermKind::Affine)
            return std::to_string(t.base) + " + " + std::to_string(t.per) + " x " +
                   words(gen::Term{gen::TermKind::Name, t.name, 0, 0, 0});
        const std::string s = t.name;
        if (s == gen::FILE_END) return "the end of the file";
        if (s.size() > 4 && s.compare(s.size() - 4, 4, ".END") == 0) {
            const std::string rec = s.substr(0, s.size() - 4);
            return rec == cx.hrec ? "the " + rec : "the end of the " + rec + " table";
        }
        if (!s.empty() && s[0] == '$') {
            std::string w = s.substr(1);
            std::replace(w.begin(), w.end(), '_', ' ');
            return "the " + w;
        }
        auto [rec, name] = split(s);
        if (!cx.hrec.empty() && rec == cx.hrec) return name;
        return s;
    }
    bool when(const gen::Cond& c, u64 row) const {
        switch (c.kind) {
            case gen::CondKind::None: return true;
            case gen::CondKind::In: {
                auto [rec, name] = split(c.column);
                auto it = cx.table.keys.find(name);
                if (it == cx.table.keys.end()) throw Error(std::string("relations: unknown key column ") + c.column);
                for (std::size_t k = 0; k < c.nvalues; ++k)
                    if (it->second[row] == c.values[k]) return true;
                return false;
            }
            case gen::CondKind::Has: return (column(c.column)[row] & c.bits) == c.bits;
            case gen::CondKind::Lacks: return (column(c.column)[row] & c.bits) == 0;
        }
        return true;
    }
    void row_error(u64 row, Finding f) {
        out.errors.push_back(f);
        out.why.emplace(row, std::move(f));
    }
    /// after a check listed the first RELATION_LIMIT of its `total` findings, the last one
    /// listed (about `row`, when it is a row's) says how many more there are (Python's _left_out)
    void left_out(std::size_t total, std::optional<u64> row = std::nullopt) {
        if (total <= gen::RELATION_LIMIT || out.errors.empty()) return;
        Finding& f = out.errors.back();
        Finding* same = nullptr;  // (Python's why holds the very same finding)
        if (row) {
            auto w = out.why.find(*row);
            if (w != out.why.end() && w->second.message == f.message && w->second.rule == f.rule &&
                w->second.path == f.path)
                same = &w->second;
        }
        f.more += total - gen::RELATION_LIMIT;
        f.message += " [+" + std::to_string(f.more) + " more like it, not listed]";
        if (same) {
            same->more = f.more;
            same->message = f.message;
        }
    }

    // ---------------------------------------------------- where bytes lie (engine_layout.cpp)
    void region(const gen::Relation& r);
    std::vector<u64> region_lo(const gen::Relation& r, const std::vector<u64>& off, const std::vector<u64>& ln,
                               const std::set<u64>& skip);
    void zeros(const gen::Relation& r);
    bool ordered(const gen::Relation& r);
    void disjoint(const gen::Relation& r);

    // ---------------------------------------------------- what rows hold (engine_rows.cpp)
    void row_rule(const gen::Relation& r);
    void refers_to(const gen::Relation& r);
    void unique(const gen::Relation& r);
    void nbytes(const gen::Relation& r);
    void present(const gen::Relation& r);
    void known(const gen::Relation& r);
    void text(const gen::Relation& r);
};

}  // namespace detail
}  // namespace aero
