// The generic engine: errors, files, hashes, bounded decoding, declared constraints, relations
// and payload declarations -- each a port of the Python engine's behaviour (codec/engine/records.py,
// codec/relations.py, codec/engine/payload.py), driven by the tables of <aero/generated.hpp>.
#include "internal.hpp"

#include <blake3.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST 1
#endif
#include <msgpack.hpp>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aero {

// ================================================================================ public errors
FormatError::FormatError(std::string kind, std::string format, bool has_offset, std::uint64_t offset, std::string path,
                         std::string rule, std::string message, std::string source, std::string severity)
    : Error(render(source, format, path, has_offset, offset, message, rule)),
      kind_(std::move(kind)), format_(std::move(format)), has_offset_(has_offset), offset_(offset),
      path_(std::move(path)), rule_(std::move(rule)), message_(std::move(message)), source_(std::move(source)),
      severity_(std::move(severity)) {}

std::string FormatError::render(const std::string& source, const std::string& format, const std::string& path,
                                bool has_offset, std::uint64_t offset, const std::string& message,
                                const std::string& rule) {
    std::ostringstream o;
    if (!source.empty()) o << source << ": ";
    o << format;
    if (!path.empty()) o << " " << path;
    if (has_offset) o << " @ 0x" << std::hex << offset << std::dec;
    o << ": " << message << " [" << rule << "]";
    return o.str();
}

bool FormatError::is_a(const std::string& name) const {
    // walk the generated class hierarchy from this error's class up to FormatError
    for (const auto& c : gen::ERROR_CLASSES) {
        if (kind_ != c.name) continue;
        gen::ErrorKind k = c.kind;
        for (int guard = 0; guard < 32; ++guard) {
            const gen::ErrorClassInfo* info = nullptr;
            for (const auto& x : gen::ERROR_CLASSES)
                if (x.kind == k) info = &x;
            if (info == nullptr) return false;
            if (name == info->name) return true;
            if (info->parent == k) return false;
            k = info->parent;
        }
    }
    return name == "FormatError";
}

std::string Violation::str() const {
    return FormatError::render(source, format, path, has_offset, offset, message, rule);
}

bool Report::ok() const { return first_error() == nullptr; }

const Violation* Report::first_error() const {
    for (const auto& v : violations)
        if (v.severity == "error") return &v;
    return nullptr;
}

namespace detail {

// ================================================================================ findings
const char* kind_name(gen::ErrorKind k) {
    for (const auto& c : gen::ERROR_CLASSES)
        if (c.kind == k) return c.name;
    return "FormatError";
}

Finding finding(gen::ErrorKind kind, const std::string& fmt, std::optional<u64> offset, const std::string& path,
                const std::string& rule, const std::string& message) {
    Finding f;
    f.kind = kind;
    f.format = fmt;
    f.has_offset = offset.has_value();
    f.offset = offset.value_or(0);
    f.path = path;
    f.rule = rule;
    f.message = message;
    return f;
}

void fold_truncation(Report& rep) {
    struct Fold {
        std::size_t at;
        u64 more = 0;          // findings it absorbs (those a cap left out included)
        bool extent = false;   // bytes held (the first's) of the most any promises
        u64 held = 0, promised = 0;
    };
    std::map<std::string, Fold> first;  // source -> its first TruncatedError
    std::vector<Violation> kept;
    for (auto& v : rep.violations) {
        if (v.kind == "TruncatedError") {
            auto [it, fresh] = first.emplace(v.source, Fold{kept.size()});
            Fold& f = it->second;
            f.more += v.more + (fresh ? 0 : 1);
            if (v.has_extent) {
                if (!f.extent) f.held = v.held;
                f.extent = true;
                f.promised = std::max(f.promised, v.promised);
            }
            if (!fresh) continue;
        }
        kept.push_back(std::move(v));
    }
    for (const auto& [source, f] : first) {
        if (!f.more && !f.extent) continue;
        std::string& m = kept[f.at].message;
        m = m.substr(0, std::min(m.find(" [+"), m.find(" [holds ")));
        std::string said;
        if (f.extent)
            said = "holds " + std::to_string(f.held) + " bytes of the " + std::to_string(f.promised) +
                   " its header promises";
        if (f.more)
            said += std::string(said.empty() ? "" : "; ") + "+" + std::to_string(f.more) + " more finding" +
                    (f.more > 1 ? "s" : "") + " past the end of the data that follow" + (f.more > 1 ? "" : "s") +
                    " from it";
        m += " [" + said + "]";
    }
    rep.violations = std::move(kept);
}

Violation to_violation(const Finding& f, const std::string& source) {
    Violation v;
    v.kind = kind_name(f.kind);
    v.format = f.format;
    v.path = f.path;
    v.rule = f.rule;
    v.message = f.message;
    v.severity = f.severity;
    v.source = source;
    v.has_offset = f.has_offset;
    v.offset = f.offset;
    v.more = f.more;
    v.has_extent = f.has_extent;
    v.held = f.held;
    v.promised = f.promised;
    return v;
}

void throw_finding(const Finding& f, const std::string& source) {
    using K = gen::ErrorKind;
    const std::string k = kind_name(f.kind);
#define AERO_THROW(NAME) \
    case K::NAME: throw NAME(k, f.format, f.has_offset, f.offset, f.path, f.rule, f.message, source, f.severity);
    switch (f.kind) {
        AERO_THROW(MagicError)
        AERO_THROW(UnsupportedVersionError)
        AERO_THROW(BoundsError)
        AERO_THROW(TruncatedError)
        AERO_THROW(OverlapError)
        AERO_THROW(ConstraintError)
        AERO_THROW(ReservedError)
        AERO_THROW(EnumError)
        AERO_THROW(RangeError)
        AERO_THROW(LimitError)
        AERO_THROW(AlignmentError)
        AERO_THROW(StructureError)
        AERO_THROW(DecodeError)
        AERO_THROW(SchemaError)
        AERO_THROW(CompressionError)
        AERO_THROW(IntegrityError)
        default: throw FormatError(k, f.format, f.has_offset, f.offset, f.path, f.rule, f.message, source, f.severity);
    }
#undef AERO_THROW
}

// ================================================================================ text
std::string hex(const unsigned char* p, std::size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string s(2 * n, '0');
    for (std::size_t i = 0; i < n; ++i) {
        s[2 * i] = digits[p[i] >> 4];
        s[2 * i + 1] = digits[p[i] & 15];
    }
    return s;
}

std::string lower(std::string s) {
    for (auto& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

std::string py_repr(const std::string& s) {
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string o(1, q);
    for (unsigned char c : s) {
        if (c == '\\') o += "\\\\";
        else if (c == static_cast<unsigned char>(q)) { o += '\\'; o += static_cast<char>(c); }
        else if (c == '\n') o += "\\n";
        else if (c == '\t') o += "\\t";
        else if (c == '\r') o += "\\r";
        else if (c < 32 || c == 127) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            o += b;
        } else o += static_cast<char>(c);  // UTF-8 passes through as Python prints it
    }
    o += q;
    return o;
}

std::string py_bytes_repr(const unsigned char* p, std::size_t n) {
    const bool dq = std::memchr(p, '\'', n) != nullptr && std::memchr(p, '"', n) == nullptr;
    const char q = dq ? '"' : '\'';
    std::string o = std::string("b") + q;
    for (std::size_t i = 0; i < n; ++i) {
        unsigned char c = p[i];
        if (c == '\\' || c == static_cast<unsigned char>(q)) { o += '\\'; o += static_cast<char>(c); }
        else if (c == '\t') o += "\\t";
        else if (c == '\n') o += "\\n";
        else if (c == '\r') o += "\\r";
        else if (c >= 32 && c < 127) o += static_cast<char>(c);
        else {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            o += b;
        }
    }
    return o + q;
}

std::string with_commas(u64 v) {
    std::string s = std::to_string(v);
    for (std::size_t k = s.size(); k > 3; k -= 3) s.insert(k - 3, ",");
    return s;
}

namespace {
/// The UTF-8 sequence at p[i], as CPython's decoder sees it: `ok` its length when well-formed;
/// otherwise `bad` the length of its ill-formed part (its maximal well-formed start, at least one
/// byte: what one U+FFFD replaces) and `why` in CPython's words
struct Utf8Seq {
    std::size_t ok, bad;
    const char* why;
};

Utf8Seq utf8_seq(const unsigned char* p, std::size_t i, std::size_t n) {
    const unsigned char c = p[i];
    if (c < 0x80) return {1, 0, nullptr};
    std::size_t k;  // continuation bytes; the first one's range is narrower after E0, ED, F0, F4
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) k = 1;
    else if (c >= 0xE0 && c <= 0xEF) k = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) k = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return {0, 1, "invalid start byte"};
    std::size_t j = 1;
    for (; j <= k && i + j < n; ++j) {
        const unsigned char b = p[i + j];
        if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) break;
    }
    if (j > k) return {k + 1, 0, nullptr};
    return {0, j, i + j == n ? "unexpected end of data" : "invalid continuation byte"};
}
}  // namespace

bool valid_utf8(const char* s, std::size_t n) {
    const auto* p = reinterpret_cast<const unsigned char*>(s);
    for (std::size_t i = 0; i < n;) {
        const Utf8Seq q = utf8_seq(p, i, n);
        if (q.ok == 0) return false;
        i += q.ok;
    }
    return true;
}

std::string utf8_error(const char* s, std::size_t n) {
    const auto* p = reinterpret_cast<const unsigned char*>(s);
    for (std::size_t i = 0; i < n;) {
        const Utf8Seq q = utf8_seq(p, i, n);
        if (q.ok != 0) {
            i += q.ok;
            continue;
        }
        char b[96];
        if (q.bad == 1)
            std::snprintf(b, sizeof b, "'utf-8' codec can't decode byte 0x%02x in position %zu: ", p[i], i);
        else
            std::snprintf(b, sizeof b, "'utf-8' codec can't decode bytes in position %zu-%zu: ", i, i + q.bad - 1);
        return b + std::string(q.why);
    }
    return "";
}

std::string utf8_replace(const char* s, std::size_t n) {
    static const char FFFD[] = "\xEF\xBF\xBD";
    const auto* p = reinterpret_cast<const unsigned char*>(s);
    std::string out;
    out.reserve(n);
    for (std::size_t i = 0; i < n;) {
        const Utf8Seq q = utf8_seq(p, i, n);
        if (q.ok != 0) out.append(s + i, q.ok), i += q.ok;
        else out += FFFD, i += q.bad;
    }
    return out;
}

std::size_t utf8_len(const char* s, std::size_t n) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++k;
    return k;
}

// ================================================================================ files
Mapped::Mapped(const std::string& path, const std::string& what) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw UsageError(path + ": cannot open " + what + ": " + std::strerror(errno));
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw UsageError(path + ": " + what + " is not a regular file");
    }
    size_ = static_cast<u64>(st.st_size);
    if (size_ > 0) {
        void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            throw UsageError(path + ": cannot map " + what + ": " + std::strerror(e));
        }
        data_ = static_cast<const unsigned char*>(m);
    }
    ::close(fd);
}

Mapped::~Mapped() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

std::string blake3_raw(const unsigned char* p, std::size_t n) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    // (blake3_hasher_update takes any length; pieces keep the mapped pages' use streaming)
    const std::size_t piece = std::size_t(1) << 24;
    for (std::size_t i = 0; i < n; i += piece) blake3_hasher_update(&h, p + i, std::min(piece, n - i));
    unsigned char out[BLAKE3_OUT_LEN];
    blake3_hasher_finalize(&h, out, BLAKE3_OUT_LEN);
    return std::string(reinterpret_cast<char*>(out), BLAKE3_OUT_LEN);
}

std::pair<std::string, u64> digest_file(const std::string& path, const char* algorithm) {
    const EVP_MD* md = EVP_get_digestbyname(algorithm);
    if (md == nullptr) throw Error(std::string(algorithm) + ": no such digest in OpenSSL");
    Mapped m(path, "AEROSET part");
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, md, nullptr) != 1) {
        EVP_MD_CTX_free(ctx);
        throw Error(std::string(algorithm) + ": OpenSSL digest unavailable");
    }
    const std::size_t piece = std::size_t(1) << 24;
    for (u64 i = 0; i < m.size(); i += piece)
        EVP_DigestUpdate(ctx, m.data() + i, static_cast<std::size_t>(std::min<u64>(piece, m.size() - i)));
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx, out, &n);
    EVP_MD_CTX_free(ctx);
    return {hex(out, n), m.size()};
}

// ================================================================================ documents
bool Doc::is_str(std::uint32_t i, const char* s) const {
    const Node& n = nodes[i];
    return n.type == Node::Str && n.len == std::strlen(s) && std::memcmp(buf.data() + n.v, s, n.len) == 0;
}

std::optional<std::uint32_t> Doc::get(std::uint32_t i, const char* key) const {
    const Node& m = nodes[i];
    if (m.type != Node::Map) return std::nullopt;
    std::optional<std::uint32_t> found;
    std::uint32_t c = i + 1;
    for (std::uint32_t k = 0; k < m.len; ++k) {
        std::uint32_t val = nodes[c].next;
        if (is_str(c, key)) found = val;
        c = nodes[val].next;
    }
    return found;
}

std::vector<std::uint32_t> Doc::children(std::uint32_t i) const {
    std::vector<std::uint32_t> out;
    const Node& m = nodes[i];
    const u64 count = m.type == Node::Map ? 2 * u64(m.len) : (m.type == Node::Array ? m.len : 0);
    std::uint32_t c = i + 1;
    for (u64 k = 0; k < count; ++k) {
        out.push_back(c);
        c = nodes[c].next;
    }
    return out;
}

std::string Doc::int_text(std::uint32_t i) const {
    const Node& n = nodes[i];
    return n.neg ? std::to_string(static_cast<std::int64_t>(n.v)) : std::to_string(n.v);
}

u64 object_budget(u64 stored, u64 per_byte) {
    auto p = mul(per_byte, stored);
    auto s = p ? add(gen::DECODE_OBJECTS_ALLOWANCE, *p) : std::nullopt;
    return s.value_or(UINT64_MAX);
}

static Finding over_budget(const DecodeContext& cx, const char* what, u64 budget) {
    return finding(gen::ErrorKind::LimitError, cx.fmt, cx.offset, cx.path, cx.limit_rule.empty() ? cx.rule : cx.limit_rule,
                   std::string(what) + " decodes to more than " + with_commas(budget) +
                       " objects, the budget for the " + with_commas(cx.stored) +
                       " bytes that store it (refused before building them)");
}

static Finding decode_error(const DecodeContext& cx, const std::string& msg) {
    return finding(gen::ErrorKind::DecodeError, cx.fmt, cx.offset, cx.path, cx.rule, msg);
}

/// a document nesting deeper than gen::MAX_NESTING (codec.engine.nesting): a limit, as in Python
static Finding too_deep(const DecodeContext& cx, const char* what, const std::string& depth) {
    return finding(gen::ErrorKind::LimitError, cx.fmt, cx.offset, cx.path, cx.limit_rule.empty() ? cx.rule : cx.limit_rule,
                   std::string(what) + " nests " + depth + " deep, deeper than MAX_NESTING (" +
                       std::to_string(gen::MAX_NESTING) + ") (refused before walking it)");
}

namespace {
/// msgpack visitor building a Doc: every object counted against the budget as it starts, no
/// container sized from its header (a count is only a claim), nesting bounded like msgpack's
/// own stack (gen::MSGPACK_MAX_DEPTH containers; more when the caller allows: DecodeContext).
struct Builder {
    Doc& d;
    const char* base;
    const DecodeContext& cx;
    u64 budget, cap, count = 0;
    bool cap_is_budget;
    std::vector<std::uint32_t> open;
    std::size_t deepest = 0;

    void add(Node n) {
        if (++count > budget) raise(over_budget(cx, "msgpack payload", budget));
        n.next = static_cast<std::uint32_t>(d.nodes.size() + 1);
        d.nodes.push_back(n);
    }
    void start(Node::Type t, std::uint32_t n) {
        if (n > cap) {
            if (cap_is_budget) raise(over_budget(cx, "msgpack payload", budget));
            raise(decode_error(cx, std::string("invalid msgpack: ValueError: ") + std::to_string(n) + " exceeds max_" +
                                       (t == Node::Map ? "map" : "array") + "_len(" + std::to_string(cap) + ")"));
        }
        // (msgpack's own stack in Python, counted from the object unpacked: deeper is refused while
        // decoding, as nesting over MAX_NESTING once decoded)
        if (open.size() >= gen::MSGPACK_MAX_DEPTH + cx.depth_allowance)
            raise(too_deep(cx, "msgpack payload", "over " + std::to_string(gen::MAX_NESTING)));
        Node x;
        x.type = t;
        x.len = n;
        add(x);
        open.push_back(static_cast<std::uint32_t>(d.nodes.size() - 1));
        deepest = std::max<std::size_t>(deepest, open.size());
    }
    void end() {
        d.nodes[open.back()].next = static_cast<std::uint32_t>(d.nodes.size());
        open.pop_back();
    }
    bool visit_nil() { add(Node{}); return true; }
    bool visit_boolean(bool v) { Node n; n.type = Node::Bool; n.v = v; add(n); return true; }
    bool visit_positive_integer(uint64_t v) { Node n; n.type = Node::Int; n.v = v; add(n); return true; }
    bool visit_negative_integer(int64_t v) {
        Node n;
        n.type = Node::Int;
        n.neg = v < 0;
        n.v = static_cast<u64>(v);
        add(n);
        return true;
    }
    bool visit_float32(float v) { return visit_float64(static_cast<double>(v)); }
    bool visit_float64(double v) { Node n; n.type = Node::Float; std::memcpy(&n.v, &v, 8); add(n); return true; }
    bool visit_str(const char* v, uint32_t size) {
        const std::string not_utf8 = utf8_error(v, size);
        if (!not_utf8.empty()) raise(decode_error(cx, "invalid msgpack: UnicodeDecodeError: " + not_utf8));
        Node n; n.type = Node::Str; n.len = size; n.v = static_cast<u64>(v - base); add(n); return true;
    }
    bool visit_bin(const char* v, uint32_t size) {
        Node n; n.type = Node::Bin; n.len = size; n.v = static_cast<u64>(v - base); add(n); return true;
    }
    bool visit_ext(const char* v, uint32_t size) {
        Node n; n.type = Node::Ext; n.len = size; n.v = static_cast<u64>(v - base); add(n); return true;
    }
    bool start_array(uint32_t n) { start(Node::Array, n); return true; }
    bool start_array_item() { return true; }
    bool end_array_item() { return true; }
    bool end_array() { end(); return true; }
    bool start_map(uint32_t n) { start(Node::Map, n); return true; }
    bool start_map_key() { return true; }
    bool end_map_key() {
        // a key Python cannot hash (a list or a map) cannot be a dict key
        const Node& k = d.nodes.back();
        (void)k;
        return true;
    }
    bool start_map_value() { return true; }
    bool end_map_value() { return true; }
    bool end_map() { end(); return true; }
    void parse_error(size_t, size_t e) {
        raise(decode_error(cx, "invalid msgpack: ValueError: bad data at byte " + std::to_string(e)));
    }
    void insufficient_bytes(size_t, size_t) {
        raise(decode_error(cx, "invalid msgpack: ValueError: Unpack failed: incomplete input"));
    }
    bool referenced() const { return false; }
    void set_referenced(bool) {}
};

/// map keys Python could not put in a dict (lists, maps) make the document undecodable
bool keys_hashable(const Doc& d) {
    for (std::uint32_t i = 0; i < d.nodes.size(); ++i) {
        if (d.nodes[i].type != Node::Map) continue;
        std::uint32_t c = i + 1;
        for (std::uint32_t k = 0; k < d.nodes[i].len; ++k) {
            const Node& key = d.nodes[c];
            if (key.type == Node::Array || key.type == Node::Map) return false;
            c = d.nodes[key.next].next;
        }
    }
    return true;
}
}  // namespace

std::size_t msgpack_depth(const Doc& d, std::uint32_t i) {
    std::vector<std::uint32_t> ends;  // where each open container's subtree ends
    std::size_t best = 0;
    for (std::uint32_t k = i; k < d.nodes[i].next && k < d.nodes.size(); ++k) {
        while (!ends.empty() && k >= ends.back()) ends.pop_back();
        const Node& n = d.nodes[k];
        if (n.type == Node::Array || n.type == Node::Map) {
            ends.push_back(n.next);
            best = std::max(best, ends.size());
        }
    }
    return best;
}

Doc unpack_msgpack(std::vector<unsigned char> data, const DecodeContext& cx, bool allow_trailing_zeros) {
    Doc d;
    d.buf = std::move(data);
    const u64 n = d.buf.size();
    const u64 budget = object_budget(cx.stored, cx.per_byte);
    Builder b{d, reinterpret_cast<const char*>(d.buf.data()), cx, budget, std::max<u64>(std::min(n, budget), 1),
              0, budget < n, {}};
    static const char empty[1] = {0};
    const char* p = n ? reinterpret_cast<const char*>(d.buf.data()) : empty;
    std::size_t off = 0;
    bool ok;
    try {
        ok = msgpack::v2::parse(p, static_cast<std::size_t>(n), off, b);
    } catch (const Raised&) {
        throw;
    } catch (const std::exception& e) {  // msgpack's own size errors
        raise(decode_error(cx, std::string("invalid msgpack: ") + e.what()));
    }
    if (!ok || d.nodes.empty() || !b.open.empty()) raise(decode_error(cx, "invalid msgpack: ValueError: Unpack failed"));
    if (off < n) {
        bool zeros = allow_trailing_zeros &&
                     std::all_of(d.buf.begin() + static_cast<std::ptrdiff_t>(off), d.buf.end(), [](unsigned char c) { return c == 0; });
        if (!zeros)
            raise(decode_error(cx, "invalid msgpack: ValueError: " + std::to_string(n - off) +
                                       " trailing bytes after the msgpack object" +
                                       (allow_trailing_zeros ? " are not zero" : "")));
    }
    if (!keys_hashable(d)) raise(decode_error(cx, "invalid msgpack: TypeError: unhashable type as a map key"));
    if (b.deepest > gen::MAX_NESTING) raise(too_deep(cx, "msgpack payload", std::to_string(b.deepest)));
    return d;
}

namespace {
/// nlohmann's SAX events straight into a Doc: no DOM (whose objects would cost a map each), keys
/// kept in document order, repeated keys resolved like a Python dict (the last value counts)
struct JsonSax {
    Doc& d;
    const DecodeContext& cx;
    std::vector<std::uint32_t> open;
    std::vector<std::uint32_t> counts;
    const std::vector<bool>& lone;  // py_json_check's flag of each string, in document order
    std::size_t strings = 0;

    void leaf(Node n) {
        n.next = static_cast<std::uint32_t>(d.nodes.size() + 1);
        d.nodes.push_back(n);
    }
    void item() {
        if (!counts.empty() && d.nodes[open.back()].type == Node::Array) ++counts.back();
    }
    Node text(const std::string& s) {
        Node n;
        n.type = Node::Str;
        n.lone = strings < lone.size() && lone[strings];
        ++strings;
        n.v = d.buf.size();
        n.len = static_cast<std::uint32_t>(s.size());
        d.buf.insert(d.buf.end(), s.begin(), s.end());
        return n;
    }
    bool null() { item(); leaf(Node{}); return true; }
    bool boolean(bool v) { item(); Node n; n.type = Node::Bool; n.v = v; leaf(n); return true; }
    bool number_integer(std::int64_t v) {
        item(); Node n; n.type = Node::Int; n.neg = v < 0; n.v = static_cast<u64>(v); leaf(n); return true;
    }
    bool number_unsigned(std::uint64_t v) { item(); Node n; n.type = Node::Int; n.v = v; leaf(n); return true; }
    bool number_float(double v, const std::string& literal) {
        item();
        Node n;
        if (literal.find_first_of(".eE") == std::string::npos) {  // an integer literal past 64 bits: a Python int
            n.type = Node::Int;
            n.huge = true;
            n.neg = !literal.empty() && literal[0] == '-';
        } else {
            n.type = Node::Float;
            std::memcpy(&n.v, &v, 8);
        }
        leaf(n);
        return true;
    }
    bool string(std::string& s) { item(); leaf(text(s)); return true; }
    bool binary(std::vector<std::uint8_t>&) { item(); Node n; n.type = Node::Bin; leaf(n); return true; }
    bool start(Node::Type t) {
        item();
        Node n;
        n.type = t;
        d.nodes.push_back(n);
        open.push_back(static_cast<std::uint32_t>(d.nodes.size() - 1));
        counts.push_back(0);
        return true;
    }
    bool end() {
        Node& n = d.nodes[open.back()];
        n.len = counts.back();
        n.next = static_cast<std::uint32_t>(d.nodes.size());
        open.pop_back();
        counts.pop_back();
        return true;
    }
    bool start_object(std::size_t) { return start(Node::Map); }
    bool key(std::string& k) { ++counts.back(); leaf(text(k)); return true; }
    bool end_object() { return end(); }
    bool start_array(std::size_t) { return start(Node::Array); }
    bool end_array() { return end(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
        raise(decode_error(cx, std::string("invalid JSON: ") + e.what()));
    }
};
}  // namespace

Doc loads_json(const unsigned char* data, std::size_t n, const DecodeContext& cx) {
    const u64 budget = object_budget(cx.stored, gen::DECODE_OBJECTS_PER_BYTE);
    if (n > budget) {
        u64 k = 1;
        for (std::size_t i = 0; i < n; ++i)
            if (data[i] == ',' || data[i] == ':' || data[i] == '[' || data[i] == '{') ++k;
        if (k > budget) raise(over_budget(cx, "JSON document", budget));
    }
    {  // nesting at most MAX_NESTING deep, measured on the bytes before decoding (as Python does)
        long long depth = 0, deepest = 0;
        bool in_str = false;
        for (std::size_t i = 0; i < n; ++i) {
            const unsigned char c = data[i];
            if (in_str) {
                if (c == '\\') ++i;
                else if (c == '"') in_str = false;
            } else if (c == '"') in_str = true;
            else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
            else if (c == ']' || c == '}') --depth;  // (a close before its open: Python's count goes below 0 too)
        }
        if (deepest > static_cast<long long>(gen::MAX_NESTING))
            raise(too_deep(cx, "JSON document", std::to_string(deepest)));
    }
    const std::string not_utf8 = utf8_error(reinterpret_cast<const char*>(data), n);
    if (!not_utf8.empty()) raise(decode_error(cx, "invalid JSON: " + not_utf8));
    std::string text(reinterpret_cast<const char*>(data), n);
    // Python's grammar, depth and integer limits first: what it refuses is refused here
    std::vector<bool> lone;
    unsigned first_lone = 0;
    const std::string py_error = py_json_check(text, lone, gen::JSON_MAX_DEPTH, gen::JSON_MAX_INT_DIGITS, &first_lone);
    if (!py_error.empty()) raise(decode_error(cx, "invalid JSON: " + py_error));
    if (first_lone != 0 && !cx.lone_ok) {  // (Python: payload.loads_json's text check, the same words)
        char code[8];
        std::snprintf(code, sizeof code, "%04X", first_lone);
        raise(decode_error(cx, std::string("invalid JSON text: a string is not valid Unicode text (a lone surrogate U+") +
                                   code + ")"));
    }
    // Python's json takes a lone surrogate escape ("\ud800") as a str holding it; nlohmann refuses
    // it: such escapes stand for U+FFFD in the text nlohmann reads, and the string's node says
    // `lone` (no file can be named by it, for one)
    auto hex4 = [&](std::size_t at, unsigned& v) {
        if (at + 4 > text.size()) return false;
        v = 0;
        for (std::size_t k = at; k < at + 4; ++k) {
            const char c = text[k];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) return false;
            v = v * 16 + static_cast<unsigned>(d);
        }
        return true;
    };
    // a raw NUL is never JSON (Python refuses it; nlohmann would stop reading there)
    if (text.find('\0') != std::string::npos) raise(decode_error(cx, "invalid JSON: a NUL byte"));
    bool in_str = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (!in_str) {
            in_str = text[i] == '"';
            // NaN and Infinity are floats to Python's json, errors to nlohmann: keep them floats
            if (text.compare(i, 3, "NaN") == 0) {
                text.replace(i, 3, "0.0");
                i += 2;
                continue;
            }
            if (text.compare(i, 8, "Infinity") == 0) {
                text.replace(i, 8, "1e308");
                i += 4;
                continue;
            }
            // a float literal past the double range is inf to Python, an error to nlohmann: keep it a float
            if (!in_str && (text[i] == '-' || (text[i] >= '0' && text[i] <= '9')) && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
                std::size_t j = i;
                while (j < text.size() && std::strchr("+-0123456789.eE", text[j]) != nullptr && text[j] != '\0') ++j;
                const std::string tok = text.substr(i, j - i);
                if (tok.find_first_of(".eE") == std::string::npos && tok.size() > 300) {
                    // an integer past the double range is a Python int, an overflow to nlohmann:
                    // keep it an integer past 64 bits (its value is not used: huge)
                    const std::string big = std::string(tok[0] == '-' ? "-1" : "1") + std::string(30, '0');
                    text.replace(i, j - i, big);
                    j = i + big.size();
                } else if (tok.find_first_of("eE") != std::string::npos) {
                    errno = 0;
                    const double x = std::strtod(tok.c_str(), nullptr);
                    if (errno == ERANGE && std::isinf(x)) {
                        const std::string finite = tok[0] == '-' ? "-1e308" : "1e308";
                        text.replace(i, j - i, finite);
                        j = i + finite.size();
                    }
                }
                i = j - 1;
            }
            continue;
        }
        if (text[i] == '"') { in_str = false; continue; }
        if (text[i] != '\\' || i + 1 >= text.size()) continue;
        if (text[i + 1] != 'u') { ++i; continue; }
        unsigned v = 0, w = 0;
        if (!hex4(i + 2, v)) { ++i; continue; }
        if (v >= 0xD800 && v <= 0xDBFF && i + 11 < text.size() && text[i + 6] == '\\' && text[i + 7] == 'u' &&
            hex4(i + 8, w) && w >= 0xDC00 && w <= 0xDFFF) {
            i += 11;  // a valid pair
            continue;
        }
        if (v >= 0xD800 && v <= 0xDFFF) text.replace(i + 2, 4, "fffd");
        i += 5;
    }
    Doc d;
    JsonSax sax{d, cx, {}, {}, lone};
    try {
        if (!nlohmann::json::sax_parse(text, &sax) || d.nodes.empty())
            raise(decode_error(cx, "invalid JSON: no document"));
    } catch (const Raised&) {
        throw;
    } catch (const std::exception& e) {
        raise(decode_error(cx, std::string("invalid JSON: ") + e.what()));
    }
    d.json_text = std::move(text);
    return d;
}

// ================================================================================ declarations
u64 field_u64(const gen::FieldSpec& f, const unsigned char* p) { return gen::detail_load_le(p + f.offset, f.size); }

const gen::FieldSpec* field_of(const gen::RecordSpec& rec, const std::string& name) {
    for (std::size_t i = 0; i < rec.nfields; ++i)
        if (name == rec.fields[i].name) return &rec.fields[i];
    return nullptr;
}

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

// ================================================================================ payloads
static const char* type_name(const Node& n) {
    switch (n.type) {
        case Node::Nil: return "NoneType";
        case Node::Bool: return "bool";
        case Node::Int: return "int";
        case Node::Float: return "float";
        case Node::Str: return "str";
        case Node::Bin: return "bytes";
        case Node::Array: return "list";
        case Node::Map: return "dict";
        default: return "ExtType";
    }
}

void check_payload(const gen::PNode* nodes, int node, const Doc& d, std::uint32_t i, const std::string& fmt,
                   std::optional<u64> offset, const std::string& path, const std::string& rule_in,
                   std::vector<Finding>& out, std::size_t limit) {
    if (out.size() >= limit) return;
    const gen::PNode& decl = nodes[node];
    const Node& v = d.nodes[i];
    auto type_error = [&](const std::string& rule, const char* want) {
        out.push_back(finding(gen::ErrorKind::SchemaError, fmt, offset, path, rule,
                              std::string("must be ") + want + " (got " + type_name(v) + ")"));
    };
    const std::string own = decl.rule ? decl.rule : "";
    switch (decl.kind) {
        case gen::PKind::Map: {
            const std::string rule = own.empty() ? rule_in : own;
            if (v.type != Node::Map) return type_error(rule, "a map");
            for (std::size_t k = 0; k < decl.nkeys; ++k) {
                const gen::PKey& key = decl.keys[k];
                auto sub = d.get(i, key.name);
                if (!sub) {
                    if (key.required)
                        out.push_back(finding(gen::ErrorKind::SchemaError, fmt, offset, path + "." + key.name, rule,
                                              "required key is missing"));
                    continue;
                }
                check_payload(nodes, key.node, d, *sub, fmt, offset, path + "." + key.name, rule, out, limit);
            }
            return;
        }
        case gen::PKind::List: {
            const std::string r = own.empty() ? rule_in : own;
            if (v.type != Node::Array) return type_error(r, "a list");
            if (v.len < decl.min_len || (decl.has_max && v.len > decl.max_len)) {
                out.push_back(finding(gen::ErrorKind::LimitError, fmt, offset, path, r,
                                      "must have " + std::to_string(decl.min_len) + ".." +
                                          (decl.has_max ? std::to_string(decl.max_len) : std::string("any")) +
                                          " items (got " + std::to_string(v.len) + ")"));
                return;
            }
            std::uint32_t c = i + 1;
            for (std::uint32_t k = 0; k < v.len; ++k) {
                check_payload(nodes, decl.item, d, c, fmt, offset, path + "[" + std::to_string(k) + "]", rule_in, out,
                              limit);
                if (out.size() >= limit) return;
                c = d.nodes[c].next;
            }
            return;
        }
        case gen::PKind::Int: {
            if (v.type != Node::Int) return type_error(rule_in, "an integer");
            for (std::size_t k = 0; k < decl.nconstraints; ++k)
                if (!holds(decl.constraints[k], v.neg, v.v, v.huge))
                    out.push_back(violation(fmt, decl.constraints[k], v.huge ? "an integer beyond 64 bits" : d.int_text(i),
                                            offset, path));
            return;
        }
        case gen::PKind::Str: {
            const std::string r = own.empty() ? rule_in : own;
            if (v.type != Node::Str) return type_error(r, "a string");
            const char* s = reinterpret_cast<const char*>(d.buf.data()) + v.v;
            const std::size_t n = utf8_len(s, v.len);
            if (n < decl.min_len || (decl.has_max && n > decl.max_len)) {
                out.push_back(finding(gen::ErrorKind::RangeError, fmt, offset, path, r,
                                      "length must be " + std::to_string(decl.min_len) + ".." +
                                          (decl.has_max ? std::to_string(decl.max_len) : std::string("None")) +
                                          " (got " + std::to_string(n) + ")"));
            } else if (decl.charset != nullptr) {
                const std::string cs = decl.charset;  // (ASCII charsets: a non-ASCII byte is outside)
                for (std::uint32_t k = 0; k < v.len; ++k) {
                    if (cs.find(s[k]) == std::string::npos) {
                        out.push_back(finding(gen::ErrorKind::ConstraintError, fmt, offset, path, r,
                                              std::string("must be ") + (decl.pattern_doc ? decl.pattern_doc : "") +
                                                  " (got " + py_repr(std::string(s, std::min<std::size_t>(v.len, 70))) +
                                                  ")"));
                        break;
                    }
                }
            } else if (decl.pattern != nullptr) {
                if (std::string(s, v.len) != decl.pattern)  // (cgen generates literal patterns only)
                    out.push_back(finding(gen::ErrorKind::ConstraintError, fmt, offset, path, r,
                                          std::string("must be ") +
                                              (decl.pattern_doc ? decl.pattern_doc : py_repr(decl.pattern).c_str()) +
                                              " (got " + py_repr(std::string(s, std::min<std::size_t>(v.len, 70))) +
                                              ")"));
            }
            return;
        }
        case gen::PKind::Bin: {
            const std::string r = own.empty() ? rule_in : own;
            if (v.type != Node::Bin) return type_error(r, "bytes");
            if (decl.has_length && v.len != decl.length)
                out.push_back(finding(gen::ErrorKind::RangeError, fmt, offset, path, r,
                                      "must be " + std::to_string(decl.length) + " bytes (got " +
                                          std::to_string(v.len) + ")"));
            return;
        }
        case gen::PKind::Bool:
            if (v.type != Node::Bool) type_error(rule_in, "a bool");
            return;
        case gen::PKind::Any:
            if (decl.map_only && v.type != Node::Map) type_error(rule_in, "a map");
            return;
    }
}

// ================================================================================ relations
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

namespace {
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

    void region(const gen::Relation& r) {
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
    std::vector<u64> region_lo(const gen::Relation& r, const std::vector<u64>& off, const std::vector<u64>& ln,
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

    /// Present: some row is of the kind `when` names
    void present(const gen::Relation& r) {
        for (u64 i = 0; i < cx.table.n; ++i)
            if (when(r.when, i)) return;
        const std::optional<u64> where = r.at.kind == gen::TermKind::None ? std::nullopt : std::optional<u64>(scalar(r.at));
        out.errors.push_back(finding(gen::ErrorKind::StructureError, cx.fmt, where, cx.table.path, r.rule,
                                     r.what ? std::string("no ") + r.what
                                            : "no row has " + std::string(r.a.name) + " " + r.when.values[0]));
    }

    /// Known (warnings): every row whose value is not among the known ones (`when`), uncapped
    void known(const gen::Relation& r) {
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
    void text(const gen::Relation& r) {
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

    /// Zeros: the bytes of [lo, hi) that no row's [offset, offset + length) covers are zero (every
    /// row counts, readable or not); one finding per gap, at its first non-zero byte
    void zeros(const gen::Relation& r) {
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
    bool ordered(const gen::Relation& r) {
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

    void row_rule(const gen::Relation& r) {
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

    void disjoint(const gen::Relation& r) {
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

    void unique(const gen::Relation& r) {
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

    void nbytes(const gen::Relation& r) {
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

    void refers_to(const gen::Relation& r) {
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
};
}  // namespace

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

std::string blake3_hex(const void* data, std::size_t size) {
    const std::string raw = detail::blake3_raw(static_cast<const unsigned char*>(data), size);
    return detail::hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

}  // namespace aero
