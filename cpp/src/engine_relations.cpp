// Relations (codec/engine/relations/__init__.py): a header as a table of one row or as scalars, and every
// declared relation evaluated over a context in its declared order (relations.hpp: the evaluator).
#include "relations.hpp"

namespace aero {
namespace detail {

RelTable one_row(const gen::RecordSpec& rec, const unsigned char* p, u64 at) {
    RelTable t;
    t.name = t.path = rec.name;
    t.n = 1;
    for (std::size_t i = 0; i < rec.nfields; ++i)
        if (rec.fields[i].type != gen::FieldType::Bytes) t.cols[rec.fields[i].name] = {field_u64(rec.fields[i], p)};
    t.field_at = [rec, at](u64, const std::string& field) -> std::optional<u64> {
        const gen::FieldSpec* f = field_of(rec, field);
        return f ? std::optional<u64>(at + f->offset) : std::nullopt;
    };
    const std::string name = rec.name;
    t.row_path = [name](u64) { return name; };
    return t;
}

void add_scalars(RelContext& cx, const gen::RecordSpec& rec, const unsigned char* p) {
    for (std::size_t i = 0; i < rec.nfields; ++i)
        if (rec.fields[i].type != gen::FieldType::Bytes)
            cx.scalars[std::string(rec.name) + "." + rec.fields[i].name] = field_u64(rec.fields[i], p);
}

RelFindings check_relations(const gen::Relation* rels, std::size_t n, RelContext& cx,
                            const std::function<bool(const gen::Relation&)>& keep) {
    RelFindings out;
    Eval ev{cx, out};
    for (std::size_t k = 0; k < n; ++k) {
        const gen::Relation& r = rels[k];
        if (keep && !keep(r)) continue;
        switch (r.kind) {
            case gen::RelKind::Region: ev.region(r); break;
            case gen::RelKind::Clear:
            case gen::RelKind::Equal:
            case gen::RelKind::Bound: ev.row_rule(r); break;
            case gen::RelKind::Disjoint: ev.disjoint(r); break;
            case gen::RelKind::Unique: ev.unique(r); break;
            case gen::RelKind::NBytes: ev.nbytes(r); break;
            case gen::RelKind::RefersTo: ev.refers_to(r); break;
            case gen::RelKind::Present: ev.present(r); break;
            case gen::RelKind::Known: ev.known(r); break;
            case gen::RelKind::Text: ev.text(r); break;
            case gen::RelKind::Zeros: ev.zeros(r); break;
            case gen::RelKind::Ordered:
                if (!ev.ordered(r)) return out;
                break;
        }
    }
    return out;
}

}  // namespace detail
}  // namespace aero
