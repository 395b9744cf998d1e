// Internal engine of the C++ reader: the generic pieces the Python engine has too (record
// constraint checks, relations, payload declarations, bounded decoding), driven by the tables
// in <aero/generated.hpp>.  Nothing here is public API.
#pragma once

#include <aero/aero.hpp>
#include <aero/generated.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace aero {
namespace detail {

using u64 = std::uint64_t;

// ------------------------------------------------------------------------------ findings
/// A finding in the making (becomes a Violation or a thrown FormatError).
struct Finding {
    gen::ErrorKind kind = gen::ErrorKind::FormatError;
    std::string format, path, rule, message, severity = "error";
    bool has_offset = false;
    u64 offset = 0;
    u64 more = 0;                 ///< findings like it a cap left out (Python's FormatError.more)
    bool has_extent = false;      ///< a cut file: bytes held of those promised (FormatError.extent)
    u64 held = 0, promised = 0;
};

Finding finding(gen::ErrorKind kind, const std::string& fmt, std::optional<u64> offset, const std::string& path,
                const std::string& rule, const std::string& message);
const char* kind_name(gen::ErrorKind k);
[[noreturn]] void throw_finding(const Finding& f, const std::string& source);
Violation to_violation(const Finding& f, const std::string& source);
/// a file that ends early is one finding (Python's model.fold_truncation): every later
/// TruncatedError of the same source becomes a consequence of the first, counted in its message
void fold_truncation(Report& rep);

/// thrown inside a structure check when nothing further can be checked (Python's StopCheck)
struct StopCheck {};

/// a typed error raised deep inside a decode step (Python raises the FormatError itself)
struct Raised {
    Finding f;
};
[[noreturn]] inline void raise(const Finding& f) { throw Raised{f}; }

// ------------------------------------------------------------------------------ arithmetic
/// a + b, or nullopt when it wraps
inline std::optional<u64> add(u64 a, u64 b) {
    u64 r = a + b;
    if (r < a) return std::nullopt;
    return r;
}
/// a * b, or nullopt when it wraps
inline std::optional<u64> mul(u64 a, u64 b) {
    if (a != 0 && b > UINT64_MAX / a) return std::nullopt;
    return a * b;
}
/// [off, off + len) inside [0, size], without wrap-around
inline bool inside(u64 off, u64 len, u64 size) { return off <= size && len <= size - off; }

std::string hex(const unsigned char* p, std::size_t n);
std::string lower(std::string s);
/// Python's repr() of a str (for paths and messages)
std::string py_repr(const std::string& s);
/// strict UTF-8 (what Python's decoder accepts)
bool valid_utf8(const char* p, std::size_t n);
/// the bytes as UTF-8 with every ill-formed part replaced by U+FFFD, as Python's
/// bytes.decode("utf-8", "replace") does (one U+FFFD per maximal subpart of an ill-formed sequence)
std::string utf8_replace(const char* p, std::size_t n);
/// why the bytes are not UTF-8, as CPython's UnicodeDecodeError says it (its first ill-formed
/// part); "" when they are
std::string utf8_error(const char* p, std::size_t n);
/// Python's repr() of bytes (b'..', or b".." when only single quotes are inside)
std::string py_bytes_repr(const unsigned char* p, std::size_t n);
/// an integer as Python's f"{v:,}" writes it
std::string with_commas(u64 v);
/// number of code points of valid UTF-8
std::size_t utf8_len(const char* p, std::size_t n);

// ------------------------------------------------------------------------------ files
/// A regular file mapped read-only (nothing mapped for an empty file).
class Mapped {
public:
    explicit Mapped(const std::string& path, const std::string& what);
    /// the open file `fd`, shown as `path` (the descriptor stays the caller's)
    Mapped(int fd, const std::string& path, const std::string& what);
    ~Mapped();
    Mapped(const Mapped&) = delete;
    Mapped& operator=(const Mapped&) = delete;
    const unsigned char* data() const { return data_; }
    u64 size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    void map(int fd, const std::string& what);
    std::string path_;
    const unsigned char* data_ = nullptr;
    u64 size_ = 0;
};

/// the finding of a bool tensor's `n` bytes at `p` (at `offset` in the file) whose first byte other than 0 or 1
/// is element k: "<prefix>bool element k is the byte b (...)" under `rule`, a warning when `warnings` lists it
/// (codec.io.integrity.odd_bool_message); nullopt when every byte is 0 or 1
std::optional<Finding> odd_bool(const unsigned char* p, u64 n, u64 offset, const std::string& fmt, const std::string& path,
                                const std::string& rule, const std::string& prefix, const char* const* warnings,
                                std::size_t nwarnings);

/// BLAKE3-256 of bytes (32 raw bytes)
std::string blake3_raw(const unsigned char* p, std::size_t n);
/// a file's digest by an OpenSSL algorithm name ("sha256"; hex) and its size (`fd`: the file, open)
std::pair<std::string, u64> digest_file(const std::string& path, const char* algorithm, int fd = -1);

// ------------------------------------------------------------------------------ documents
/// A decoded msgpack or JSON document, flat: nodes in pre-order, each container followed by its
/// items (a map: key, value, key, value ...); `next` is the index after a node's subtree.  Text
/// and bytes are offsets into `buf` (the decoded payload, or an arena for JSON).
struct Node {
    enum Type : std::uint8_t { Nil, Bool, Int, Float, Str, Bin, Array, Map, Ext };
    Type type = Nil;
    bool neg = false;      // Int: v holds a negative int64
    bool huge = false;     // Int: a JSON integer beyond 64 bits (v meaningless; neg its sign)
    bool lone = false;     // Str (JSON): holds a lone surrogate escape ("\ud800"), which no UTF-8 text can
    std::uint32_t len = 0; // Str/Bin/Ext bytes; Array items; Map pairs
    std::uint32_t next = 0;
    u64 v = 0;             // Bool/Int value, Float bits, or offset of Str/Bin/Ext bytes in buf
};

struct Doc {
    std::vector<unsigned char> buf;
    std::string json_text;  // a JSON document as it was decoded (escapes Python takes and nlohmann would not, normalised)
    std::vector<Node> nodes;
    std::string text(std::uint32_t i) const {
        const Node& n = nodes[i];
        return std::string(reinterpret_cast<const char*>(buf.data()) + n.v, n.len);
    }
    bool is_str(std::uint32_t i, const char* s) const;
    /// the value of str key `key` in map node `i` (the last one when repeated, as a Python dict keeps)
    std::optional<std::uint32_t> get(std::uint32_t i, const char* key) const;
    /// the items of array node i, or the (key, value) pairs' indexes of map node i, flattened
    std::vector<std::uint32_t> children(std::uint32_t i) const;
    /// an int node as a signed value when it fits (for messages)
    std::string int_text(std::uint32_t i) const;
    /// the node as (compact) JSON text
    std::string json(std::uint32_t i) const;
};

struct DecodeContext {
    std::string fmt;
    std::optional<u64> offset;
    std::string path, rule, limit_rule;
    u64 stored = 0;         // bytes of the file that store the document (for the budget)
    u64 per_byte = gen::DECODE_OBJECTS_PER_BYTE;
    /// msgpack: containers nested past gen::MSGPACK_MAX_DEPTH the decoder still builds (the caller
    /// then checks the depth of each part of the document Python unpacks on its own: msgpack_depth)
    std::size_t depth_allowance = 0;
    /// JSON: a string holding a lone surrogate escape is taken (the node says `lone`) rather than
    /// refused (Python's payload.loads_json refuses it: text that is not Unicode)
    bool lone_ok = false;
};
/// containers on the deepest path of node i's subtree, node i included
std::size_t msgpack_depth(const Doc& d, std::uint32_t i);

u64 object_budget(u64 stored, u64 per_byte);
/// one msgpack object filling `data` (trailing zero bytes allowed when asked), within the decode
/// budget; raises DecodeError / LimitError (as Raised)
Doc unpack_msgpack(std::vector<unsigned char> data, const DecodeContext& cx, bool allow_trailing_zeros = false);
/// Python's json.loads grammar (strict) over UTF-8 text: "" when Python accepts it, else Python's
/// error words; `lone` gets one flag per string (keys and values, in document order): true when it
/// holds a lone surrogate escape.  At most `max_depth` nested containers, integers of at most
/// `max_int_digits` digits (gen::JSON_MAX_DEPTH, gen::JSON_MAX_INT_DIGITS).  `first_lone`: the
/// first lone surrogate escape's code unit in document order (0: none).
std::string py_json_check(const std::string& text, std::vector<bool>& lone, std::size_t max_depth,
                          std::size_t max_int_digits, unsigned* first_lone = nullptr);
/// one UTF-8 JSON document, within the decode budget, read as Python's json reads it
Doc loads_json(const unsigned char* data, std::size_t n, const DecodeContext& cx);

// ------------------------------------------------------------------------------ declarations
/// payload.check: every violation of the declaration `node` (of PAYLOAD_NODES) by document node i
void check_payload(const gen::PNode* nodes, int node, const Doc& d, std::uint32_t i, const std::string& fmt,
                   std::optional<u64> offset, const std::string& path, const std::string& rule,
                   std::vector<Finding>& out, std::size_t limit = 50);

/// engine.Record.check: every violated constraint of one record at p (absolute offset `base`)
std::vector<Finding> check_record(const gen::RecordSpec& rec, const unsigned char* p, u64 base,
                                  const std::string& path);
/// engine.Record.check_table: n records at p, column by column (capped per rule)
std::vector<Finding> check_table(const gen::RecordSpec& rec, const unsigned char* p, u64 base, u64 n,
                                 const std::string& path);
/// the value of an integer field of a record at p
u64 field_u64(const gen::FieldSpec& f, const unsigned char* p);
const gen::FieldSpec* field_of(const gen::RecordSpec& rec, const std::string& name);

/// a constraint on an integer value (for payload ints: negative values are `neg`; `huge`: beyond
/// 64 bits, in the direction of `neg`)
bool holds(const gen::Constraint& c, bool neg, u64 v, bool huge = false);
Finding violation(const std::string& fmt, const gen::Constraint& c, const std::string& shown,
                  std::optional<u64> offset, const std::string& path);

// ------------------------------------------------------------------------------ relations
/// The table a set of relations runs over: one named table of rows (columns of u64, or of
/// text keys), header values, derived values ("$name"), the end of the file, RefersTo targets.
struct RelTable {
    std::string name;  // "TocEntry"
    u64 n = 0;
    std::map<std::string, std::vector<u64>> cols;
    std::map<std::string, std::vector<std::vector<u64>>> lists;   // ragged columns (shape)
    std::map<std::string, std::vector<std::string>> keys;        // columns compared as text
    std::map<std::string, std::vector<bool>> absent;              // rows of a bytes column that are not there
    // how messages show a key column's value at a row (Python's repr; default: repr of the text)
    std::map<std::string, std::function<std::string(u64 row)>> shown;
    std::function<std::optional<u64>(u64 row, const std::string& field)> field_at;
    std::function<std::string(u64 row)> row_path;
    std::string path;  // "toc", "TIDX.tensors"
};

struct RelContext {
    std::string fmt;
    u64 size = 0;
    const unsigned char* buf = nullptr;  // the file's bytes (Zeros reads them)
    std::string hrec;  // the header record whose fields messages name bare ("toc_length"), as Python's Context
    RelTable table;
    std::map<std::string, u64> scalars;   // "FileHeader.x", "$control_end"
    std::map<std::string, std::map<u64, std::pair<u64, u64>>> targets;  // RefersTo: value -> (offset, length)
};

struct RelFindings {
    std::vector<Finding> errors;
    std::set<u64> bad;
    std::map<u64, Finding> why;
};

RelFindings check_relations(const gen::Relation* rels, std::size_t n, RelContext& cx,
                            const std::function<bool(const gen::Relation&)>& keep = nullptr);

/// a header as a table of one row (its integer fields as columns, named by the record, each
/// finding at the field's absolute offset: `at` is where the record starts)
RelTable one_row(const gen::RecordSpec& rec, const unsigned char* p, u64 at);
/// a header's integer fields as the scalars "Record.field" of a context
void add_scalars(RelContext& cx, const gen::RecordSpec& rec, const unsigned char* p);

/// what an AEROSET needs of its index.aero beyond the public API
struct Access {
    /// every tensor's global shard id, in index order; false when the index's entries do not
    /// have their declared shape (index.aero's own error says so)
    static bool shard_ids(AeroFile& f, std::vector<u64>& out);
    /// a tensor as the file's TIDX describes it (no offset: an index-only file has no bytes)
    static TensorInfo described(AeroFile& f, const std::string& name);
    /// the open file `fd` read as the AERO file `path` (a set's file, opened beneath its directory)
    static AeroFile open_held(int fd, const std::string& path);
    /// AeroFile::validate_file of the open file `fd`
    static Report validate_held(int fd, const std::string& path, bool full);
};

/// numpy's limit on shapes (model.numpy_can_hold)
bool numpy_can_hold(const std::vector<u64>& shape, u64 itemsize);

}  // namespace detail
}  // namespace aero
