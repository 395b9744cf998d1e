// AERO v0.1 reader: what the declarations cannot say -- chunk semantics, the order of the checks
// (that of codec/formats/aero.py, so both readers name the same rule for the same file), payload
// decoding, hashes.  Layouts, limits and rule ids come from <aero/generated.hpp>.
#include "internal.hpp"

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader (exported by the shared library)
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

namespace aero {

namespace S = gen::schema_aero;
using detail::Doc;
using detail::Finding;
using detail::Node;
using detail::Raised;
using detail::StopCheck;
using detail::finding;
using detail::u64;
using K = gen::ErrorKind;

namespace {
const std::string FMT = S::FORMAT;

Finding err(K kind, std::optional<u64> offset, const std::string& path, const std::string& rule, const std::string& msg) {
    return finding(kind, FMT, offset, path, rule, msg);
}

std::string shard_name(u64 id) {
    return std::string(S::ChunkName::shard_prefix) + std::to_string(id) + S::ChunkName::shard_suffix;
}

u64 align_up(u64 x, u64 a) {
    u64 r = x % a;
    return r ? x + (a - r) : x;
}

struct Chunk {
    u64 index = 0;
    std::string fourcc, name;
    u64 flags = 0, offset = 0, length = 0, ulen = 0;
    std::string blake3;  // 32 raw bytes
    u64 toc_entry = 0;   // absolute offset of its TOC entry
    bool compressed() const { return (flags & S::ChunkFlags::COMPRESSED_ZSTD) != 0; }
    std::string path() const {
        std::string fc;
        for (unsigned char c : fourcc) fc += c < 128 ? std::string(1, static_cast<char>(c)) : "\xEF\xBF\xBD";  // (Python's decode('ascii', 'replace'))
        return "toc[" + std::to_string(index) + "](" + fc + " " + detail::py_repr(name) + ")";
    }
};

struct Entry {
    std::string name;
    u64 dtype = 0, shard_id = 0, data_off = 0, data_len = 0;
    std::vector<u64> shape;
    std::string hash_b3;  // "" when absent
};

const char* table_name(u64 code, const S::DTYPE_NAMES_Item* t, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (t[i].key == code) return t[i].value;
    return "?";
}
}  // namespace

struct AeroFile::Impl {
    std::string source;
    std::unique_ptr<detail::Mapped> map;
    const unsigned char* buf = nullptr;
    u64 size = 0;
    S::FileHeader h{};
    std::vector<Chunk> chunks;
    std::map<std::pair<std::string, std::string>, std::size_t> by_key;
    std::set<u64> unusable;
    std::map<u64, Finding> why;
    detail::RelContext toc_cx;  // the TOC entries as a table (schemas.aero.CHUNK_RELATIONS run over it later)
    std::vector<Finding> structure;
    Doc manifest;
    bool have_manifest = false;
    const Chunk* tidx = nullptr;
    std::vector<Entry> entries;
    std::vector<std::string> names;
    std::unordered_map<std::string, std::size_t> index;
    std::vector<Finding> entry_errors;
    bool entry_checked = false;
    std::vector<Finding> entry_check;
    std::map<u64, const Chunk*> shards;
    bool index_only = false;
    std::set<std::string> verified;
    bool toc_ok = false;  // the TOC was read (chunk-level checks can run)

    // ------------------------------------------------------------------ open
    /// `collect`: keep every finding, throw none (validate_file); `fd`: the file, open
    void open(const std::string& path, bool collect = false, int fd = -1) {
        source = path;
        map = fd < 0 ? std::make_unique<detail::Mapped>(path, "AERO file")
                     : std::make_unique<detail::Mapped>(fd, path, "AERO file");
        buf = map->data();
        size = map->size();
        std::vector<Finding> v;
        try {
            parse(v);
        } catch (const StopCheck&) {
        } catch (const Raised& r) {
            v.push_back(r.f);
        }
        structure = v;
        if (collect) return;
        for (const auto& f : v)
            if (f.severity == "error") detail::throw_finding(f, source);
    }

    [[noreturn]] void fatal(std::vector<Finding>& v, Finding f) {
        v.push_back(std::move(f));
        throw StopCheck{};
    }

    void parse(std::vector<Finding>& v) {
        header(v);
        toc(v);
        mmsg(v);
        tidx_chunk(v);
    }

    void header(std::vector<Finding>& v) {
        const auto& rec = S::FileHeader_RECORD;
        if (size < S::FileHeader_SIZE) {
            if (size >= S::MAGIC_LEN && std::memcmp(buf, S::MAGIC, S::MAGIC_LEN) != 0)
                fatal(v, err(K::MagicError, S::FileHeader_magic_OFFSET, "FileHeader.magic", S::rule::MAGIC,
                             "must be b'AERO' (got " + detail::py_bytes_repr(buf, S::MAGIC_LEN) + ")"));
            fatal(v, err(K::TruncatedError, 0, "FileHeader", S::rule::TRUNCATED,
                         "file is " + std::to_string(size) + " bytes, the header alone is " +
                             std::to_string(S::FileHeader_SIZE)));
        }
        h = S::parse_FileHeader(buf);
        auto bad = detail::check_record(rec, buf, 0, "FileHeader");
        bool stop = false;
        for (const auto& b : bad) stop |= b.kind == K::MagicError || b.kind == K::UnsupportedVersionError;
        v.insert(v.end(), bad.begin(), bad.end());
        if (stop) throw StopCheck{};
        // the TOC and the string table inside the file, apart (schemas.aero.HEADER_RELATIONS): a file
        // that breaks them is not read further
        detail::RelContext hc = header_context();
        auto found = detail::check_relations(S::HEADER_RELATIONS, S::HEADER_RELATIONS_COUNT, hc);
        if (!found.errors.empty()) {
            v.insert(v.end(), found.errors.begin(), found.errors.end());
            throw StopCheck{};
        }
    }

    /// the file header as a table of one row (its end: "FileHeader.END"), for its relations
    detail::RelContext header_context() const {
        detail::RelContext hc;
        hc.fmt = FMT;
        hc.size = size;
        hc.table = detail::one_row(S::FileHeader_RECORD, buf, 0);
        hc.hrec = S::FileHeader_RECORD.name;
        hc.scalars[hc.hrec + ".END"] = S::FileHeader_SIZE;
        return hc;
    }

    void toc(std::vector<Finding>& v) {
        const u64 toc_off = h.toc_offset, toc_len = h.toc_length;
        const unsigned char* th = buf + toc_off;
        auto bad = detail::check_record(S::TocHeader_RECORD, th, toc_off, "TocHeader");
        v.insert(v.end(), bad.begin(), bad.end());
        for (const auto& b : bad)
            if (b.kind == K::LimitError) throw StopCheck{};
        const S::TocHeader t = S::parse_TocHeader(th);
        const u64 n = t.entry_count;
        {   // toc_length against entry_count (schemas.aero.TOC_HEADER_RELATIONS; entry_count <=
            // MAX_ENTRY_COUNT: no wrap): the entries are not read unless it holds
            detail::RelContext hc = header_context();
            hc.hrec.clear();  // (both headers as tables of one row: messages name their fields in full)
            detail::add_scalars(hc, S::TocHeader_RECORD, th);
            auto found = detail::check_relations(S::TOC_HEADER_RELATIONS, S::TOC_HEADER_RELATIONS_COUNT, hc);
            if (!found.errors.empty()) {
                v.insert(v.end(), found.errors.begin(), found.errors.end());
                throw StopCheck{};
            }
        }
        const u64 base = toc_off + S::TOC_HEADER_SIZE;
        auto tab = detail::check_table(S::TocEntry_RECORD, buf + base, base, n, "toc");
        v.insert(v.end(), tab.begin(), tab.end());

        const u64 st_off = h.string_table_offset, st_len = h.string_table_length;
        // names are UTF-8 text without NUL (schemas.aero.NAME_RELATIONS, decoded there; a name
        // outside the string table is not decoded: its relation reports it)
        detail::RelContext nc;
        nc.fmt = FMT;
        nc.size = size;
        nc.table.name = "ChunkName";
        nc.table.path = "toc";
        nc.table.n = n;
        std::vector<std::string>& raw = nc.table.keys["bytes"];
        std::vector<bool>& gone = nc.table.absent["bytes"];
        std::vector<u64> name_at(n);
        std::vector<S::TocEntry> ents(n);  // (each entry parsed once, for its name and its chunk)
        raw.resize(n);
        gone.assign(n, false);
        for (u64 i = 0; i < n; ++i) {
            const S::TocEntry& x = ents[i] = S::parse_TocEntry(buf + base + i * S::TOC_ENTRY_SIZE);
            gone[i] = u64(x.name_off) + u64(x.name_len) > st_len;
            name_at[i] = st_off + x.name_off;
            if (!gone[i]) raw[i].assign(reinterpret_cast<const char*>(buf + st_off + x.name_off), x.name_len);
        }
        nc.table.field_at = [&name_at](u64 row, const std::string&) -> std::optional<u64> { return name_at[row]; };
        auto named = detail::check_relations(S::NAME_RELATIONS, S::NAME_RELATIONS_COUNT, nc);
        v.insert(v.end(), named.errors.begin(), named.errors.end());
        const std::vector<std::string>& decoded = nc.table.keys["name"];

        detail::RelContext& cx = toc_cx;
        cx.fmt = FMT;
        cx.size = size;
        cx.buf = buf;
        cx.hrec = S::FileHeader_RECORD.name;
        detail::RelTable& T = cx.table;
        T.name = S::TocEntry_RECORD.name;
        T.path = "toc";
        T.n = n;
        T.keys["fourcc"].resize(n);
        T.keys["key"].resize(n);
        T.shown["key"] = [this](u64 row) {  // (the (fourcc, name) pair, as Python shows the tuple)
            const Chunk& c = chunks[row];
            return "(" + detail::py_bytes_repr(reinterpret_cast<const unsigned char*>(c.fourcc.data()), c.fourcc.size()) +
                   ", " + detail::py_repr(c.name) + ")";
        };
        for (std::size_t f = 0; f < S::TocEntry_RECORD.nfields; ++f)
            if (S::TocEntry_FIELDS[f].type != gen::FieldType::Bytes) {
                auto& col = T.cols[S::TocEntry_FIELDS[f].name];
                col.resize(n);
                for (u64 i = 0; i < n; ++i)
                    col[i] = detail::field_u64(S::TocEntry_FIELDS[f], buf + base + i * S::TOC_ENTRY_SIZE);
            }
        chunks.resize(n);
        for (u64 i = 0; i < n; ++i) {
            const S::TocEntry& x = ents[i];
            Chunk& c = chunks[i];
            c.index = i;
            c.fourcc.assign(reinterpret_cast<const char*>(x.fourcc), 4);
            c.flags = x.chunk_flags;
            c.offset = x.chunk_offset;
            c.length = x.chunk_length;
            c.ulen = x.chunk_ulen;
            c.blake3.assign(reinterpret_cast<const char*>(x.blake3_256), 32);
            c.toc_entry = base + i * S::TOC_ENTRY_SIZE;
            c.name = gone[i] ? "<bad name " + std::to_string(i) + ">" : decoded[i];
            T.keys["fourcc"][i] = c.fourcc;
            T.keys["key"][i] = c.fourcc + std::string(1, '\0') + c.name;
        }
        T.field_at = [base](u64 row, const std::string& field) -> std::optional<u64> {
            const gen::FieldSpec* f = detail::field_of(S::TocEntry_RECORD, field);
            return base + row * S::TOC_ENTRY_SIZE + (f ? f->offset : 0);
        };
        T.row_path = [this](u64 row) { return chunks[row].path(); };
        cx.scalars["FileHeader.string_table_length"] = st_len;
        cx.scalars["$control_end"] = std::max(toc_off + toc_len, st_off + st_len);
        auto found = detail::check_relations(S::TOC_RELATIONS, S::TOC_RELATIONS_COUNT, cx);
        v.insert(v.end(), found.errors.begin(), found.errors.end());
        unusable = found.bad;
        why = found.why;
        for (std::size_t i = 0; i < chunks.size(); ++i) by_key.emplace(std::make_pair(chunks[i].fourcc, chunks[i].name), i);
        toc_ok = true;
    }

    const Chunk* chunk(const char* fourcc, const std::string* name = nullptr) const {
        if (name != nullptr) {
            auto it = by_key.find({fourcc, *name});
            return it == by_key.end() ? nullptr : &chunks[it->second];
        }
        for (const auto& c : chunks)
            if (c.fourcc == fourcc) return &c;
        return nullptr;
    }

    // ------------------------------------------------------------------ payloads
    void usable(const Chunk& c) const {
        if (unusable.count(c.index))
            detail::raise(err(K::StructureError, c.toc_entry, c.path(), S::rule::CHUNK_BOUNDS,
                              "chunk is unusable (see validate)"));
        if (c.compressed() && c.ulen > S::MAX_METADATA_ULEN)
            detail::raise(err(K::LimitError, c.toc_entry + S::TocEntry_chunk_ulen_OFFSET, c.path() + ".chunk_ulen",
                              S::rule::LIMIT_METADATA_ULEN,
                              "must be <= " + std::to_string(S::MAX_METADATA_ULEN) + " (got " + std::to_string(c.ulen) + ")"));
    }

    Finding ulen_error(const Chunk& c, u64 got) const {
        return err(K::CompressionError, c.toc_entry + S::TocEntry_chunk_ulen_OFFSET, c.path() + ".chunk_ulen",
                   S::rule::ZSTD, "payload decompresses to " + std::string(got > c.ulen ? "more than " : "") +
                                      std::to_string(got) + " bytes, chunk_ulen says " + std::to_string(c.ulen));
    }

    /// zstd, never producing more than chunk_ulen (+1 to see it is more) bytes; the frame's
    /// declared size is checked before anything is inflated
    std::vector<unsigned char> inflate(const Chunk& c) const {
        const unsigned char* raw = buf + c.offset;
        // (the frame header as python-zstandard's get_frame_parameters reads it, in its words)
        ZSTD_frameHeader zfh{};
        const std::size_t h = ZSTD_getFrameHeader(&zfh, raw, c.length);
        if (ZSTD_isError(h) || h != 0)
            detail::raise(err(K::CompressionError, c.offset, c.path() + ".payload", S::rule::ZSTD,
                              ZSTD_isError(h) ? std::string("not a zstd frame: cannot get frame parameters: ") + ZSTD_getErrorName(h)
                                              : "not a zstd frame: not enough data for frame parameters; need " +
                                                    std::to_string(h) + " bytes"));
        const unsigned long long declared = zfh.frameContentSize;
        if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != c.ulen)
            detail::raise(err(K::CompressionError, c.toc_entry + S::TocEntry_chunk_ulen_OFFSET,
                              c.path() + ".chunk_ulen", S::rule::ZSTD,
                              "zstd frame declares " + std::to_string(declared) + " bytes, chunk_ulen says " +
                                  std::to_string(c.ulen) + " (refused before decompressing)"));
        std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
        std::vector<unsigned char> out;
        const u64 piece = u64(1) << 20;
        ZSTD_inBuffer in{raw, static_cast<std::size_t>(c.length), 0};
        while (out.size() <= c.ulen) {
            const u64 room = std::min<u64>(piece, c.ulen + 1 - out.size());
            const std::size_t had = out.size();
            out.resize(had + room);
            ZSTD_outBuffer o{out.data() + had, static_cast<std::size_t>(room), 0};
            const std::size_t before = in.pos;
            const std::size_t r = ZSTD_decompressStream(dctx.get(), &o, &in);
            out.resize(had + o.pos);
            if (ZSTD_isError(r))
                detail::raise(err(K::CompressionError, c.offset, c.path() + ".payload", S::rule::ZSTD,
                                  std::string("zstd: ") + ZSTD_getErrorName(r)));
            if (o.pos == 0 && (in.pos == in.size || in.pos == before)) break;  // used up, or no progress (a cut frame)
        }
        if (out.size() != c.ulen) detail::raise(ulen_error(c, out.size()));
        return out;
    }

    std::vector<unsigned char> chunk_bytes(const Chunk& c, bool verify) const {
        usable(c);
        std::vector<unsigned char> data =
            c.compressed() ? inflate(c) : std::vector<unsigned char>(buf + c.offset, buf + c.offset + c.length);
        if (verify) check_chunk_hash(c, detail::blake3_raw(data.data(), data.size()));
        return data;
    }

    /// `got`, the digest of the payload, against the one the TOC holds (schemas.aero.CHUNK_CHECKSUM)
    void check_chunk_hash(const Chunk& c, const std::string& got) const {
        if (got == c.blake3) return;
        const auto& d = S::CHUNK_CHECKSUM;
        const auto g = detail::hex(reinterpret_cast<const unsigned char*>(got.data()), got.size());
        const auto w = detail::hex(reinterpret_cast<const unsigned char*>(c.blake3.data()), c.blake3.size());
        std::string algorithm = d.algorithm;
        for (auto& ch : algorithm) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        detail::raise(err(K::IntegrityError, c.toc_entry + detail::field_of(S::TocEntry_RECORD, d.field)->offset,
                          c.path() + "." + d.field, d.rule,
                          algorithm + " of the payload is " + g.substr(0, 16) + "..., the TOC says " + w.substr(0, 16) +
                              "..."));
    }

    Doc decode_msgpack(const Chunk& c, u64 per_byte, bool trailing_zeros = false, std::size_t depth_allowance = 0) const {
        detail::DecodeContext cx{FMT, c.offset, c.fourcc, S::rule::PAYLOAD, S::rule::LIMIT_DECODE, c.length, per_byte,
                                 depth_allowance};
        return detail::unpack_msgpack(chunk_bytes(c, true), cx, trailing_zeros);
    }

    Doc decode_json(const Chunk& c, bool verify) const {
        auto data = chunk_bytes(c, verify);
        detail::DecodeContext cx{FMT, c.offset, "MJSN", S::rule::PAYLOAD, S::rule::LIMIT_DECODE, c.length,
                                 gen::DECODE_OBJECTS_PER_BYTE};
        return detail::loads_json(data.data(), data.size(), cx);
    }

    void mmsg(std::vector<Finding>& v) {
        const Chunk* c = chunk(S::FourCC::MMSG);
        if (c == nullptr) return;
        std::optional<Doc> d;
        try {
            d.emplace(decode_msgpack(*c, gen::DECODE_OBJECTS_PER_BYTE));
        } catch (const Raised& r) {  // a damaged manifest: reported, and the index is still checked
            v.push_back(r.f);
            return;
        }
        std::vector<Finding> bad;
        detail::check_payload(S::PAYLOAD_NODES, S::PAYLOAD_Mmsg, *d, 0, FMT, c->offset, "MMSG", "", bad);
        v.insert(v.end(), bad.begin(), bad.end());
        if (bad.empty()) {
            manifest = std::move(*d);
            have_manifest = true;
        }
    }

    bool manifest_lists_no_weights() const {
        if (!have_manifest) return false;
        auto shards_ = manifest.get(0, "shards");
        if (!shards_ || manifest.nodes[*shards_].type != Node::Array || manifest.nodes[*shards_].len != 0) return false;
        auto ch = manifest.get(0, "chunks");
        if (ch && manifest.nodes[*ch].type == Node::Array)
            for (auto i : manifest.children(*ch)) {
                auto fc = manifest.get(i, "fourcc");
                if (fc && manifest.is_str(*fc, S::FourCC::WTSH)) return false;
            }
        return true;
    }

    void tidx_chunk(std::vector<Finding>& v) {
        // the file has a tensor index (schemas.aero.CHUNK_RELATIONS: Present)
        auto missing = detail::check_relations(S::CHUNK_RELATIONS, S::CHUNK_RELATIONS_COUNT, toc_cx,
                                               [](const gen::Relation& r) { return r.kind == gen::RelKind::Present; });
        if (!missing.errors.empty()) {
            v.insert(v.end(), missing.errors.begin(), missing.errors.end());
            throw StopCheck{};
        }
        const Chunk* c = chunk(S::FourCC::TIDX);
        // (Python unpacks a row-by-row index one row at a time: a row may nest as deep as a whole
        // document, two levels below the document's top -- checked below, once the shape is known)
        Doc d = decode_msgpack(*c, S::TIDX_OBJECTS_PER_BYTE, false, 2);
        std::vector<Finding> errors;
        // the index as the Python reader decodes it: a map (of at most 1 + 64 keys) whose first
        // "tensors" key holds a list is read row by row, each row checked against TidxEntry; any
        // other document is judged whole, within the default decode budget
        std::optional<std::uint32_t> list;
        const Node& root = d.nodes[0];
        if (root.type == Node::Map && root.len <= 1 + 64) {
            auto kids = d.children(0);
            for (std::size_t k = 0; k + 1 < kids.size(); k += 2)
                if (d.is_str(kids[k], "tensors")) {
                    if (d.nodes[kids[k + 1]].type == Node::Array) list = kids[k + 1];
                    break;
                }
        }
        std::vector<std::uint32_t> units;  // what Python unpacks on its own: the rows and what is beside them
        if (list) {
            for (auto k : d.children(0))
                if (k == *list) {
                    auto rows = d.children(k);
                    units.insert(units.end(), rows.begin(), rows.end());
                } else
                    units.push_back(k);
        } else
            units.push_back(0);
        for (auto u : units)
            if (detail::msgpack_depth(d, u) > gen::MSGPACK_MAX_DEPTH)
                detail::raise(err(K::DecodeError, c->offset, "TIDX", S::rule::PAYLOAD,
                                  "invalid msgpack: StackError: too deeply nested"));
        std::vector<std::uint32_t> items;
        if (list) {
            items = d.children(*list);
            for (std::size_t k = 0; k < items.size() && errors.size() < 50; ++k)
                detail::check_payload(S::PAYLOAD_NODES, S::PAYLOAD_TidxEntry, d, items[k], FMT, c->offset,
                                      "TIDX.tensors[" + std::to_string(k) + "]", S::rule::PAYLOAD, errors);
        } else {
            const u64 budget = detail::object_budget(c->length, gen::DECODE_OBJECTS_PER_BYTE);
            if (d.nodes.size() > budget)
                detail::raise(err(K::LimitError, c->offset, "TIDX", S::rule::LIMIT_DECODE,
                                  "msgpack payload decodes to more than " + detail::with_commas(budget) +
                                      " objects, the budget for the " + detail::with_commas(c->length) +
                                      " bytes that store it (refused before building them)"));
            detail::check_payload(S::PAYLOAD_NODES, S::PAYLOAD_Tidx, d, 0, FMT, c->offset, "TIDX", "", errors);
            if (errors.empty()) items = d.children(*d.get(0, "tensors"));
        }
        bool names_ok = true;
        for (auto i : items) {
            auto nm = d.nodes[i].type == Node::Map ? d.get(i, "name") : std::nullopt;
            if (!nm || d.nodes[*nm].type != Node::Str || d.nodes[*nm].len == 0) {
                names_ok = false;
                break;
            }
            names.push_back(d.text(*nm));
        }
        if ((!errors.empty() && items.empty()) || !names_ok) {
            if (errors.empty())
                errors.push_back(err(K::SchemaError, c->offset, "TIDX.tensors", S::rule::PAYLOAD, "malformed tensor index"));
            v.insert(v.end(), errors.begin(), errors.end());
            names.clear();
            throw StopCheck{};
        }
        tidx = c;
        entry_errors = errors;
        if (errors.empty()) {
            entries.reserve(items.size());
            for (auto i : items) {
                Entry e;
                e.name = d.text(*d.get(i, "name"));
                e.dtype = d.nodes[*d.get(i, "dtype")].v;
                e.shard_id = d.nodes[*d.get(i, "shard_id")].v;
                e.data_off = d.nodes[*d.get(i, "data_off")].v;
                e.data_len = d.nodes[*d.get(i, "data_len")].v;
                for (auto x : d.children(*d.get(i, "shape"))) e.shape.push_back(d.nodes[x].v);
                if (auto hb = d.get(i, "hash_b3")) e.hash_b3 = d.text(*hb);
                entries.push_back(std::move(e));
            }
        }
        index_only = chunk(S::FourCC::WTSH) == nullptr && manifest_lists_no_weights();
        // names are unique (the declared Unique relation); the first one wins
        bool dup = false;
        for (std::size_t i = 0; i < names.size(); ++i) dup |= !index.emplace(names[i], i).second;
        if (dup) {
            detail::RelContext cx = tidx_context(*c);
            auto found = detail::check_relations(S::RELATIONS, S::RELATIONS_COUNT, cx, [](const gen::Relation& r) {
                return r.kind == gen::RelKind::Unique;
            });
            v.insert(v.end(), found.errors.begin(), found.errors.end());
        }
    }

    detail::RelContext tidx_context(const Chunk& c) const {
        detail::RelContext cx;
        cx.fmt = FMT;
        cx.size = size;
        auto& T = cx.table;
        T.name = "TidxEntry";
        T.path = "TIDX.tensors";
        T.n = names.size();
        T.keys["name"] = names;
        const u64 at = c.offset;
        T.field_at = [at](u64, const std::string&) -> std::optional<u64> { return at; };
        if (!entries.empty() || names.empty()) {
            for (const auto& e : entries) {
                T.cols["dtype"].push_back(e.dtype);
                T.cols["shard_id"].push_back(e.shard_id);
                T.cols["data_off"].push_back(e.data_off);
                T.cols["data_len"].push_back(e.data_len);
                T.lists["shape"].push_back(e.shape);
            }
        }
        return cx;
    }

    // ------------------------------------------------------------------ entries
    const std::vector<Finding>& entry_violations() {
        if (entry_checked) return entry_check;
        entry_checked = true;
        entry_check = entry_errors;
        if (!entry_check.empty() || entries.empty()) return entry_check;
        detail::RelContext cx = tidx_context(*tidx);
        auto& targets = cx.targets["WTSH chunk weights.shard"];
        for (const auto& e : entries) {
            if (shards.count(e.shard_id)) continue;
            const std::string nm = shard_name(e.shard_id);
            const Chunk* sh = chunk(S::FourCC::WTSH, &nm);
            shards[e.shard_id] = sh;
            if (sh != nullptr) targets[e.shard_id] = {sh->offset, sh->length};
        }
        const bool io = index_only;
        auto found = detail::check_relations(S::RELATIONS, S::RELATIONS_COUNT, cx, [io](const gen::Relation& r) {
            if (r.kind == gen::RelKind::Unique) return false;
            return !(io && (r.kind == gen::RelKind::RefersTo || r.kind == gen::RelKind::Region));
        });
        entry_check = found.errors;
        return entry_check;
    }

    std::size_t row(const std::string& name) const {
        auto it = index.find(name);
        if (it == index.end()) throw NotFoundError(source + ": no tensor named " + detail::py_repr(name));
        return it->second;
    }

    /// the tensor as the TIDX describes it: everything but where its bytes are
    TensorInfo described(const std::string& name) {
        const std::size_t i = row(name);
        const auto& bad = entry_violations();
        if (!bad.empty()) detail::throw_finding(bad.front(), source);
        const Entry& e = entries[i];
        TensorInfo t;
        t.name = e.name;
        t.dtype_code = static_cast<std::uint32_t>(e.dtype);
        t.format_dtype = table_name(e.dtype, S::DTYPE_NAMES, S::DTYPE_NAMES_COUNT);
        for (std::size_t k = 0; k < S::DTYPE_COMMON_NAMES_COUNT; ++k)
            if (S::DTYPE_COMMON_NAMES[k].key == e.dtype) t.dtype = S::DTYPE_COMMON_NAMES[k].value;
        t.shape = e.shape;
        t.nbytes = e.data_len;
        t.shard_id = e.shard_id;
        t.hash_b3 = e.hash_b3;
        t.file = source;
        return t;
    }

    TensorInfo info(const std::string& name) {
        TensorInfo t = described(name);
        const Entry& e = entries[row(name)];
        const Chunk* sh = shards.count(e.shard_id) ? shards[e.shard_id] : nullptr;
        if (sh != nullptr && unusable.count(sh->index)) {
            auto w = why.find(sh->index);
            detail::throw_finding(w != why.end() ? w->second
                                                 : err(K::StructureError, sh->toc_entry, sh->path(), S::rule::CHUNK_BOUNDS,
                                                       "chunk is unusable (see validate)"),
                                  source);
        }
        if (sh == nullptr)
            throw NotLocalError(source + ": " + detail::py_repr(name) +
                                " is listed by this index-only AERO file (no WTSH chunk); its bytes live in the AEROSET parts");
        t.offset = sh->offset + e.data_off;  // (inside the shard: checked by the entry relations)
        return t;
    }

    Finding hash_b3_error(const TensorInfo& t, const std::string& got) const {
        const std::string want = detail::lower(t.hash_b3);
        return err(K::IntegrityError, t.offset, "TIDX.tensors[" + std::to_string(row(t.name)) + "].hash_b3",
                   S::rule::HASH_B3,
                   "tensor " + detail::py_repr(t.name) + ": BLAKE3 of its bytes is " + got.substr(0, 16) +
                       "..., hash_b3 says " + want.substr(0, 16) + "...");
    }

    ByteSpan span(const std::string& name, bool verify) {
        TensorInfo t = info(name);
        ByteSpan s{buf + t.offset, static_cast<std::size_t>(t.nbytes)};
        if (verify && !t.hash_b3.empty() && !verified.count(name)) {
            const std::string got = blake3_hex(s.ptr, s.len);
            if (got != detail::lower(t.hash_b3)) detail::throw_finding(hash_b3_error(t, got), source);
            verified.insert(name);
        }
        return s;
    }

    // ------------------------------------------------------------------ validation
    Report validate(bool full) {
        Report rep;
        auto add = [&](const Finding& f) { rep.violations.push_back(detail::to_violation(f, source)); };
        auto add_all = [&](const std::vector<Finding>& fs) {
            for (const auto& f : fs) add(f);
        };
        add_all(structure);
        if (!toc_ok) return rep;  // no usable TOC (a file validate_file opened): nothing else can be checked
        if (tidx != nullptr) add_all(entry_violations());
        rep.checked.push_back("structure: header, TOC (" + std::to_string(chunks.size()) + " chunks), string table, TIDX (" +
                              std::to_string(names.size()) + " tensors), MMSG");
        padding(add);
        // chunk types this version does not know: warnings (schemas.aero.CHUNK_RELATIONS: Known)
        add_all(detail::check_relations(S::CHUNK_RELATIONS, S::CHUNK_RELATIONS_COUNT, toc_cx,
                                        [](const gen::Relation& r) { return r.kind == gen::RelKind::Known; })
                    .errors);
        for (const auto& c : chunks) {
            if (c.fourcc != S::FourCC::MJSN || unusable.count(c.index)) continue;
            try {
                decode_json(c, true);
            } catch (const Raised& r) {
                add(r.f);
            }
        }
        if (!full) return rep;
        for (const auto& c : chunks) {
            if (unusable.count(c.index) || c.fourcc == S::FourCC::MJSN || c.fourcc == S::FourCC::TIDX ||
                c.fourcc == S::FourCC::MMSG)
                continue;
            try {
                if (c.compressed()) chunk_bytes(c, true);
                else check_chunk_hash(c, detail::blake3_raw(buf + c.offset, c.length));
            } catch (const Raised& r) {
                add(r.f);
            }
        }
        rep.checked.push_back("BLAKE3 of " + std::to_string(chunks.size()) + " chunks");
        if (tidx != nullptr && entry_violations().empty() && !index_only) {
            std::size_t n = 0;
            for (const auto& e : entries) {
                if (e.hash_b3.empty()) continue;
                const Chunk* sh = shards.count(e.shard_id) ? shards[e.shard_id] : nullptr;
                if (sh == nullptr || unusable.count(sh->index)) continue;
                ++n;
                TensorInfo t = info(e.name);
                if (index.at(e.name) != static_cast<std::size_t>(&e - entries.data())) continue;  // (a repeated name)
                const std::string got = blake3_hex(buf + t.offset, t.nbytes);
                if (got != detail::lower(t.hash_b3)) add(hash_b3_error(t, got));
            }
            rep.checked.push_back("hash_b3 of " + std::to_string(n) + " tensors");
            odd_bools(add);
        }
        ihsh(add, rep);
        phsh(add, rep);
        return rep;
    }

    /// each bool tensor holding a byte other than 0 or 1 (a warning): as codec/formats/aero/validate.py's _odd_bools
    template <class Add>
    void odd_bools(Add&& add) {
        for (std::size_t i = 0; i < entries.size(); ++i) {
            const Entry& e = entries[i];
            const Chunk* sh = shards.count(e.shard_id) ? shards[e.shard_id] : nullptr;
            if (e.dtype != S::DType::BOOL || index.at(e.name) != i || sh == nullptr || unusable.count(sh->index)) continue;
            const u64 at = sh->offset + e.data_off;
            if (auto f = detail::odd_bool(buf + at, e.data_len, at, FMT, "TIDX.tensors[" + std::to_string(i) + "].data",
                                          S::rule::BOOL, "tensor " + detail::py_repr(e.name) + ": ",
                                          S::WARNINGS, S::WARNINGS_COUNT))
                add(*f);
        }
    }

    template <class Add>
    void padding(Add&& add) {
        // bytes no digest covers are zero (schemas.aero.PADDING_RELATIONS): the string table after its
        // last name (every chunk's name counts, usable or not: it is not padding), then what lies
        // between the control region, the chunks and the end of the file
        const u64 st_off = h.string_table_offset, st_len = h.string_table_length;
        u64 names_end = 0;
        for (const auto& c : chunks) {
            const S::TocEntry x = S::parse_TocEntry(buf + c.toc_entry);
            names_end = std::max<u64>(names_end, u64(x.name_off) + u64(x.name_len) + 1);
        }
        detail::RelContext sc;
        sc.fmt = FMT;
        sc.size = size;
        sc.buf = buf;
        sc.hrec = S::FileHeader_RECORD.name;
        sc.table.name = "StringTable";
        sc.table.path = "string table";
        sc.table.n = 1;
        sc.table.cols["offset"] = {st_off};
        sc.table.cols["names_length"] = {std::min(names_end, st_len)};
        sc.table.field_at = [st_off](u64, const std::string&) -> std::optional<u64> { return st_off; };
        detail::add_scalars(sc, S::FileHeader_RECORD, buf);
        sc.scalars["$string_table_end"] = st_off + st_len;
        // (each relation, in declaration order, over the table its rows are from)
        for (std::size_t k = 0; k < S::PADDING_RELATIONS_COUNT; ++k) {
            const gen::Relation& r = S::PADDING_RELATIONS[k];
            detail::RelContext* cx = nullptr;
            for (auto* c : {&sc, &toc_cx})
                if (r.a.kind == gen::TermKind::Name && std::string(r.a.name).rfind(c->table.name + ".", 0) == 0) cx = c;
            if (cx == nullptr) throw Error(std::string("AERO: the reader holds no table for the padding relation ") + r.rule);
            for (const auto& f : detail::check_relations(&r, 1, *cx).errors) add(f);
        }
    }

    u64 payloads_start() const {
        return align_up(std::max(h.toc_offset + h.toc_length, h.string_table_offset + h.string_table_length),
                        S::CHUNK_ALIGN);
    }

    template <class Add>
    void ihsh(Add&& add, Report& rep) {
        const Chunk* c = chunk(S::FourCC::IHSH);
        if (c == nullptr) return;
        try {
            Doc d = decode_msgpack(*c, gen::DECODE_OBJECTS_PER_BYTE, true);
            std::vector<Finding> bad;
            detail::check_payload(S::PAYLOAD_NODES, S::PAYLOAD_Ihsh, d, 0, FMT, c->offset, "IHSH", "", bad);
            if (!bad.empty()) {
                for (const auto& b : bad) add(b);
                return;
            }
            const u64 end = payloads_start();
            auto ranges = d.children(*d.get(0, "covered_ranges"));
            auto pair = d.children(ranges.at(0));
            if (d.nodes[pair[0]].v != 0 || d.nodes[pair[1]].v != end) {
                add(err(K::IntegrityError, c->offset, "IHSH.covered_ranges", S::rule::IHSH,
                        "must be [[0, " + std::to_string(end) + "]]"));
                return;
            }
            const u64 stop = std::min(end, size);
            std::vector<unsigned char> region(buf, buf + stop);
            for (const auto& x : chunks) {
                const u64 p = x.toc_entry + S::TocEntry_blake3_256_OFFSET;
                for (u64 k = p; k < p + 32 && k < stop; ++k) region[k] = 0;
            }
            const std::string got = detail::blake3_raw(region.data(), region.size());
            const Node& dg = d.nodes[*d.get(0, "digest")];
            const std::string want(reinterpret_cast<const char*>(d.buf.data()) + dg.v, dg.len);
            if (got != want)
                add(err(K::IntegrityError, c->offset, "IHSH.digest", S::rule::IHSH,
                        "control region digest is " +
                            detail::hex(reinterpret_cast<const unsigned char*>(got.data()), 32).substr(0, 16) +
                            "..., IHSH says " +
                            detail::hex(reinterpret_cast<const unsigned char*>(want.data()), 32).substr(0, 16) + "..."));
            rep.checked.push_back("IHSH control-region digest over [0, " + std::to_string(end) + ")");
        } catch (const Raised& r) {
            add(r.f);
        }
    }

    template <class Add>
    void phsh(Add&& add, Report& rep) {
        std::size_t done = 0;
        for (const auto& c : chunks) {
            if (c.fourcc != S::FourCC::PHSH) continue;
            try {
                Doc d = decode_msgpack(c, gen::DECODE_OBJECTS_PER_BYTE);
                const std::string where = "PHSH(" + c.name + ")";
                std::vector<Finding> bad;
                detail::check_payload(S::PAYLOAD_NODES, S::PAYLOAD_Phsh, d, 0, FMT, c.offset, where, "", bad);
                if (!bad.empty()) {
                    for (const auto& b : bad) add(b);
                    continue;
                }
                const std::string sname = d.text(*d.get(0, "shard_name"));
                const Chunk* sh = chunk(S::FourCC::WTSH, &sname);
                if (sh == nullptr || unusable.count(sh->index)) {
                    add(err(K::StructureError, c.offset, where + ".shard_name", S::rule::PHSH,
                            "no usable WTSH chunk named " + detail::py_repr(sname)));
                    continue;
                }
                const u64 ps = d.nodes[*d.get(0, "page_size")].v;
                const u64 want_n = sh->length / ps + (sh->length % ps != 0);
                auto digests = d.children(*d.get(0, "digests"));
                if (digests.size() != want_n) {
                    add(err(K::IntegrityError, c.offset, where + ".digests", S::rule::PHSH,
                            sh->name + " has " + std::to_string(want_n) + " pages of " + std::to_string(ps) +
                                " bytes, PHSH lists " + std::to_string(digests.size())));
                    continue;
                }
                for (u64 k = 0; k < want_n; ++k) {
                    const u64 a = k * ps, n = std::min(ps, sh->length - a);
                    const std::string got = detail::blake3_raw(buf + sh->offset + a, n);
                    const Node& w = d.nodes[digests[k]];
                    if (got.compare(0, std::string::npos, reinterpret_cast<const char*>(d.buf.data()) + w.v, w.len) != 0)
                        add(err(K::IntegrityError, sh->offset + a, where + ".digests[" + std::to_string(k) + "]",
                                S::rule::PHSH, "page " + std::to_string(k) + " of " + sh->name + " hashes to " +
                                                   detail::hex(reinterpret_cast<const unsigned char*>(got.data()), got.size()).substr(0, 16) +
                                                   "..., PHSH says " +
                                                   detail::hex(d.buf.data() + w.v, w.len).substr(0, 16) + "..."));
                }
                ++done;
            } catch (const Raised& r) {
                add(r.f);
            }
        }
        if (done) rep.checked.push_back("PHSH page digests of " + std::to_string(done) + " shards");
    }
};

// ================================================================================ public
bool detail::Access::shard_ids(AeroFile& f, std::vector<u64>& out) {
    out.clear();
    if (!f.impl_->entry_errors.empty()) return false;
    for (const auto& e : f.impl_->entries) out.push_back(e.shard_id);
    return true;
}

TensorInfo detail::Access::described(AeroFile& f, const std::string& name) { return f.impl_->described(name); }

AeroFile::AeroFile(const std::string& path) : impl_(std::make_unique<Impl>()) { impl_->open(path); }
AeroFile::AeroFile(Collect, const std::string& path) : impl_(std::make_unique<Impl>()) { impl_->open(path, true); }
AeroFile::AeroFile(Held h, const std::string& path) : impl_(std::make_unique<Impl>()) { impl_->open(path, h.collect, h.fd); }

AeroFile detail::Access::open_held(int fd, const std::string& path) { return AeroFile(AeroFile::Held{fd, false}, path); }

Report detail::Access::validate_held(int fd, const std::string& path, bool full) {
    AeroFile f(AeroFile::Held{fd, true}, path);
    return f.validate(full);
}

Report AeroFile::validate_file(const std::string& path, bool full) {
    AeroFile f(Collect{}, path);
    return f.validate(full);
}
AeroFile::~AeroFile() = default;
AeroFile::AeroFile(AeroFile&&) noexcept = default;
AeroFile& AeroFile::operator=(AeroFile&&) noexcept = default;

const std::string& AeroFile::path() const { return impl_->source; }
const std::vector<std::string>& AeroFile::tensor_names() const { return impl_->names; }
bool AeroFile::contains(const std::string& name) const { return impl_->index.count(name) != 0; }
bool AeroFile::index_only() const { return impl_->index_only; }

TensorInfo AeroFile::info(const std::string& name) {
    try {
        return impl_->info(name);
    } catch (const Raised& r) {
        detail::throw_finding(r.f, impl_->source);
    }
}

ByteSpan AeroFile::tensor_span(const std::string& name, bool verify) {
    try {
        return impl_->span(name, verify);
    } catch (const Raised& r) {
        detail::throw_finding(r.f, impl_->source);
    }
}

std::vector<std::uint8_t> AeroFile::read_tensor_bytes(const std::string& name, bool verify) {
    ByteSpan s = tensor_span(name, verify);
    return std::vector<std::uint8_t>(s.begin(), s.end());
}

std::string AeroFile::metadata_json() {
    const Chunk* c = impl_->chunk(S::FourCC::MJSN);
    if (c == nullptr) return "{}";
    try {
        // (most reference-written files carry an all-zero MJSN hash: read it unverified, as Python does)
        auto data = impl_->chunk_bytes(*c, false);
        detail::DecodeContext cx{FMT, c->offset, "MJSN", S::rule::PAYLOAD, S::rule::LIMIT_DECODE, c->length,
                                 gen::DECODE_OBJECTS_PER_BYTE};
        detail::loads_json(data.data(), data.size(), cx);
        return std::string(data.begin(), data.end());
    } catch (const Raised& r) {
        detail::throw_finding(r.f, impl_->source);
    }
}

Report AeroFile::validate(bool full) {
    Report rep;
    try {
        rep = impl_->validate(full);
    } catch (const Raised& r) {  // (every check adds its finding; this is a safety net)
        rep.violations.push_back(detail::to_violation(r.f, impl_->source));
    }
    detail::fold_truncation(rep);
    return rep;
}

}  // namespace aero
