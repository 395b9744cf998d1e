// The generic engine's ground floor: errors and findings, text as Python shows it, files and
// hashes -- each a port of the Python engine's behaviour (codec/errors.py, codec/model.py).  The
// rest of the engine, like the Python engine's modules: engine_records.cpp (a record's and a
// table's declared constraints), engine_payload.cpp (bounded msgpack/JSON decoding, payload
// declarations), engine_relations.cpp with relations.hpp, engine_layout.cpp and
// engine_rows.cpp (the relations between fields); all driven by the tables of <aero/generated.hpp>.
#include "internal.hpp"

#include <blake3.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
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

std::optional<Finding> odd_bool(const unsigned char* p, u64 n, u64 offset, const std::string& fmt, const std::string& path,
                                const std::string& rule, const std::string& prefix, const char* const* warnings,
                                std::size_t nwarnings) {
    const unsigned char* odd = std::find_if(p, p + n, [](unsigned char b) { return b > 1; });
    if (odd == p + n) return std::nullopt;
    const u64 k = static_cast<u64>(odd - p);
    Finding f = finding(gen::ErrorKind::ConstraintError, fmt, offset + k, path, rule,
                        prefix + "bool element " + std::to_string(k) + " is the byte " + std::to_string(*odd) +
                            " (not 0 or 1): it reads as True, but formats that require 0 or 1 refuse it");
    if (std::any_of(warnings, warnings + nwarnings, [&](const char* w) { return rule == w; })) f.severity = "warning";
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
    try {
        map(fd, what);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

Mapped::Mapped(int fd, const std::string& path, const std::string& what) : path_(path) { map(fd, what); }

void Mapped::map(int fd, const std::string& what) {
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw UsageError(path_ + ": " + what + " is not a regular file");
    size_ = static_cast<u64>(st.st_size);
    if (size_ > 0) {
        void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) throw UsageError(path_ + ": cannot map " + what + ": " + std::strerror(errno));
        data_ = static_cast<const unsigned char*>(m);
    }
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

std::pair<std::string, u64> digest_file(const std::string& path, const char* algorithm, int fd) {
    const EVP_MD* md = EVP_get_digestbyname(algorithm);
    if (md == nullptr) throw Error(std::string(algorithm) + ": no such digest in OpenSSL");
    const Mapped m = fd < 0 ? Mapped(path, "AEROSET part") : Mapped(fd, path, "AEROSET part");
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

}  // namespace detail

std::string blake3_hex(const void* data, std::size_t size) {
    const std::string raw = detail::blake3_raw(static_cast<const unsigned char*>(data), size);
    return detail::hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

}  // namespace aero
