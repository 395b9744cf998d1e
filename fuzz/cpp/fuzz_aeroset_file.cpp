// libFuzzer harness of the C++ reader's aero::AeroSetFile.  One input holds a whole set:
//
//     <index JSON> ( "\n@@FILE " <name> "\n" <file bytes> )*
//
// The index JSON becomes `model.aeroset.json` and each section the file <name> beside it, in a
// scratch directory emptied before every execution (a <name> other than [A-Za-z0-9._-]{1,64},
// "." or ".." -- or the index's own name -- is skipped; a later section of the same name wins).
// fuzz/run.py seeds it from the conformance sets (aeroset_ref, aeroset_global, its v0.2 index,
// bug_aeroset_writer_asis) and the Python aeroset corpus's index inputs, each packed this way.
//
// The set is opened by its directory or its index path, with or without verify_sha256 (bits of
// the input's last byte), then: tensor_names, contains, info, read_tensor_bytes, tensor_span,
// part_count, part(i), verify_part(i), metadata_json, validate(false), validate(true) -- each
// returns or throws an aero::Error.
#include "common.hpp"

#include <map>

namespace {

const char SEP[] = "\n@@FILE ";

bool good_name(const std::string& n) {
    if (n.empty() || n.size() > 64 || n == "." || n == ".." || n == "model.aeroset.json") return false;
    for (unsigned char c : n)
        if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-')) return false;
    return true;
}

/// the index JSON and the named files of one input
std::pair<std::string, std::map<std::string, std::string>> unpack(const std::uint8_t* data, std::size_t size) {
    std::string in(reinterpret_cast<const char*>(data), size);
    std::map<std::string, std::string> files;
    std::size_t cut = in.find(SEP);
    std::string index = in.substr(0, cut);
    while (cut != std::string::npos) {
        std::size_t name_at = cut + sizeof(SEP) - 1;
        std::size_t eol = in.find('\n', name_at);
        if (eol == std::string::npos) break;
        std::size_t next = in.find(SEP, eol + 1);
        std::string name = in.substr(name_at, eol - name_at);
        if (good_name(name)) files[name] = in.substr(eol + 1, next == std::string::npos ? std::string::npos : next - eol - 1);
        cut = next;
    }
    return {index, files};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string& dir = fuzz::scratch();
    fuzz::clear_dir(dir);
    auto [index, files] = unpack(data, size);
    const std::string index_path = dir + "/model.aeroset.json";
    fuzz::write_file(index_path, reinterpret_cast<const std::uint8_t*>(index.data()), index.size());
    for (const auto& [name, bytes] : files)
        fuzz::write_file(dir + "/" + name, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    const std::uint8_t sel = size ? data[size - 1] : 0;
    aero::SetOptions opt;
    opt.verify_sha256 = sel & 2;
    fuzz::guarded("AeroSetFile", [&] {
        aero::AeroSetFile s(sel & 1 ? dir : index_path, opt);
        const auto names = s.tensor_names();
        for (const auto& n : names) {
            if (!s.contains(n)) fuzz::violation("contains() is false for the listed name");
            fuzz::guarded("tensor", [&] {
                try {
                    aero::TensorInfo t = s.info(n);
                    std::vector<std::uint8_t> b = s.read_tensor_bytes(n);
                    if (b.size() != t.nbytes) fuzz::violation("read_tensor_bytes: wrong length");
                    aero::ByteSpan sp = s.tensor_span(n, false);
                    if (sp.size() != t.nbytes) fuzz::violation("tensor_span: wrong length");
                } catch (const aero::NotFoundError& e) {
                    fuzz::violation(std::string("NotFoundError for a listed name: ") + e.what());
                } catch (const aero::NotLocalError& e) {
                    fuzz::violation(std::string("NotLocalError from a set: ") + e.what());
                }
            });
        }
        for (std::size_t i = 0; i < s.part_count(); ++i) {
            fuzz::guarded("part", [&] { s.part(i).tensor_names(); });
            fuzz::guarded("verify_part", [&] { s.verify_part(i); });
        }
        fuzz::guarded("metadata_json", [&] { s.metadata_json(); });
        fuzz::check_report(s.validate(false), false, "set validate(false)");
        fuzz::check_report(s.validate(true), false, "set validate(true)");
    });
    return 0;
}
