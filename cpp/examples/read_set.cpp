// Read every tensor of an AEROSET with modelcodec's C++ reader, then validate the whole set.
#include <aero/aero.hpp>

#include <iostream>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: read_set SET_DIR_OR_INDEX_JSON\n";
        return 2;
    }
    try {
        aero::AeroSetFile set(argv[1]);  // index.aero is read now, parts when first needed
        for (const std::string& name : set.tensor_names()) {
            aero::TensorInfo t = set.info(name);                     // dtype, shape, byte length
            std::vector<std::uint8_t> bytes = set.read_tensor_bytes(name);  // hash_b3 checked
            std::cout << name << " " << t.dtype << " [";
            for (std::size_t i = 0; i < t.shape.size(); ++i) std::cout << (i ? "," : "") << t.shape[i];
            std::cout << "] " << bytes.size() << " bytes b3=" << aero::blake3_hex(bytes.data(), bytes.size()) << "\n";
        }
        aero::Report report = set.validate(/*full=*/true);  // every sha256, chunk hash and hash_b3
        std::cout << (report.ok() ? "valid" : report.first_error()->str()) << "\n";
        return report.ok() ? 0 : 1;
    } catch (const aero::FormatError& e) {  // bad data: e.rule(), e.path(), e.offset()
        std::cerr << e.what() << "\n";
        return 1;
    }
}
