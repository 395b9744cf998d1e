// The JSON grammar of the Python reader (json.loads of the UTF-8-decoded text, strict), checked
// before nlohmann reads the text: everything Python refuses is refused here with Python's words,
// so both readers accept exactly the same documents.  nlohmann alone is both more lenient (a
// UTF-8 BOM) and stricter (NaN, Infinity, lone surrogate escapes, integers past the double
// range); loads_json rewrites what Python accepts and nlohmann does not, after this check.
#include "internal.hpp"

#include <string>
#include <vector>

namespace aero {
namespace detail {

namespace {
struct Scan {
    const std::string& s;
    std::vector<bool>& lone;
    std::size_t max_depth, max_int_digits;
    std::size_t i = 0;
    std::string error;
    unsigned first_lone = 0;

    /// Python's position words: "line L column C (char N)", N counting code points
    std::string at(std::size_t pos) const {
        std::size_t line = 1, col = 1, ch = 0;
        for (std::size_t k = 0; k < pos && k < s.size(); ++k) {
            const unsigned char c = static_cast<unsigned char>(s[k]);
            if ((c & 0xC0) == 0x80) continue;
            ++ch;
            if (c == '\n') { ++line; col = 1; } else ++col;
        }
        return "line " + std::to_string(line) + " column " + std::to_string(col) + " (char " + std::to_string(ch) + ")";
    }
    bool fail(const std::string& what, std::size_t pos) {
        if (error.empty()) error = what + ": " + at(pos);
        return false;
    }
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
    }
    bool lit(const char* w) {
        const std::size_t n = std::char_traits<char>::length(w);
        if (s.compare(i, n, w) != 0) return false;
        i += n;
        return true;
    }
    static int hex(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    }
    bool hex4(std::size_t at_, unsigned& v) const {
        if (at_ + 4 > s.size()) return false;
        v = 0;
        for (std::size_t k = at_; k < at_ + 4; ++k) {
            const int d = hex(s[k]);
            if (d < 0) return false;
            v = v * 16 + static_cast<unsigned>(d);
        }
        return true;
    }
    /// a string from the opening quote at i (json.scanner.py_scanstring, strict)
    bool string() {
        const std::size_t begin = i++;
        bool has_lone = false;
        for (;;) {
            if (i >= s.size()) return fail("Unterminated string starting at", begin);
            const unsigned char c = static_cast<unsigned char>(s[i]);
            if (c == '"') { ++i; break; }
            if (c < 0x20) return fail("Invalid control character at", i);
            if (c != '\\') { ++i; continue; }
            if (i + 1 >= s.size()) return fail("Unterminated string starting at", begin);
            const char e = s[i + 1];
            if (e != 'u') {
                if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
                    return fail("Invalid \\escape", i);
                i += 2;
                continue;
            }
            unsigned v = 0, w = 0;
            if (!hex4(i + 2, v)) return fail("Invalid \\uXXXX escape", i + 1);
            i += 6;
            if (v >= 0xD800 && v <= 0xDBFF && s.compare(i, 2, "\\u") == 0 && hex4(i + 2, w) && w >= 0xDC00 && w <= 0xDFFF)
                i += 6;  // a pair
            else if (v >= 0xD800 && v <= 0xDFFF) {
                has_lone = true;
                if (first_lone == 0) first_lone = v;
            }
        }
        lone.push_back(has_lone);
        return true;
    }
    /// an object member's key and its ':' at i (whitespace after it skipped)
    bool member_key() {
        if (i >= s.size() || s[i] != '"') return fail("Expecting property name enclosed in double quotes", i);
        if (!string()) return false;
        ws();
        if (i >= s.size() || s[i] != ':') return fail("Expecting ':' delimiter", i);
        ++i;
        ws();
        return true;
    }
    /// a number at i (json.scanner NUMBER_RE: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?); false: none here
    bool number(bool& matched) {
        std::size_t k = i;
        if (k < s.size() && s[k] == '-') ++k;
        const std::size_t digits_at = k;
        if (k < s.size() && s[k] == '0') ++k;
        else if (k < s.size() && s[k] >= '1' && s[k] <= '9')
            while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
        else { matched = false; return true; }
        const std::size_t int_end = k;
        bool is_float = false;
        if (k + 1 < s.size() && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
            k += 2;
            while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
            is_float = true;
        }
        if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
            std::size_t e = k + 1;
            if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
            if (e < s.size() && s[e] >= '0' && s[e] <= '9') {
                while (e < s.size() && s[e] >= '0' && s[e] <= '9') ++e;
                k = e;
                is_float = true;
            }
        }
        matched = true;
        i = k;
        if (!is_float && int_end - digits_at > max_int_digits) {
            error = "Exceeds the limit (" + std::to_string(max_int_digits) +
                    " digits) for integer string conversion: value has " + std::to_string(int_end - digits_at) +
                    " digits; use sys.set_int_max_str_digits() to increase the limit";
            return false;
        }
        return true;
    }
    /// one value at i; containers are walked with an explicit stack (no recursion)
    bool value() {
        // stack of open containers: '[' or '{'
        std::string open;
        for (;;) {
            // --- a value starts at i
            if (i >= s.size()) return fail("Expecting value", i);
            const char c = s[i];
            bool scalar = true;
            if (c == '"') {
                if (!string()) return false;
            } else if (c == '{' || c == '[') {
                if (open.size() >= max_depth) {
                    error = "maximum recursion depth exceeded";
                    return false;
                }
                open.push_back(c);
                ++i;
                ws();
                if (c == '{') {
                    if (i < s.size() && s[i] == '}') { ++i; open.pop_back(); }
                    else {
                        if (!member_key()) return false;
                        scalar = false;
                    }
                } else {
                    if (i < s.size() && s[i] == ']') { ++i; open.pop_back(); }
                    else scalar = false;
                }
            } else if (lit("null") || lit("true") || lit("false") || lit("NaN") || lit("Infinity") || lit("-Infinity")) {
            } else {
                bool matched = false;
                if (!number(matched)) return false;
                if (!matched) return fail("Expecting value", i);
            }
            if (!scalar) continue;  // the first item of a container starts at i
            // --- a value ended: close containers / go to the next item
            for (;;) {
                if (open.empty()) return true;
                ws();
                const char o = open.back();
                if (i < s.size() && s[i] == ',') {
                    ++i;
                    ws();
                    if (o == '{' && !member_key()) return false;
                    break;  // the next value
                }
                if (i < s.size() && s[i] == (o == '{' ? '}' : ']')) {
                    ++i;
                    open.pop_back();
                    continue;
                }
                return fail("Expecting ',' delimiter", i);
            }
        }
    }
};
}  // namespace

std::string py_json_check(const std::string& text, std::vector<bool>& lone, std::size_t max_depth,
                          std::size_t max_int_digits, unsigned* first_lone) {
    lone.clear();
    Scan sc{text, lone, max_depth, max_int_digits, 0, {}, 0};
    struct Tell {
        Scan& sc;
        unsigned* out;
        ~Tell() { if (out != nullptr) *out = sc.first_lone; }
    } tell{sc, first_lone};
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) return "Unexpected UTF-8 BOM (decode using utf-8-sig): " + sc.at(0);
    sc.ws();
    if (!sc.value()) return sc.error;
    sc.ws();
    if (sc.i != text.size()) return "Extra data: " + sc.at(sc.i);
    return "";
}

}  // namespace detail
}  // namespace aero
