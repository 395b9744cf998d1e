// Relations on where bytes lie (codec/engine/relations/layout.py): regions inside their bounds and clear
// of each other, zero padding, header values in order, rows that do not overlap.
#include "relations.hpp"

#include <algorithm>

namespace aero {
namespace detail {

void Eval::region(const gen::Relation& r) {
    const auto& off = column(r.a.name);
    const auto& ln = column(r.b.name);
    const std::set<u64> skip = out.bad;
    std::vector<u64> past;
    for (u64 i = 0; i < cx.table.n; ++i) {
        if (skip.count(i)) continue;
        const u64 h = at(r.hi, i);
        if (off[i] > h || ln[i] > h - std::min(off[i], h)) past.push_back(i);
    }
    const bool file_end = r.hi.kind == gen::TermKind::Name && std::string(r.hi.name) == gen::FILE_END;
    const bool cut = file_end || r.hi_is_end;
    u64 promised = 0;  // (a cut file: what every row past its end promises; ends saturate)
    if (cut)
        for (const u64 i : past) promised = std::max(promised, off[i] + std::min(ln[i], ~off[i]));
    for (std::size_t k = 0; k < past.size() && k < gen::RELATION_LIMIT; ++k) {
        const u64 i = past[k], o = off[i], n = ln[i], h = at(r.hi, i);
        const std::string where = file_end ? "the end of the file (" + std::to_string(h) + " bytes)"
                                           : words(r.hi) + " (" + std::to_string(h) + ")";
        const std::string term = offset_of(r.b.name, i) ? r.b.name : r.a.name;
        Finding f = finding(cut ? gen::ErrorKind::TruncatedError : gen::ErrorKind::BoundsError, cx.fmt,
                            offset_of(term, i), path_of(term, i), r.rule,
                            "data [" + std::to_string(o) + ", +" + std::to_string(n) + ") extends past " + where);
        if (cut) {
            f.has_extent = true;
            f.held = h;
            f.promised = promised;
        }
        row_error(i, std::move(f));
    }
    if (!past.empty()) left_out(past.size(), past[std::min(past.size(), gen::RELATION_LIMIT) - 1]);
    out.bad.insert(past.begin(), past.end());
    std::vector<u64> below;
    if (r.lo.kind != gen::TermKind::None) below = region_lo(r, off, ln, skip);
    if (r.clear_off.kind == gen::TermKind::None) return;
    // clear of another region of the same row (an empty region overlaps nothing; ends saturate)
    std::set<u64> done = skip;
    done.insert(past.begin(), past.end());
    done.insert(below.begin(), below.end());
    std::vector<u64> hit;
    for (u64 i = 0; i < cx.table.n; ++i) {
        const u64 o2 = at(r.clear_off, i), l2 = at(r.clear_len, i);
        const u64 end = off[i] + std::min(ln[i], ~off[i]), end2 = o2 + std::min(l2, ~o2);
        if (!done.count(i) && ln[i] > 0 && l2 > 0 && off[i] < end2 && o2 < end) hit.push_back(i);
    }
    for (std::size_t k = 0; k < hit.size() && k < gen::RELATION_LIMIT; ++k) {
        const u64 i = hit[k], o2 = at(r.clear_off, i), l2 = at(r.clear_len, i);
        row_error(i, finding(gen::ErrorKind::OverlapError, cx.fmt, offset_of(r.a.name, i), path_of(r.a.name, i),
                             r.rule_lo ? r.rule_lo : r.rule,
                             "[" + std::to_string(off[i]) + ", " + std::to_string(off[i] + std::min(ln[i], ~off[i])) +
                                 ") overlaps [" + std::to_string(o2) + ", " + std::to_string(o2 + std::min(l2, ~o2)) +
                                 ") (" + words(r.clear_off) + ", +" + words(r.clear_len) + ")"));
    }
    if (!hit.empty()) left_out(hit.size(), hit[std::min(hit.size(), gen::RELATION_LIMIT) - 1]);
    out.bad.insert(hit.begin(), hit.end());
}

/// Region: the rows (not in `skip`) that start before `lo`, reported and marked unreadable
std::vector<u64> Eval::region_lo(const gen::Relation& r, const std::vector<u64>& off, const std::vector<u64>& ln,
                           const std::set<u64>& skip) {
    const u64 lo = scalar(r.lo);
    std::vector<u64> below;
    for (u64 i = 0; i < cx.table.n; ++i)
        if (!skip.count(i) && off[i] < lo && (!r.empty_anywhere || ln[i] > 0)) below.push_back(i);
    const std::string lo_name = r.lo.name ? r.lo.name : "";
    const bool in_region = r.lo_is_end || (lo_name.size() > 4 && lo_name.compare(lo_name.size() - 4, 4, ".END") == 0);
    for (std::size_t k = 0; k < below.size() && k < gen::RELATION_LIMIT; ++k) {
        const u64 i = below[k];
        const std::string msg = in_region ? "data at " + std::to_string(off[i]) + " starts inside " + words(r.lo) +
                                                " (it ends at " + std::to_string(lo) + ")"
                                          : "must be >= " + words(r.lo) + " " + std::to_string(lo) + " (got " +
                                                std::to_string(off[i]) + ")";
        row_error(i, finding(in_region ? gen::ErrorKind::OverlapError : gen::ErrorKind::BoundsError, cx.fmt,
                             offset_of(r.a.name, i), path_of(r.a.name, i), r.rule_lo ? r.rule_lo : r.rule, msg));
    }
    if (!below.empty()) left_out(below.size(), below[std::min(below.size(), gen::RELATION_LIMIT) - 1]);
    out.bad.insert(below.begin(), below.end());
    return below;
}

/// Zeros: the bytes of [lo, hi) that no row's [offset, offset + length) covers are zero (every
/// row counts, readable or not); one finding per gap, at its first non-zero byte
void Eval::zeros(const gen::Relation& r) {
    if (cx.buf == nullptr) throw Error(std::string("relations: ") + r.rule + " needs the file's bytes");
    struct Gap { u64 a, b; std::string what; };
    std::vector<Gap> gaps;
    u64 pos = at(r.lo, 0);
    if (r.a.kind != gen::TermKind::None) {
        const auto& off = column(r.a.name);
        const auto& ln = column(r.b.name);
        std::vector<u64> order(cx.table.n);
        for (u64 i = 0; i < cx.table.n; ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&off](u64 x, u64 y) { return off[x] < off[y]; });
        for (u64 i : order) {
            if (off[i] > pos)
                gaps.push_back({pos, off[i], "gap before " + (cx.table.row_path ? cx.table.row_path(i)
                                                                                 : cx.table.path + "[" + std::to_string(i) + "]")});
            pos = std::max(pos, off[i] + std::min(ln[i], ~off[i]));
        }
    }
    gaps.push_back({pos, at(r.hi, 0), r.what});
    for (const Gap& g : gaps) {
        const u64 a = std::min(g.a, cx.size), b = std::min(g.b, cx.size);
        u64 first = b, count = 0;
        for (u64 k = a; k < b; ++k)
            if (cx.buf[k] != 0) {
                if (first == b) first = k;
                ++count;
            }
        if (count == 0) continue;
        const std::string range = "[" + std::to_string(a) + ", " + std::to_string(b) + ")";
        out.errors.push_back(finding(gen::ErrorKind::ReservedError, cx.fmt, first, g.what, r.rule,
                                     r.a.kind != gen::TermKind::None
                                         ? std::to_string(count) + " non-zero byte(s) in " + range + "; padding must be zero"
                                         : "bytes " + range + " must be zero (" + std::to_string(count) + " are not)"));
    }
}

/// Ordered: terms[0] <= terms[1] <= ... over header values (a table of one row, or scalars);
/// false when it breaks and is fatal (nothing after it is checked)
bool Eval::ordered(const gen::Relation& r) {
    std::vector<u64> vals;
    for (std::size_t j = 0; j < r.nterms; ++j) vals.push_back(at(r.terms[j], 0));
    std::size_t k = 0;
    while (k + 1 < vals.size() && vals[k] <= vals[k + 1]) ++k;
    if (k + 1 >= vals.size()) return true;
    auto field_term = [this](const gen::Term& t) {
        if (t.kind != gen::TermKind::Name) return false;
        const std::string s = t.name;
        return split(s).first == cx.table.name && !(s.size() > 4 && s.compare(s.size() - 4, 4, ".END") == 0);
    };
    std::size_t i = field_term(r.terms[k]) ? k : k + 1;
    if (r.blame)
        for (std::size_t j = r.nterms; j-- > 0;)  // (the first such term, as Python's terms.index)
            if (r.terms[j].kind == gen::TermKind::Name && std::string(r.terms[j].name) == r.blame) i = j;
    const std::string blame = r.terms[i].kind == gen::TermKind::Name ? r.terms[i].name : "";
    std::string order;
    for (std::size_t j = 0; j < vals.size(); ++j)
        order += (j ? " <= " : "") + words(r.terms[j]) + "=" + std::to_string(vals[j]);
    out.errors.push_back(finding(r.structure ? gen::ErrorKind::StructureError : gen::ErrorKind::BoundsError, cx.fmt,
                                 offset_of(blame, 0), blame, r.rule,
                                 "must be within [" + (i ? std::to_string(vals[i - 1]) : "") + ", " +
                                     (i + 1 < vals.size() ? std::to_string(vals[i + 1]) : "") + "] (got " +
                                     std::to_string(vals[i]) + "): " + order + " does not hold"));
    return !r.fatal;
}

void Eval::disjoint(const gen::Relation& r) {
    const auto& off = column(r.a.name);
    const auto& ln = column(r.b.name);
    std::vector<u64> idx;
    for (u64 i = 0; i < cx.table.n; ++i)
        if (ln[i] > 0 && !out.bad.count(i)) idx.push_back(i);
    if (idx.size() < 2) return;
    std::stable_sort(idx.begin(), idx.end(), [&](u64 a, u64 b) { return off[a] < off[b]; });
    u64 reach = off[idx[0]] + ln[idx[0]];
    std::size_t far = 0, found = 0, total = 0;
    for (std::size_t k = 1; k < idx.size(); ++k) {
        const u64 i = idx[k], start = off[i], end = start + ln[i];
        total += start < reach;
        if (start < reach && found < gen::RELATION_LIMIT) {
            const u64 j = idx[far];
            out.errors.push_back(finding(gen::ErrorKind::OverlapError, cx.fmt, offset_of(r.a.name, i),
                                         path_of(r.a.name, i), r.rule,
                                         "data [" + std::to_string(start) + ", " + std::to_string(end) +
                                             ") overlaps " + cx.table.path + "[" + std::to_string(j) + "] [" +
                                             std::to_string(off[j]) + ", " + std::to_string(off[j] + ln[j]) + ")"));
            ++found;
        }
        if (end > reach) {
            reach = end;
            far = k;
        }
    }
    left_out(total);
}

}  // namespace detail
}  // namespace aero
