// Shared helpers of the C++ reader's libFuzzer harnesses (fuzz/cpp/fuzz_*.cpp): a scratch
// directory per process, a file writer, the repair of an AERO file's chunk hashes, and the
// contract every harness checks.
//
// Contract: for ANY input the reader returns or throws an aero::Error subclass (FormatError and
// its subclasses, UsageError, NotFoundError, NotLocalError); any other exception, a sanitizer
// report, a crash, a hang (-timeout) or an allocation past -rss_limit_mb is a finding.
#pragma once

#include <aero/aero.hpp>
#include <aero/generated.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>
#include <vector>

namespace fuzz {

/// a finding: print what happened and abort (libFuzzer saves the input as crash-*)
[[noreturn]] inline void violation(const std::string& what) {
    std::fprintf(stderr, "CONTRACT VIOLATION: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

/// remove every file of directory `d` (not recursive: the harnesses write files only)
inline void clear_dir(const std::string& d) {
    if (DIR* dp = opendir(d.c_str())) {
        std::vector<std::string> names;
        while (dirent* e = readdir(dp))
            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
        closedir(dp);
        for (const auto& n : names) unlink((d + "/" + n).c_str());
    }
}

/// this process's scratch directory (in /dev/shm when it exists: no disk traffic per execution),
/// removed with its files when the process exits
inline const std::string& scratch() {
    struct Dir {
        std::string path;
        Dir() {
            struct stat st;
            std::string base = (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) ? "/dev/shm" : "/tmp";
            path = base + "/aero-cppfuzz-" + std::to_string(getuid()) + "-" + std::to_string(getpid());
            mkdir(path.c_str(), 0700);
        }
        ~Dir() {  // (a static's destructor: runs while `path` is alive, unlike an atexit handler)
            clear_dir(path);
            rmdir(path.c_str());
        }
    };
    static const Dir dir;
    return dir.path;
}

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) violation("harness: cannot write " + path);
    if (size && std::fwrite(data, 1, size, f) != size) violation("harness: short write to " + path);
    std::fclose(f);
}

inline std::uint64_t le(const std::uint8_t* p, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

/// The input with every TOC entry's BLAKE3 set to the hash of the bytes it describes (when they
/// lie inside the input), so a mutation reaches the logic behind the chunk-hash check; empty
/// when nothing changes or the TOC cannot be found.  (A helper of the harness, never a finding.)
inline std::vector<std::uint8_t> fix_chunk_hashes(const std::uint8_t* data, std::size_t size) {
    namespace L = aero::gen::schema_aero;
    std::vector<std::uint8_t> buf;
    if (size < L::FileHeader_SIZE) return buf;
    std::uint64_t toc = le(data + L::FileHeader_toc_offset_OFFSET, 8);
    std::uint64_t toc_len = le(data + L::FileHeader_toc_length_OFFSET, 8);
    if (toc > size || toc_len > size - toc || toc_len < L::TocHeader_SIZE) return buf;
    std::uint64_t n = le(data + toc + L::TocHeader_entry_count_OFFSET, 4);
    if (n > (toc_len - L::TocHeader_SIZE) / L::TocEntry_SIZE) n = (toc_len - L::TocHeader_SIZE) / L::TocEntry_SIZE;
    buf.assign(data, data + size);
    bool changed = false;
    for (std::uint64_t i = 0; i < n; ++i) {
        std::uint8_t* e = buf.data() + toc + L::TocHeader_SIZE + i * L::TocEntry_SIZE;
        std::uint64_t off = le(e + L::TocEntry_chunk_offset_OFFSET, 8), len = le(e + L::TocEntry_chunk_length_OFFSET, 8);
        if (off > size || len > size - off) continue;
        std::string hex = aero::blake3_hex(buf.data() + off, len);
        std::uint8_t digest[32];
        for (int k = 0; k < 32; ++k) digest[k] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * k, 2), nullptr, 16));
        if (std::memcmp(e + L::TocEntry_blake3_256_OFFSET, digest, 32)) {
            std::memcpy(e + L::TocEntry_blake3_256_OFFSET, digest, 32);
            changed = true;
        }
    }
    if (!changed) buf.clear();
    return buf;
}

/// run `body`; an aero::Error is the reader refusing (fine, returned), anything else a finding
template <class F>
inline const aero::FormatError* guarded(const char* what, F&& body, aero::FormatError* store = nullptr) {
    try {
        body();
    } catch (const aero::FormatError& e) {
        if (e.rule().empty()) violation(std::string(what) + ": a FormatError without a rule id: " + e.what());
        if (store) *store = e;
        return store;
    } catch (const aero::Error&) {
    } catch (const std::exception& e) {
        violation(std::string(what) + ": untyped exception " + typeid(e).name() + ": " + e.what());
    } catch (...) {
        violation(std::string(what) + ": a non-std exception");
    }
    return nullptr;
}

/// a report holds findings with a rule id each; `must_fail`: the constructor refused the input,
/// so the report must hold an error
inline void check_report(const aero::Report& rep, bool must_fail, const char* what) {
    for (const auto& v : rep.violations)
        if (v.rule.empty() || (v.severity != "error" && v.severity != "warning"))
            violation(std::string(what) + ": a finding without a rule or severity: " + v.str());
    if (must_fail && rep.ok()) violation(std::string(what) + ": the constructor refused the input but the report is ok");
}

}  // namespace fuzz
