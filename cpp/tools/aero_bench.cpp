// aero_bench SET MODE: one timed pass over every tensor of a set, for benchmarks/bench_cpp.py.
//   read           AeroSetFile + read_tensor_bytes(name) for every tensor (hash_b3 checked)
//   read_noverify  the same with verify = false
//   floor          plain pread() of the same bytes into a fresh buffer per tensor (the files and
//                  ranges are taken from the reader before the clock starts)
// Prints {"mode", "seconds", "bytes", "tensors", "sum"} (sum: a byte of each tensor, so no read is elided).
#include <aero/aero.hpp>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: aero_bench SET read|read_noverify|floor\n";
        return 2;
    }
    const std::string set_path = argv[1], mode = argv[2];
    struct Range { std::string file; std::uint64_t offset, nbytes; };
    std::vector<Range> plan;
    if (mode == "floor") {
        aero::AeroSetFile s(set_path);
        for (const auto& n : s.tensor_names()) {
            aero::TensorInfo t = s.info(n);
            plan.push_back({t.file, t.offset, t.nbytes});
        }
    }
    std::uint64_t bytes = 0, sum = 0, count = 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == "floor") {
        std::map<std::string, int> fds;
        for (const auto& r : plan) {
            int& fd = fds[r.file];
            if (fd == 0) fd = ::open(r.file.c_str(), O_RDONLY | O_CLOEXEC);
            std::vector<std::uint8_t> buf(r.nbytes);
            std::uint64_t done = 0;
            while (done < r.nbytes) {
                ssize_t k = ::pread(fd, buf.data() + done, r.nbytes - done, static_cast<off_t>(r.offset + done));
                if (k <= 0) return 1;
                done += static_cast<std::uint64_t>(k);
            }
            bytes += buf.size();
            sum += buf.empty() ? 0 : buf[buf.size() / 2];
            ++count;
        }
        for (auto& [f, fd] : fds) ::close(fd);
    } else {
        const bool verify = mode == "read";
        aero::AeroSetFile s(set_path);
        for (const auto& n : s.tensor_names()) {
            std::vector<std::uint8_t> b = s.read_tensor_bytes(n, verify);
            bytes += b.size();
            sum += b.empty() ? 0 : b[b.size() / 2];
            ++count;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "{\"mode\": \"" << mode << "\", \"seconds\": " << secs << ", \"bytes\": " << bytes
              << ", \"tensors\": " << count << ", \"sum\": " << sum << "}\n";
    return 0;
}
