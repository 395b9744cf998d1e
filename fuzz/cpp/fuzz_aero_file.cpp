// libFuzzer harness of the C++ reader's aero::AeroFile (see fuzz/README section of the project
// README and fuzz/run.py --only cpp_aero).  The input is an AERO file, read twice when that makes
// a difference: as given (`raw`) and with its TOC chunk hashes repaired (`fixed`, so mutations
// reach the TIDX / MMSG / IHSH / PHSH logic behind the chunk-hash check).  Each pass writes the
// bytes to a scratch file and:
//   * AeroFile(path); tensor_names, contains, info, read_tensor_bytes (hash_b3 checked),
//     tensor_span, metadata_json, index_only, validate(false), validate(true) -- each returns or
//     throws an aero::Error (NotLocalError only for an index-only file);
//   * AeroFile::validate_file(path, false / true) -- throws nothing about the bytes, and reports
//     an error whenever the constructor threw a FormatError.
#include "common.hpp"

namespace {

void exercise(const std::string& path) {
    aero::FormatError open_error("", "", false, 0, "", "", "");
    const aero::FormatError* refused = nullptr;
    bool index_only = false;
    refused = fuzz::guarded("AeroFile", [&] {
        aero::AeroFile f(path);
        index_only = f.index_only();
        const auto names = f.tensor_names();
        for (const auto& n : names) {
            if (!f.contains(n)) fuzz::violation("contains() is false for the listed name");
            fuzz::guarded("tensor", [&] {
                try {
                    aero::TensorInfo t = f.info(n);
                    std::vector<std::uint8_t> b = f.read_tensor_bytes(n);
                    if (b.size() != t.nbytes) fuzz::violation("read_tensor_bytes: wrong length");
                    aero::ByteSpan s = f.tensor_span(n, false);
                    if (s.size() != t.nbytes) fuzz::violation("tensor_span: wrong length");
                } catch (const aero::NotFoundError& e) {
                    fuzz::violation(std::string("NotFoundError for a listed name: ") + e.what());
                } catch (const aero::NotLocalError& e) {
                    if (!index_only) fuzz::violation(std::string("NotLocalError from a file with weights: ") + e.what());
                }
            });
        }
        fuzz::guarded("metadata_json", [&] { f.metadata_json(); });
        fuzz::check_report(f.validate(false), false, "validate(false)");
        fuzz::check_report(f.validate(true), false, "validate(true)");
    }, &open_error);
    for (bool full : {false, true}) {
        fuzz::guarded("validate_file", [&] {
            try {
                fuzz::check_report(aero::AeroFile::validate_file(path, full), refused != nullptr, "validate_file");
            } catch (const aero::FormatError& e) {
                fuzz::violation(std::string("validate_file threw a FormatError: ") + e.what());
            }
        });
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string path = fuzz::scratch() + "/in.aero";
    fuzz::write_file(path, data, size);
    exercise(path);
    std::vector<std::uint8_t> fixed = fuzz::fix_chunk_hashes(data, size);
    if (!fixed.empty()) {
        fuzz::write_file(path, fixed.data(), fixed.size());
        exercise(path);
    }
    return 0;
}
