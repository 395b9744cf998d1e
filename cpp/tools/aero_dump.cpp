// aero_dump FILE_OR_SET [--set] [--no-validate]: what the C++ reader makes of a file, as one JSON
// object on stdout -- the test suite compares it with what the Python reader makes of the same file.
//
//   aero_dump --batch LIST    (LIST: 'file<TAB>PATH', 'set<TAB>PATH' or 'collect<TAB>PATH' lines --
//                              collect: AeroFile::validate_file(PATH, full) only; one JSON line each)
//
//   {"open": null | ERROR, "tensors": [{"name", "dtype", "format_dtype", "shape", "nbytes", "b3"}],
//    "read": null | ERROR (the first tensor that could not be read; reading stops there),
//    "validate": {"ok", "errors": [ERROR...], "warnings": [ERROR...]} (full validation),
//    "metadata": the index's model map (a set that opened),
//    "verdict": ERROR | "ok"}
//   ERROR = {"kind", "rule", "path", "offset", "message"}
//
// Exit status 0 when the reader behaved (a typed refusal is behaving); 3 on any other exception.
#include <aero/aero.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <typeinfo>
#include <iostream>
#include <string>

using nlohmann::ordered_json;

namespace {
ordered_json error_json(const aero::FormatError& e) {
    return {{"kind", e.kind()}, {"rule", e.rule()}, {"path", e.path()},
            {"offset", e.has_offset() ? ordered_json(e.offset()) : ordered_json(nullptr)}, {"message", e.message()}};
}
ordered_json error_json(const aero::Violation& v) {
    return {{"kind", v.kind}, {"rule", v.rule}, {"path", v.path},
            {"offset", v.has_offset ? ordered_json(v.offset) : ordered_json(nullptr)}, {"message", v.message}};
}
ordered_json other_json(const char* kind, const std::exception& e) {
    return {{"kind", kind}, {"rule", nullptr}, {"path", nullptr}, {"offset", nullptr}, {"message", e.what()}};
}

ordered_json report_json(const aero::Report& rep) {
    ordered_json errs = ordered_json::array(), warns = ordered_json::array();
    for (const auto& v : rep.violations) (v.severity == "error" ? errs : warns).push_back(error_json(v));
    return {{"ok", rep.ok()}, {"errors", errs}, {"warnings", warns}};
}

template <class R>
void run(R& r, ordered_json& out, bool validate) {
    ordered_json tensors = ordered_json::array();
    for (const auto& name : r.tensor_names()) {
        try {
            aero::TensorInfo t = r.info(name);
            std::vector<std::uint8_t> bytes = r.read_tensor_bytes(name);
            tensors.push_back({{"name", t.name}, {"dtype", t.dtype}, {"format_dtype", t.format_dtype}, {"shape", t.shape},
                               {"nbytes", t.nbytes}, {"b3", aero::blake3_hex(bytes.data(), bytes.size())}});
            if (bytes.size() != t.nbytes) throw std::logic_error("read_tensor_bytes gave the wrong length");
        } catch (const aero::FormatError& e) {
            out["read"] = error_json(e);
            out["read"]["tensor"] = name;
            break;
        } catch (const aero::NotFoundError& e) {
            out["read"] = other_json("NotFoundError", e);
            out["read"]["tensor"] = name;
            break;
        } catch (const aero::NotLocalError& e) {
            out["read"] = other_json("NotLocalError", e);
            out["read"]["tensor"] = name;
            break;
        }
    }
    out["tensors"] = tensors;
    if (validate) {
        out["validate"] = report_json(r.validate(true));
    }
}
}  // namespace

ordered_json dump(const std::string& path, bool set, bool validate, bool collect = false) {
    ordered_json out = {{"open", nullptr}, {"tensors", ordered_json::array()}, {"read", nullptr}, {"validate", nullptr}};
    try {
        if (collect) {
            out["validate"] = report_json(aero::AeroFile::validate_file(path, true));
        } else if (set) {
            aero::AeroSetFile s(path);
            run(s, out, validate);
            out["metadata"] = ordered_json::parse(s.metadata_json());
        } else {
            aero::AeroFile f(path);
            run(f, out, validate);
        }
    } catch (const aero::FormatError& e) {
        out["open"] = error_json(e);
    } catch (const aero::UsageError& e) {
        out["open"] = other_json("UsageError", e);
    } catch (const aero::NotFoundError& e) {
        out["open"] = other_json("NotFoundError", e);
    } catch (const aero::NotLocalError& e) {
        out["open"] = other_json("NotLocalError", e);
    }
    if (!out["open"].is_null()) out["verdict"] = out["open"];
    else if (!out["read"].is_null()) out["verdict"] = out["read"];
    else if (!out["validate"].is_null() && !out["validate"]["errors"].empty()) out["verdict"] = out["validate"]["errors"][0];
    else out["verdict"] = "ok";
    return out;
}

void print(const ordered_json& j) {
    std::cout << j.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << std::endl;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: aero_dump FILE_OR_SET [--set] [--no-validate] | aero_dump --batch LIST\n"
                     "  LIST: one 'file<TAB>PATH' or 'set<TAB>PATH' per line; one JSON line out per line in\n";
        return 2;
    }
    try {
        if (!std::strcmp(argv[1], "--batch") && argc >= 3) {
            std::ifstream list(argv[2]);
            std::string line;
            while (std::getline(list, line)) {
                auto tab = line.find('\t');
                if (tab == std::string::npos) continue;
                std::cerr << "start " << line << std::endl;  // (a crash names its input)
                const std::string kind = line.substr(0, tab);
                print(dump(line.substr(tab + 1), kind == "set", true, kind == "collect"));
            }
            return 0;
        }
        bool set = false, validate = true;
        for (int i = 2; i < argc; ++i) {
            if (!std::strcmp(argv[i], "--set")) set = true;
            if (!std::strcmp(argv[i], "--no-validate")) validate = false;
        }
        print(dump(argv[1], set, validate));
    } catch (const std::exception& e) {
        std::cerr << "aero_dump: unexpected " << typeid(e).name() << ": " << e.what() << "\n";
        return 3;
    }
    return 0;
}
