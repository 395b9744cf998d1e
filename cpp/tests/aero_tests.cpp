// ctest programs: `--unit DIR` (hostile files built here, error model), `--replaced` and `--failing-part` (a
// set replaced while read; a part failing its check) and `--vectors DIR` (every
// conformance vector of shared/vectors/aero: valid ones read exactly, invalid ones refused).
#include <aero/aero.hpp>
#include <aero/generated.hpp>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace S = aero::gen::schema_aero;
static int failures = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::cerr << __FILE__ << ":" << __LINE__ << ": CHECK failed: " #cond "\n";             \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

static std::string sha256(const std::vector<std::uint8_t>& b) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(b.data(), b.size(), out, &n, EVP_sha256(), nullptr);
    std::ostringstream o;
    for (unsigned i = 0; i < n; ++i) o << std::hex << (out[i] >> 4) << (out[i] & 15);
    return o.str();
}

static void put_le(std::vector<unsigned char>& b, std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

static std::string write(const std::string& dir, const std::string& name, const std::vector<unsigned char>& b) {
    std::string p = dir + "/" + name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p;
}

/// the rule and class a file is refused with at open ("" when it opens)
static std::pair<std::string, std::string> refusal(const std::string& path) {
    try {
        aero::AeroFile f(path);
        return {"", ""};
    } catch (const aero::FormatError& e) {
        return {e.rule(), e.kind()};
    }
}

static std::vector<unsigned char> header() {
    std::vector<unsigned char> b(S::FileHeader_SIZE, 0);
    std::memcpy(b.data(), S::MAGIC, S::MAGIC_LEN);
    put_le(b, S::FileHeader_version_minor_OFFSET, 1, 2);
    put_le(b, S::FileHeader_header_size_OFFSET, S::FileHeader_SIZE, 4);
    return b;
}

static int unit(const std::string& dir) {
    // hostile headers: each refused with its rule before anything is allocated or read out of bounds
    CHECK(refusal(write(dir, "empty.aero", {})).first == S::rule::TRUNCATED);
    CHECK((refusal(write(dir, "short.aero", {'A', 'E', 'R', 'X', 0})) ==
           std::pair<std::string, std::string>{S::rule::MAGIC, "MagicError"}));
    auto h = header();
    put_le(h, S::FileHeader_toc_offset_OFFSET, 96, 8);
    put_le(h, S::FileHeader_toc_length_OFFSET, UINT64_MAX - 40, 8);  // offset + length wraps
    CHECK(refusal(write(dir, "wrap.aero", h)).first == S::rule::TOC_BOUNDS);
    h = header();
    h.resize(96 + 16 + 8, 0);
    put_le(h, S::FileHeader_toc_offset_OFFSET, 96, 8);
    put_le(h, S::FileHeader_toc_length_OFFSET, 16, 8);
    put_le(h, S::FileHeader_string_table_offset_OFFSET, 112, 8);
    put_le(h, S::FileHeader_string_table_length_OFFSET, 8, 8);
    put_le(h, 96, 0xFFFFFFFFu, 4);  // entry_count 2^32 - 1
    CHECK((refusal(write(dir, "count.aero", h)) == std::pair<std::string, std::string>{S::rule::LIMIT_ENTRY_COUNT, "LimitError"}));
    put_le(h, 96, 0, 4);  // no entries: no TIDX
    CHECK(refusal(write(dir, "notidx.aero", h)).first == S::rule::MISSING_CHUNK);
    h[S::FileHeader_reserved_OFFSET + 3] = 1;
    CHECK(refusal(write(dir, "reserved.aero", h)).first == S::rule::RESERVED);
    // the error model: one class per Python class, same hierarchy
    try {
        aero::AeroFile f(dir + "/empty.aero");
        CHECK(false);
    } catch (const aero::BoundsError& e) {
        CHECK(e.kind() == "TruncatedError" && e.is_a("BoundsError") && e.is_a("FormatError") && !e.is_a("LimitError"));
        CHECK(std::string(e.what()).find("[AERO-TRUNCATED]") != std::string::npos);
        CHECK(e.has_offset() && e.offset() == 0 && e.path() == "FileHeader");
    }
    // not a regular file: a usage error, not a format error
    try {
        aero::AeroFile f(dir);
        CHECK(false);
    } catch (const aero::UsageError&) {
    }
    try {
        aero::AeroSetFile s(dir + "/empty.aero");
        CHECK(false);
    } catch (const aero::Error&) {
    }
    std::cout << "unit: " << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
}

static bool ends_with(const std::string& s, const std::string& x) {
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

template <class R>
static void check_tensors(R& r, const nlohmann::json& v) {
    CHECK(r.tensor_names().size() == v["tensors"].size());
    for (const auto& t : v["tensors"]) {
        const std::string name = t["name"];
        aero::TensorInfo info = r.info(name);
        CHECK(info.format_dtype == t["dtype"].get<std::string>());
        CHECK(info.shape == t["shape"].get<std::vector<std::uint64_t>>());
        auto bytes = r.read_tensor_bytes(name);
        if (sha256(bytes) != t["sha256"].get<std::string>()) {
            std::cerr << "  " << name << ": bytes differ\n";
            ++failures;
        }
        auto span = r.tensor_span(name);
        CHECK(span.size() == bytes.size() && std::equal(span.begin(), span.end(), bytes.begin()));
    }
}

static int vectors(const std::string& dir) {
    std::ifstream in(dir + "/manifest.json");
    nlohmann::json m = nlohmann::json::parse(in);
    int n = 0;
    for (const auto& v : m["vectors"]) {
        const std::string file = v["file"], path = dir + "/" + file;
        const bool set = ends_with(file, ".aeroset.json");
        if (set && v.value("features", nlohmann::json::array()).dump().find("remote") != std::string::npos &&
            file.find("v02") == std::string::npos)
            continue;
        const int before = failures;
        if (v["expect"] == "valid") {
            try {
                if (set) {
                    aero::AeroSetFile s(path);
                    check_tensors(s, v);
                    CHECK(s.validate(true).ok());
                } else {
                    aero::AeroFile f(path);
                    check_tensors(f, v);
                    aero::Report rep = f.validate(true);
                    if (!rep.ok()) std::cerr << "  " << rep.first_error()->str() << "\n";
                    CHECK(rep.ok());
                }
            } catch (const std::exception& e) {
                std::cerr << "  " << e.what() << "\n";
                ++failures;
            }
        } else {  // refused at open, on a read, or by full validation
            bool refused = false;
            try {
                if (set) {
                    aero::AeroSetFile s(path);
                    for (const auto& name : s.tensor_names()) s.read_tensor_bytes(name);
                    refused = !s.validate(true).ok();
                } else {
                    aero::AeroFile f(path);
                    for (const auto& name : f.tensor_names()) f.read_tensor_bytes(name);
                    refused = !f.validate(true).ok();
                }
            } catch (const aero::FormatError&) {
                refused = true;
            }
            CHECK(refused);
        }
        std::cout << (failures == before ? "ok   " : "FAIL ") << file << "\n";
        ++n;
    }
    std::cout << n << " vectors: " << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
}

/// the names in directory `dir` (no "." or "..")
static std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d))
            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
        ::closedir(d);
    }
    return out;
}

static void remove_dir(const std::string& dir) {
    for (const auto& n : names_in(dir)) ::unlink((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

/// `dir` made holding the files of `from`, each under the name `rename` gives it
template <class F>
static void copy_set(const std::string& from, const std::string& dir, F rename) {
    ::mkdir(dir.c_str(), 0755);
    for (const auto& n : names_in(from)) {
        std::ifstream in(from + "/" + n, std::ios::binary);
        std::ofstream(dir + "/" + rename(n), std::ios::binary) << in.rdbuf();
    }
}

/// A set opened, then replaced by a writer (its directory swapped for a new one, the old one's
/// files removed): the open set keeps reading the version it opened, whole -- every tensor, its
/// parts' digests, its full validation -- and never a file of the new version (here: the same
/// files with two parts' contents exchanged).
static int replaced(const std::string& vectors, const std::string& scratch) {
    const std::string from = vectors + "/aeroset_global", set = scratch + "/replaced-set",
                      old = scratch + "/replaced-old";
    remove_dir(set);
    remove_dir(old);
    copy_set(from, set, [](const std::string& n) { return n; });
    aero::AeroSetFile want(from + "/model.aeroset.json");
    aero::AeroSetFile s(set + "/model.aeroset.json");
    CHECK(::rename(set.c_str(), old.c_str()) == 0);
    copy_set(from, set, [](const std::string& n) {
        return n == "part-000.aero" ? std::string("part-001.aero") : n == "part-001.aero" ? std::string("part-000.aero") : n;
    });
    remove_dir(old);
    try {
        CHECK(!s.tensor_names().empty() && s.tensor_names() == want.tensor_names());
        for (const auto& name : want.tensor_names()) CHECK(s.read_tensor_bytes(name) == want.read_tensor_bytes(name));
        for (std::size_t i = 0; i < s.part_count(); ++i) s.verify_part(i);
        const aero::Report rep = s.validate(true);
        if (!rep.ok()) std::cerr << "  " << rep.first_error()->str() << "\n";
        CHECK(rep.ok());
    } catch (const std::exception& e) {
        std::cerr << "  " << e.what() << "\n";
        ++failures;
    }
    remove_dir(set);
    std::cout << "replaced: " << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
}

/// A set read with verify_sha256 whose part-001.aero (several tensors) is of the wrong size, or
/// of the right size with other bytes: a tensor of that part is refused with the part's
/// AEROSET-PART-HASH (by its size, else its sha256), and validation -- structure and full --
/// reports the part once, not once per tensor it holds (and a wrong size by its size only).
static int failing_part(const std::string& vectors, const std::string& scratch) {
    const std::string from = vectors + "/aeroset_global";
    for (const bool grown : {true, false}) {
        const std::string set = scratch + (grown ? "/failing-grown" : "/failing-flipped");
        const std::string want = grown ? "index.parts[1].size_bytes" : "index.parts[1].sha256";
        remove_dir(set);
        copy_set(from, set, [](const std::string& n) { return n; });
        {
            std::fstream f(set + "/part-001.aero", std::ios::binary | std::ios::in | std::ios::out);
            if (grown) {
                f.seekp(0, std::ios::end);
                f.put('\1');
            } else {  // the last byte: the same size, other bytes
                f.seekg(-1, std::ios::end);
                const char c = static_cast<char>(f.get() ^ 0x5a);
                f.seekp(-1, std::ios::end);
                f.put(c);
            }
        }
        try {
            aero::SetOptions o;
            o.verify_sha256 = true;
            aero::AeroSetFile s(set + "/model.aeroset.json", o);
            std::size_t in_part = 0;
            for (const auto& name : s.tensor_names()) {
                try {
                    s.read_tensor_bytes(name);
                } catch (const aero::FormatError& e) {
                    CHECK(e.rule() == std::string(aero::gen::schema_aeroset::rule::PART_HASH) && e.path() == want);
                    ++in_part;
                }
            }
            CHECK(in_part >= 2);  // (the part holds several tensors)
            for (const bool full : {false, true}) {
                std::size_t n = 0;
                for (const auto& v : s.validate(full).violations)
                    if (v.rule == aero::gen::schema_aeroset::rule::PART_HASH) {
                        CHECK(v.path == want && !v.has_offset);
                        ++n;
                    }
                if (n != 1) std::cerr << "  " << set << (full ? " (full)" : "") << ": " << n << " PART-HASH findings\n";
                CHECK(n == 1);
            }
        } catch (const std::exception& e) {
            std::cerr << "  " << e.what() << "\n";
            ++failures;
        }
        remove_dir(set);
    }
    std::cout << "failing part: " << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && !std::strcmp(argv[1], "--unit")) return unit(argv[2]);
    if (argc == 3 && !std::strcmp(argv[1], "--vectors")) return vectors(argv[2]);
    if (argc == 4 && !std::strcmp(argv[1], "--replaced")) return replaced(argv[2], argv[3]);
    if (argc == 4 && !std::strcmp(argv[1], "--failing-part")) return failing_part(argv[2], argv[3]);
    std::cerr << "usage: aero_tests --unit SCRATCH_DIR | --vectors VECTORS_AERO_DIR | --replaced VECTORS_AERO_DIR SCRATCH_DIR"
                 " | --failing-part VECTORS_AERO_DIR SCRATCH_DIR\n";
    return 2;
}
