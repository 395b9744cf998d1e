// Payloads (codec/engine/payload.py): msgpack and JSON documents decoded within a budget of objects and
// nesting, as Python's decoders read them, and checked against the payload declarations
// (PAYLOAD_NODES of <aero/generated.hpp>).
#include "internal.hpp"

#include <nlohmann/json.hpp>

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST 1
#endif
#include <msgpack.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace aero {
namespace detail {

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

}  // namespace detail
}  // namespace aero
