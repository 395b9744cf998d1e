// modelcodec's C++17 reader for AERO v0.1 files and AEROSET v0.1/v0.2 sets (local).
//
//   aero::AeroSetFile set("model/model.aeroset.json");        // or the set's directory
//   std::vector<uint8_t> bytes = set.read_tensor_bytes("layer.0.weight");
//
// Layouts, limits, enums and rule ids come from <aero/generated.hpp>, which `python -m
// codec.tools.cgen` writes from the same schema objects the Python reader uses.  Every error about
// data is an aero::FormatError (or a subclass named like the Python class) carrying the byte
// offset, the field path and the rule id the Python reader gives for the same file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace aero {

namespace detail {
struct Access;
}

// ------------------------------------------------------------------------------ errors
/// Base of everything this library throws on purpose.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Bad data.  kind() is the Python class name (MagicError, BoundsError, ...), rule() the rule id
/// ("AERO-CHUNK-BOUNDS"), path() the field path ("toc[3](WTSH 'weights.shard0').chunk_length"),
/// offset() the absolute byte offset in source() (has_offset() false when none applies).
class FormatError : public Error {
public:
    FormatError(std::string kind, std::string format, bool has_offset, std::uint64_t offset, std::string path,
                std::string rule, std::string message, std::string source = "", std::string severity = "error");
    const std::string& kind() const noexcept { return kind_; }
    const std::string& format() const noexcept { return format_; }
    bool has_offset() const noexcept { return has_offset_; }
    std::uint64_t offset() const noexcept { return offset_; }
    const std::string& path() const noexcept { return path_; }
    const std::string& rule() const noexcept { return rule_; }
    const std::string& message() const noexcept { return message_; }
    const std::string& source() const noexcept { return source_; }
    const std::string& severity() const noexcept { return severity_; }
    /// is this error of Python class `name` or a subclass of it ("BoundsError" for a TruncatedError)
    bool is_a(const std::string& name) const;
    /// one line, as the Python reader renders it: "src: AERO path @ 0x1f0: message [RULE]"
    static std::string render(const std::string& source, const std::string& format, const std::string& path,
                              bool has_offset, std::uint64_t offset, const std::string& message,
                              const std::string& rule);

private:
    std::string kind_, format_;
    bool has_offset_;
    std::uint64_t offset_;
    std::string path_, rule_, message_, source_, severity_;
};

// One class per Python error class (codec/errors.py), same hierarchy.
#define AERO_ERROR_CLASS(NAME, PARENT)                                  \
    class NAME : public PARENT {                                        \
    public:                                                             \
        using PARENT::PARENT;                                           \
    };
AERO_ERROR_CLASS(MagicError, FormatError)
AERO_ERROR_CLASS(UnsupportedVersionError, FormatError)
AERO_ERROR_CLASS(BoundsError, FormatError)
AERO_ERROR_CLASS(TruncatedError, BoundsError)
AERO_ERROR_CLASS(OverlapError, FormatError)
AERO_ERROR_CLASS(ConstraintError, FormatError)
AERO_ERROR_CLASS(ReservedError, ConstraintError)
AERO_ERROR_CLASS(EnumError, ConstraintError)
AERO_ERROR_CLASS(RangeError, ConstraintError)
AERO_ERROR_CLASS(LimitError, RangeError)
AERO_ERROR_CLASS(AlignmentError, ConstraintError)
AERO_ERROR_CLASS(StructureError, FormatError)
AERO_ERROR_CLASS(DecodeError, FormatError)
AERO_ERROR_CLASS(SchemaError, DecodeError)
AERO_ERROR_CLASS(CompressionError, DecodeError)
AERO_ERROR_CLASS(IntegrityError, FormatError)
#undef AERO_ERROR_CLASS

/// The caller asked for something impossible (not a regular file, a URL part, no such part...).
class UsageError : public Error {
public:
    using Error::Error;
};

/// A tensor name the file or set does not have.
class NotFoundError : public Error {
public:
    using Error::Error;
};

/// Bytes the file describes but does not hold: a tensor of an index-only file (its bytes live in
/// the set's parts).
class NotLocalError : public Error {
public:
    using Error::Error;
};

// ------------------------------------------------------------------------------ data
/// A read-only view of bytes (C++17 has no std::span).
struct ByteSpan {
    const std::uint8_t* ptr = nullptr;
    std::size_t len = 0;
    const std::uint8_t* data() const noexcept { return ptr; }
    std::size_t size() const noexcept { return len; }
    bool empty() const noexcept { return len == 0; }
    const std::uint8_t* begin() const noexcept { return ptr; }
    const std::uint8_t* end() const noexcept { return ptr + len; }
};

struct TensorInfo {
    std::string name;
    std::string dtype;          ///< element type as `inspect --json` names it: "float32", "bfloat16", "packed"
    std::string format_dtype;   ///< AERO's own name ("f32", "bf16", "packed"): `format_dtype` in --json
    std::uint32_t dtype_code = 0;
    std::vector<std::uint64_t> shape;
    std::uint64_t nbytes = 0;   ///< byte length
    std::uint64_t offset = 0;   ///< absolute offset of the bytes in their file
    std::uint64_t shard_id = 0;
    std::string hash_b3;        ///< BLAKE3-256 of the bytes (hex), "" when the index has none
    std::string file;           ///< the file holding the bytes (a part, for a set)
};

/// One finding of validate(): what FormatError carries, without being thrown.
struct Violation {
    std::string kind, format, path, rule, message, severity, source;
    bool has_offset = false;
    std::uint64_t offset = 0;
    std::uint64_t more = 0;             ///< findings like it that a cap left out (counted, not listed)
    bool has_extent = false;            ///< a cut file: the bytes held of those the header promises
    std::uint64_t held = 0, promised = 0;
    std::string str() const;
};

struct Report {
    std::vector<Violation> violations;   ///< in the order the Python reader reports them
    std::vector<std::string> checked;    ///< what was checked
    bool ok() const;                     ///< no violation of severity "error"
    const Violation* first_error() const;
};

// ------------------------------------------------------------------------------ AERO
/// One AERO file, mapped read-only.  The structure (header, TOC, string table, MMSG, TIDX with
/// its chunk hashes) is checked by the constructor, which throws the first FormatError; every
/// TIDX entry (dtype x shape = data_len, shard exists, bytes inside the shard) is checked once
/// before the first info() or read.  One reader per thread (or a lock around it): the first
/// read of a tensor records that its hash_b3 was checked.
class AeroFile {
public:
    explicit AeroFile(const std::string& path);
    ~AeroFile();
    AeroFile(AeroFile&&) noexcept;
    AeroFile& operator=(AeroFile&&) noexcept;
    AeroFile(const AeroFile&) = delete;
    AeroFile& operator=(const AeroFile&) = delete;

    const std::string& path() const;
    /// the tensor names, in index order
    const std::vector<std::string>& tensor_names() const;
    bool contains(const std::string& name) const;
    TensorInfo info(const std::string& name);
    /// a copy of the tensor's bytes; hash_b3 (when the index has one) is checked first, unless verify is false
    std::vector<std::uint8_t> read_tensor_bytes(const std::string& name, bool verify = true);
    /// the tensor's bytes in the file mapping (zero-copy, valid while this object lives);
    /// hash_b3 is checked on the first call unless verify is false.  Tensors are never compressed
    /// in AERO (WTSH chunks cannot be), so every tensor has a span.
    ByteSpan tensor_span(const std::string& name, bool verify = true);
    /// the MJSN metadata chunk as JSON text ("{}" when there is none)
    std::string metadata_json();
    /// structure (and the MJSN hash, zero padding); `full` adds every chunk's BLAKE3, every
    /// hash_b3, IHSH and PHSH.  Never throws for bad data: every finding is in the report.
    Report validate(bool full = false);
    /// true for an AEROSET index.aero (a TIDX and no weights)
    bool index_only() const;
    /// validate() of a file that may not open: every structural finding is reported, those that
    /// make the constructor throw included (the checks that need the broken part are skipped).
    /// Throws only what is not about the file's bytes (UsageError: not a regular file...).
    static Report validate_file(const std::string& path, bool full = false);

    struct Impl;

private:
    struct Collect {};
    AeroFile(Collect, const std::string& path);  // opened without throwing its findings
    struct Held {  // the open file `fd` (a set's file; the descriptor stays the caller's)
        int fd;
        bool collect;
    };
    AeroFile(Held, const std::string& path);
    friend struct detail::Access;
    std::unique_ptr<Impl> impl_;
};

// ------------------------------------------------------------------------------ AEROSET
struct SetOptions {
    /// check each file's sha256 and size_bytes (from the index JSON) when it is first opened
    bool verify_sha256 = false;
};

/// A local AEROSET: its `*.aeroset.json` (v0.1 or v0.2; a v0.2 base_url is not used: the files
/// are read beside the index) or its directory.  The set's directory is opened once and every
/// file the index lists is held open from the start (opened relative to it, no symlink followed):
/// what is read is one version of the set, whole, even when a writer replaces it meanwhile (the
/// set is opened again from the new index, at most OPEN_ATTEMPTS times, when its files were gone
/// before they could be held).  index.aero is read at once (tensor names), parts lazily and once;
/// a tensor resolves through its global shard id to the part listing it and then by name in that
/// part's TIDX (both global-id and part-local sets read).
class AeroSetFile {
public:
    explicit AeroSetFile(const std::string& path, SetOptions options = SetOptions());
    ~AeroSetFile();
    AeroSetFile(AeroSetFile&&) noexcept;
    AeroSetFile& operator=(AeroSetFile&&) noexcept;
    AeroSetFile(const AeroSetFile&) = delete;
    AeroSetFile& operator=(const AeroSetFile&) = delete;

    const std::string& index_path() const;
    const std::vector<std::string>& tensor_names() const;
    bool contains(const std::string& name) const;
    TensorInfo info(const std::string& name);
    std::vector<std::uint8_t> read_tensor_bytes(const std::string& name, bool verify = true);
    ByteSpan tensor_span(const std::string& name, bool verify = true);
    std::size_t part_count() const;
    /// the i-th part, opened on first use
    AeroFile& part(std::size_t i);
    /// sha256 and size_bytes of the i-th part against the index (AEROSET-PART-HASH); throws IntegrityError
    void verify_part(std::size_t i);
    /// the index's `model` map as JSON text
    std::string metadata_json() const;
    /// the index, every part and index.aero; `full` adds every file's sha256 and size (a file of
    /// another size: that finding alone) and each file's full AERO validation.  A part that fails
    /// is reported once, not once per tensor it holds (as the Python reader's validate)
    Report validate(bool full = false);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

/// BLAKE3-256 of bytes, as 64 lowercase hex characters (the official C implementation).
std::string blake3_hex(const void* data, std::size_t size);

}  // namespace aero
