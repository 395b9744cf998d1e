// AEROSET (local): the index JSON, index.aero and the parts, as codec/formats/aeroset.py reads a
// local set.  The index's declaration and rule ids come from <aero/generated.hpp>.
#include "internal.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aero {

namespace S = gen::schema_aeroset;
namespace A = gen::schema_aero;
using detail::Doc;
using detail::Finding;
using detail::Node;
using detail::Raised;
using detail::finding;
using detail::u64;
using K = gen::ErrorKind;

namespace {
const std::string FMT = S::FORMAT;

Finding err(K kind, const std::string& path, const std::string& rule, const std::string& msg) {
    return finding(kind, FMT, std::nullopt, path, rule, msg);
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// the relations between the set's files (schemas.aeroset.FILE_RELATIONS): the files the index lists
// (where they are listed, under which keys their path, size and digest are, which digest) and the
// records two files both describe (which fields must agree)
static_assert(S::FILE_RELATIONS_LINKED_COUNT == 1 && S::FILE_RELATIONS_AGREES_COUNT == 1,
              "the set reader walks one list of files and compares one kind of record");
const gen::Linked& FILES = S::FILE_RELATIONS_LINKED[0];
const gen::Agrees& TENSORS = S::FILE_RELATIONS_AGREES[0];

/// (where, entry) of every entry of `doc` naming a file, in declaration order; `where` is its path
/// ("index.parts[3]")
std::vector<std::pair<std::string, const nlohmann::json*>> linked_entries(const gen::Linked& decl,
                                                                          const nlohmann::json& doc,
                                                                          const std::string& root) {
    std::vector<std::pair<std::string, const nlohmann::json*>> out;
    for (std::size_t a = 0; a < decl.nat; ++a) {
        std::vector<std::pair<std::string, const nlohmann::json*>> found{{root, &doc}};
        const std::string at = decl.at[a];
        for (std::size_t start = 0; start <= at.size();) {
            const std::size_t dot = std::min(at.find('.', start), at.size());
            const std::string step = at.substr(start, dot - start);
            start = dot + 1;
            const bool many = ends_with(step, "[]");
            const std::string key = many ? step.substr(0, step.size() - 2) : step;
            std::vector<std::pair<std::string, const nlohmann::json*>> next;
            for (const auto& [where, node] : found) {
                if (!node->is_object() || !node->contains(key)) continue;
                const nlohmann::json& v = node->at(key);
                if (!many) next.emplace_back(where + "." + key, &v);
                else if (v.is_array())
                    for (std::size_t i = 0; i < v.size(); ++i)
                        next.emplace_back(where + "." + key + "[" + std::to_string(i) + "]", &v[i]);
            }
            found = std::move(next);
        }
        for (const auto& e : found)
            if (e.second->is_object()) out.push_back(e);
    }
    return out;
}

/// the first field of TENSORS.fields on which two descriptions of a tensor differ (a field the
/// source lacks is not compared); dtypes compare as the Python reader's do: by the element type
/// of the array it returns, so u8 and packed bytes are alike
std::optional<std::string> disagrees(const TensorInfo& source, const TensorInfo& target) {
    auto array_type = [](std::uint32_t code) -> std::string {
        for (std::size_t k = 0; k < A::DTYPE_ARRAY_NAMES_COUNT; ++k)
            if (A::DTYPE_ARRAY_NAMES[k].key == code) return A::DTYPE_ARRAY_NAMES[k].value;
        return "?";
    };
    for (std::size_t k = 0; k < TENSORS.nfields; ++k) {
        const std::string f = TENSORS.fields[k];
        bool differ;
        if (f == "dtype") differ = array_type(source.dtype_code) != array_type(target.dtype_code);
        else if (f == "shape") differ = source.shape != target.shape;
        else if (f == "data_len") differ = source.nbytes != target.nbytes;
        else if (f == "hash_b3") differ = !source.hash_b3.empty() && detail::lower(source.hash_b3) != detail::lower(target.hash_b3);
        else throw Error(std::string("AEROSET: the set reader has no field '") + f + "' of a tensor to compare");
        if (differ) return f;
    }
    return std::nullopt;
}

bool is_dir(const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dirname_of(const std::string& p) {
    auto k = p.find_last_of('/');
    if (k == std::string::npos) return ".";
    return k == 0 ? "/" : p.substr(0, k);
}

std::string realpath_of(const std::string& p) {
    char buf[PATH_MAX];
    if (::realpath(p.c_str(), buf) == nullptr) return "";
    return buf;
}

/// the path made absolute and normalised lexically ('.', '..', repeated '/'), as os.path.abspath
std::string abspath(const std::string& p) {
    std::string full = p;
    if (p.empty() || p[0] != '/') {
        char buf[PATH_MAX];
        full = std::string(::getcwd(buf, sizeof buf) ? buf : ".") + "/" + p;
    }
    std::vector<std::string> parts;
    for (std::size_t i = 0; i <= full.size();) {
        std::size_t j = std::min(full.find('/', i), full.size());
        const std::string c = full.substr(i, j - i);
        if (c == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!c.empty() && c != ".") {
            parts.push_back(c);
        }
        i = j + 1;
    }
    std::string out;
    for (const auto& c : parts) out += "/" + c;
    return out.empty() ? "/" : out;
}

/// `name` in the open directory `dir`, opened for reading if it is a regular file (its descriptor,
/// not its name, decides); UsageError naming `shown` otherwise (codec.io.sources.open_regular)
int open_regular(int dir, const std::string& name, const std::string& shown, const std::string& what, bool nofollow) {
    const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        const int e = errno;
        throw UsageError(shown + ": cannot open " + what + ": " + std::strerror(e));
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw UsageError(shown + ": " + what + " is not a regular file");
    }
    return fd;
}

/// the names in the directory `path`, listed again when a writer swapped in a new set while it
/// was listed (the old set's files are removed after the swap: a listing of it may lack them);
/// an empty list when it cannot be listed (codec.formats.aeroset.common.listing)
std::vector<std::string> listing(const std::string& path) {
    std::vector<std::string> names;
    for (u64 attempt = 0; attempt < S::OPEN_ATTEMPTS; ++attempt) {
        names.clear();
        const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat was{}, now{};
        if (fd < 0 || ::fstat(fd, &was) != 0) {
            if (fd >= 0) ::close(fd);
            return names;
        }
        if (DIR* d = ::fdopendir(fd)) {  // (the descriptor is the stream's from here)
            while (dirent* e = ::readdir(d)) names.push_back(e->d_name);
            ::closedir(d);
        } else {
            ::close(fd);
        }
        if (::stat(path.c_str(), &now) == 0 && now.st_dev == was.st_dev && now.st_ino == was.st_ino) break;
    }
    return names;
}

/// a set's directory or its index file -> the index file (codec.formats.aeroset.find_index)
std::string find_index(const std::string& path) {
    if (path.find("://") != std::string::npos)
        throw UsageError(path + ": a remote AEROSET: the C++ reader reads local sets only");
    if (is_dir(path)) {
        std::vector<std::string> cands;
        for (const std::string& n : listing(path))
            if (ends_with(n, S::INDEX_SUFFIX)) cands.push_back(n);
        std::sort(cands.begin(), cands.end());
        const std::string sep = ends_with(path, "/") ? "" : "/";
        if (std::find(cands.begin(), cands.end(), "model.aeroset.json") != cands.end()) return path + sep + "model.aeroset.json";
        if (cands.size() != 1)
            throw UsageError(path + ": expected one *" + S::INDEX_SUFFIX + " index, found " +
                             (cands.empty() ? std::string("none") : std::to_string(cands.size())));
        return path + sep + cands[0];
    }
    if (!ends_with(path, S::INDEX_SUFFIX) && is_file(path)) {
        detail::Mapped m(path, "AEROSET index");
        if (m.size() >= A::MAGIC_LEN && std::equal(A::MAGIC, A::MAGIC + A::MAGIC_LEN, m.data()))
            throw UsageError(path + " is a single AERO file, not an AEROSET (a directory or *" +
                             std::string(S::INDEX_SUFFIX) + "): use aero::AeroFile");
    }
    return path;
}

/// `rel` inside `base`: relative, no escape through '..' or a symlink (io.confined) -- or why not
std::pair<std::string, std::string> confined(const std::string& base, const std::string& rel) {
    if (rel.empty() || rel[0] == '/' || rel[0] == '\\' || (rel.size() > 1 && rel[1] == ':'))
        return {"", "absolute path " + detail::py_repr(rel) + " is not allowed"};
    if (rel.find('\0') != std::string::npos) return {"", detail::py_repr(rel) + " is not a usable file name"};
    const std::string root = realpath_of(base);
    if (root.empty()) return {"", "the set's directory cannot be resolved"};
    // resolve like os.path.realpath: symlinks of the parts that exist, the rest lexically
    std::vector<std::string> parts;
    std::string cur = root;
    std::size_t i = 0;
    std::vector<std::string> comps;
    while (i <= rel.size()) {
        std::size_t j = rel.find('/', i);
        if (j == std::string::npos) j = rel.size();
        comps.push_back(rel.substr(i, j - i));
        i = j + 1;
    }
    for (const auto& c : comps) {
        if (c.empty() || c == ".") continue;
        if (c == "..") {
            cur = dirname_of(cur);
            continue;
        }
        std::string next = cur == "/" ? "/" + c : cur + "/" + c;
        std::string real = realpath_of(next);
        cur = real.empty() ? next : real;
    }
    if (cur != root && cur.compare(0, root.size() + 1, root + "/") != 0)
        return {"", detail::py_repr(rel) + " leaves the directory " + detail::py_repr(base)};
    return {cur, ""};
}
}  // namespace

/// a file the index lists, opened beneath the set's directory: its descriptor, or why not
struct Held {
    int fd = -1;
    bool exists = false;  // (no descriptor, no usage error) a file that is there but not a regular file
    std::string usage;    // the UsageError that refused it
};

struct AeroSetFile::Impl {
    std::string source, base;
    SetOptions opts;
    // the set's directory, opened once: the index and every file it lists are opened relative to
    // it, all at once when the index is read (a writer swaps in a new directory and removes the
    // old one's files: an open set reads the files it holds, all of one version)
    int dir = -1;
    std::string root;  // the directory, symlinks resolved
    std::map<std::string, Held> held;  // full path -> the file
    nlohmann::json index;
    std::vector<Finding> structure;
    std::map<u64, std::size_t> shard_part;
    std::unique_ptr<AeroFile> global;
    std::vector<u64> global_sids;
    bool global_ok = false;
    std::unordered_map<std::string, std::size_t> rows;
    std::map<std::size_t, std::unique_ptr<AeroFile>> parts;
    bool parsed = false;

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl() { reset(); }

    /// nothing read, nothing held (before each attempt at opening the set)
    void reset() {
        index = nlohmann::json();
        structure.clear();
        shard_part.clear();
        global.reset();
        global_sids.clear();
        global_ok = false;
        rows.clear();
        parts.clear();
        parsed = false;
        for (auto& [path, h] : held)
            if (h.fd >= 0) ::close(h.fd);
        held.clear();
        if (dir >= 0) ::close(dir);
        dir = -1;
    }

    /// whether the set's directory is no longer the one held (a writer swapped in a new version,
    /// or is doing so)
    bool replaced() const {
        if (dir < 0) return false;
        struct stat now{}, mine{};
        if (::stat(base.c_str(), &now) != 0 || ::fstat(dir, &mine) != 0) return true;
        return now.st_dev != mine.st_dev || now.st_ino != mine.st_ino;
    }

    /// whether a file the index lists could not be opened
    bool missing() const {
        for (const auto& [path, h] : held)
            if (h.fd < 0) return true;
        return false;
    }

    Finding too_many(const std::string& path, int e) const {
        return err(K::LimitError, "index", S::rule::LIMIT,
                   path + ": cannot open it (" + std::strerror(e) + "): the files of a set are held open while it "
                   "is read (raise the limit: `ulimit -n`)");
    }

    /// `path` (inside the set, symlinks resolved) opened relative to the set's directory, one
    /// component at a time, never through a symlink
    Held open_beneath(const std::string& path) const {
        const std::string prefix = root == "/" ? root : root + "/";
        const std::string rel = path == root ? "." : path.substr(prefix.size());
        std::vector<std::string> names;
        for (std::size_t i = 0; i <= rel.size();) {
            const std::size_t j = std::min(rel.find('/', i), rel.size());
            names.push_back(rel.substr(i, j - i));
            i = j + 1;
        }
        Held h;
        std::vector<int> opened;
        int at = dir, e = 0;
        for (std::size_t k = 0; k + 1 < names.size() && e == 0; ++k) {
            const int fd = ::openat(at, names[k].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) e = errno;
            else opened.push_back(at = fd);
        }
        struct stat st{};
        if (e == 0 && ::fstatat(at, names.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) e = errno;
        if (e == 0 && !S_ISREG(st.st_mode)) {
            h.exists = true;
        } else if (e == 0) {
            try {
                h.fd = open_regular(at, names.back(), path, "AEROSET file", true);
            } catch (const UsageError& u) {
                h.usage = u.what();
            }
        }
        for (const int fd : opened) ::close(fd);
        if (e == EMFILE || e == ENFILE) detail::raise(too_many(path, e));
        if (e != 0 && e != ENOENT && e != ENOTDIR) h.usage = path + ": cannot open AEROSET file: " + std::strerror(e);
        return h;
    }

    /// open every file the index lists (those whose path is refused are left to locate's error
    /// where they are used)
    void pin() {
        for (const auto& [where, ref] : linked_entries(FILES, index, "index")) {
            std::string path;
            try {
                path = locate(*ref, where + "." + FILES.path);
            } catch (const Error&) {
                continue;
            } catch (const Raised&) {
                continue;
            }
            if (!held.count(path)) held.emplace(path, open_beneath(path));
        }
    }

    std::string locate(const nlohmann::json& ref, const std::string& where) const {
        const std::string rel = ref.at(FILES.path).get<std::string>();
        if (rel.find("://") != std::string::npos)
            throw UsageError(source + ": " + where + " is a URL (" + rel + "): the C++ reader reads local sets only");
        auto [full, why] = confined(base, rel);
        if (!why.empty()) detail::raise(err(K::StructureError, where, S::rule::PATH, why));
        return full;
    }

    /// (path, descriptor) of the file held for `ref`, which exists and is a regular file
    std::pair<std::string, int> existing(const nlohmann::json& ref, const std::string& where) {
        const std::string path = locate(ref, where);
        auto it = held.find(path);
        if (it == held.end())  // (not listed when the index was read)
            it = held.emplace(path, open_beneath(path)).first;
        const Held& h = it->second;
        if (!h.usage.empty()) throw UsageError(h.usage);
        if (h.fd < 0)
            detail::raise(err(K::StructureError, where, FILES.rule_missing,
                              ref.at(FILES.path).get<std::string>() + ": " +
                                  (h.exists ? "not a regular file" : "no such file")));
        return {path, h.fd};
    }

    /// the set's directory held, its index read and every file it lists held open; when that
    /// fails because a writer replaced the set meanwhile (the directory held is no longer the
    /// set's, and the index or a file it lists is gone), the set is opened again from its new
    /// index, at most OPEN_ATTEMPTS times: what is read is always one version, whole
    /// (codec.formats.aeroset.AeroSet._open_local)
    void open(const std::string& path) {
        bool changed = false;
        for (u64 attempt = 0; attempt < S::OPEN_ATTEMPTS; ++attempt) {
            const bool last = attempt + 1 == S::OPEN_ATTEMPTS;
            reset();
            try {
                source = find_index(path);
                hold_directory();
                structure = check();
            } catch (const Error&) {
                const bool had = dir >= 0, gone = had && replaced();
                reset();
                if (last || !(gone || (changed && !had))) throw;
                if (!had)  // no set there for a moment (a writer renaming without RENAME_EXCHANGE)
                    std::this_thread::sleep_for(std::chrono::milliseconds(2 * (attempt + 1)));
                changed = true;
                continue;
            }
            if ((structure.empty() && !missing()) || !replaced()) {
                for (const auto& f : structure)
                    if (f.severity == "error") {
                        std::string src = source;
                        detail::throw_finding(f, src);
                    }
                return;
            }
            changed = true;
        }
        reset();
        detail::throw_finding(err(K::StructureError, "index", S::rule::MISSING,
                                  "the set was replaced " + std::to_string(S::OPEN_ATTEMPTS) + " times while it was "
                                  "being opened (its files were gone before they could be opened): try again"),
                              source);
    }

    void hold_directory() {
        base = dirname_of(abspath(source));
        dir = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) {
            const int e = errno;
            throw UsageError(source + ": cannot open the set's directory: " + std::strerror(e));
        }
        root = realpath_of(base);
    }

    std::vector<Finding> check() {
        std::vector<Finding> v;
        try {
            parse(v);
        } catch (const detail::StopCheck&) {
        } catch (const Raised& r) {
            v.push_back(r.f);
        }
        return v;
    }

    void parse(std::vector<Finding>& v) {
        const std::size_t slash = source.find_last_of('/');
        const int fd = open_regular(dir, slash == std::string::npos ? source : source.substr(slash + 1), source,
                                    "AEROSET index", false);
        std::unique_ptr<detail::Mapped> mapped;
        try {
            mapped = std::make_unique<detail::Mapped>(fd, source, "AEROSET index");
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
        const detail::Mapped& m = *mapped;
        if (m.size() > S::MAX_INDEX_BYTES)
            detail::raise(err(K::LimitError, "index", S::rule::LIMIT,
                              "index is " + std::to_string(m.size()) + " bytes, over " + std::to_string(S::MAX_INDEX_BYTES)));
        detail::DecodeContext cx{FMT, std::nullopt, "index", S::rule::INDEX, S::rule::LIMIT, m.size(),
                                 gen::DECODE_OBJECTS_PER_BYTE};
        cx.lone_ok = true;  // (a path holding one is AEROSET-PATH, as in Python)
        Doc d;
        try {
            d = detail::loads_json(m.data(), m.size(), cx);
        } catch (const Raised& r) {
            if (r.f.kind != K::DecodeError) throw;
            detail::raise(err(K::DecodeError, "index", S::rule::INDEX, "not JSON: " + r.f.message));
        }
        std::vector<Finding> bad;
        detail::check_payload(S::PAYLOAD_NODES, S::PAYLOAD_Index, d, 0, FMT, std::nullopt, "index", "", bad);
        if (!bad.empty()) {
            v.insert(v.end(), bad.begin(), bad.end());
            return;
        }
        auto fmt = *d.get(0, "format");
        auto name = *d.get(fmt, "name");
        auto version = d.children(*d.get(fmt, "version"));
        bool known = false;
        for (std::size_t k = 0; k < S::VERSIONS_COUNT; ++k)
            known |= d.nodes[version[0]].type == Node::Int && d.nodes[version[1]].type == Node::Int &&
                     !d.nodes[version[0]].neg && !d.nodes[version[1]].neg &&
                     d.nodes[version[0]].v == S::VERSIONS[k][0] && d.nodes[version[1]].v == S::VERSIONS[k][1];
        if (!d.is_str(name, S::FORMAT) || !known) {
            v.push_back(err(K::UnsupportedVersionError, "index.format", S::rule::FORMAT,
                            "must be AEROSET [0, 1] or [0, 2] (got " + d.text(name) + ")"));
            return;
        }
        index = nlohmann::json::parse(d.json_text);  // (the text the checked document was decoded from)
        parsed = true;
        // a path holding a lone surrogate escape ("\ud800.aero") is not text, so it names no file:
        // refused as Python's declared check refuses every such string (payload.text_error), before
        // the text's U+FFFD could name one
        auto usable = [&](std::optional<std::uint32_t> ref, const std::string& where) {
            const auto p = ref ? d.get(*ref, FILES.path) : std::nullopt;
            if (p && d.nodes[*p].lone)
                detail::raise(err(K::DecodeError, where, S::rule::PATH, "is not valid Unicode text (a lone surrogate)"));
        };
        const auto& ps = index.at("parts");
        const auto part_refs = d.children(*d.get(0, "parts"));
        for (std::size_t i = 0; i < ps.size(); ++i) {
            usable(part_refs[i], "index.parts[" + std::to_string(i) + "]." + FILES.path);
            for (const auto& sid : ps[i].at("shards")) {
                const u64 s = sid.get<u64>();
                auto [it, fresh] = shard_part.emplace(s, i);
                if (!fresh)
                    v.push_back(err(K::StructureError, "index.parts[" + std::to_string(i) + "].shards", S::rule::SHARD,
                                    "shard " + std::to_string(s) + " is also listed by parts[" +
                                        std::to_string(it->second) + "]"));
            }
            locate(ps[i], "index.parts[" + std::to_string(i) + "]." + FILES.path);
        }
        usable(d.get(0, "global_tidx"), std::string("index.global_tidx.") + FILES.path);
        pin();  // (every file of this version held from now on)
        const auto [gpath, gfd] = existing(index.at("global_tidx"), std::string("index.global_tidx.") + FILES.path);
        try {
            global = std::make_unique<AeroFile>(detail::Access::open_held(gfd, gpath));
        } catch (const FormatError& e) {
            Finding f = finding(K::FormatError, e.format(), e.has_offset() ? std::optional<u64>(e.offset()) : std::nullopt,
                                e.path(), e.rule(), e.message());
            for (const auto& c : gen::ERROR_CLASSES)
                if (e.kind() == c.name) f.kind = c.kind;
            v.push_back(f);
            throw detail::StopCheck{};
        }
        const auto& names = global->tensor_names();
        for (std::size_t i = 0; i < names.size(); ++i) rows.emplace(names[i], i);
        global_ok = detail::Access::shard_ids(*global, global_sids);
        if (global_ok) {
            std::size_t n = 0;
            for (std::size_t i = 0; i < global_sids.size() && n < 50; ++i)
                if (!shard_part.count(global_sids[i])) {
                    v.push_back(err(K::StructureError, "index.aero TIDX " + detail::py_repr(names[i]), S::rule::SHARD,
                                    "tensor " + detail::py_repr(names[i]) + " is in shard " +
                                        std::to_string(global_sids[i]) + ", which no part lists"));
                    ++n;
                }
        }
    }

    /// a listed file's size and digest against its entry (FILES): the mismatch, if any
    std::vector<Finding> whole_findings(const nlohmann::json& ref, const std::string& where) {
        const auto [path, fd] = existing(ref, where + "." + FILES.path);
        auto [digest, size] = detail::digest_file(path, FILES.algorithm, fd);
        const std::string name = ref.at(FILES.path).get<std::string>();
        std::vector<Finding> out;
        if (FILES.size != nullptr && ref.contains(FILES.size) && ref.at(FILES.size).get<u64>() != size) {
            // a file of another size is that one finding (its digest, of other bytes, is not compared)
            out.push_back(err(K::IntegrityError, where + "." + FILES.size, FILES.rule,
                              name + " is " + std::to_string(size) + " bytes, the index says " +
                                  std::to_string(ref.at(FILES.size).get<u64>())));
            return out;
        }
        if (FILES.digest != nullptr && ref.contains(FILES.digest)) {
            const std::string want = detail::lower(ref.at(FILES.digest).get<std::string>());
            if (want != digest)
                out.push_back(err(K::IntegrityError, where + "." + FILES.digest, FILES.rule,
                                  name + " hashes to " + digest.substr(0, 16) + "..., the index says " +
                                      want.substr(0, 16) + "..."));
        }
        return out;
    }

    /// a listed file is what its entry says, before it is used (the first mismatch is raised)
    void verify_file(const nlohmann::json& ref, const std::string& where) {
        const auto bad = whole_findings(ref, where);
        if (!bad.empty()) detail::raise(bad.front());
    }

    AeroFile& part(std::size_t i) {
        auto it = parts.find(i);
        if (it != parts.end()) return *it->second;
        const auto& ps = index.at("parts");
        if (i >= ps.size())
            throw UsageError(source + ": no part " + std::to_string(i) + " (the index lists " + std::to_string(ps.size()) + ")");
        const std::string where = "index.parts[" + std::to_string(i) + "]";
        if (opts.verify_sha256) verify_file(ps[i], where);
        const auto [path, fd] = existing(ps[i], where + "." + FILES.path);
        auto f = std::make_unique<AeroFile>(detail::Access::open_held(fd, path));
        return *(parts[i] = std::move(f));
    }

    /// the index of the part listing the shard of index.aero's tensor `name` (none: no part
    /// lists it, or index.aero's entries cannot say)
    std::optional<std::size_t> part_of(const std::string& name) const {
        auto r = rows.find(name);
        if (!global_ok || r == rows.end() || r->second >= global_sids.size()) return std::nullopt;
        auto pi = shard_part.find(global_sids[r->second]);
        if (pi == shard_part.end()) return std::nullopt;
        return pi->second;
    }

    std::pair<AeroFile*, std::size_t> locate_tensor(const std::string& name) {
        auto r = rows.find(name);
        if (r == rows.end()) throw NotFoundError(source + ": no tensor named " + detail::py_repr(name));
        const u64 sid = global_sids.at(r->second);
        auto pi = shard_part.find(sid);
        if (pi == shard_part.end())
            detail::raise(err(K::StructureError, "index.aero TIDX " + detail::py_repr(name), S::rule::SHARD,
                              "no part lists shard " + std::to_string(sid)));
        const std::size_t i = pi->second;
        AeroFile& p = part(i);
        if (p.index_only())
            detail::raise(err(K::StructureError, "index.parts[" + std::to_string(i) + "]", S::rule::SHARD,
                              p.path() + " is an index-only AERO file (no weights): it cannot hold shard " +
                                  std::to_string(sid)));
        if (!p.contains(name))
            detail::raise(err(K::StructureError, "index.parts[" + std::to_string(i) + "]", TENSORS.rule,
                              p.path() + " (shard " + std::to_string(sid) + ") has no record with " + TENSORS.key +
                                  " " + detail::py_repr(name)));
        return {&p, i};
    }

    TensorInfo info(const std::string& name) {
        if (!rows.count(name)) throw NotFoundError(source + ": no tensor named " + detail::py_repr(name));
        // index.aero's own view first (its entry checks), as the Python reader does; an index-only
        // index.aero describes the tensor all the same
        const TensorInfo g = detail::Access::described(*global, name);
        auto [p, i] = locate_tensor(name);
        TensorInfo t = p->info(name);
        if (auto field = disagrees(g, t))
            detail::raise(err(K::StructureError, "index.aero TIDX " + detail::py_repr(name), TENSORS.rule,
                              p->path() + " describes " + detail::py_repr(name) + " differently from " +
                                  TENSORS.source + " (" + *field + ")"));
        return t;
    }
};

// ================================================================================ public
namespace {
template <class F>
auto guarded(const std::string& source, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const Raised& r) {
        detail::throw_finding(r.f, source);
    }
}
}  // namespace

AeroSetFile::AeroSetFile(const std::string& path, SetOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->opts = options;
    impl_->open(path);
}
AeroSetFile::~AeroSetFile() = default;
AeroSetFile::AeroSetFile(AeroSetFile&&) noexcept = default;
AeroSetFile& AeroSetFile::operator=(AeroSetFile&&) noexcept = default;

const std::string& AeroSetFile::index_path() const { return impl_->source; }
const std::vector<std::string>& AeroSetFile::tensor_names() const { return impl_->global->tensor_names(); }
bool AeroSetFile::contains(const std::string& name) const { return impl_->rows.count(name) != 0; }
std::size_t AeroSetFile::part_count() const { return impl_->index.at("parts").size(); }

TensorInfo AeroSetFile::info(const std::string& name) {
    return guarded(impl_->source, [&] { return impl_->info(name); });
}

ByteSpan AeroSetFile::tensor_span(const std::string& name, bool verify) {
    return guarded(impl_->source, [&] {
        impl_->info(name);  // resolves and cross-checks against index.aero
        return impl_->locate_tensor(name).first->tensor_span(name, verify);
    });
}

std::vector<std::uint8_t> AeroSetFile::read_tensor_bytes(const std::string& name, bool verify) {
    ByteSpan s = tensor_span(name, verify);
    return std::vector<std::uint8_t>(s.begin(), s.end());
}

AeroFile& AeroSetFile::part(std::size_t i) {
    return guarded(impl_->source, [&]() -> AeroFile& { return impl_->part(i); });
}

void AeroSetFile::verify_part(std::size_t i) {
    guarded(impl_->source, [&] {
        const auto& ps = impl_->index.at("parts");
        if (i >= ps.size()) throw UsageError(impl_->source + ": no part " + std::to_string(i));
        impl_->verify_file(ps[i], "index.parts[" + std::to_string(i) + "]");
        return 0;
    });
}

std::string AeroSetFile::metadata_json() const {
    return impl_->index.contains("model") ? impl_->index.at("model").dump() : "{}";
}

Report AeroSetFile::validate(bool full) {
    Report rep;
    auto violation = [&](const Finding& f) { return detail::to_violation(f, impl_->source); };
    auto error_violation = [&](const FormatError& e) {
        Violation v;
        v.kind = e.kind(); v.format = e.format(); v.path = e.path(); v.rule = e.rule(); v.message = e.message();
        v.severity = e.severity(); v.source = e.source(); v.has_offset = e.has_offset(); v.offset = e.offset();
        return v;
    };
    auto add = [&](const Finding& f) { rep.violations.push_back(violation(f)); };
    for (const auto& f : impl_->structure) add(f);
    if (!impl_->parsed) return rep;
    auto merge = [&](const Report& sub) {
        for (const auto& v : sub.violations) rep.violations.push_back(v);
    };
    // part index -> how the part fails to open (none: it opens), once tried; `said`: the parts whose
    // failure the report holds already (their own check found it)
    std::map<std::size_t, std::optional<Violation>> failed;
    std::set<std::size_t> said;
    // what a finding says (two raised alike are the same finding)
    auto same = [](const Violation& a, const Violation& b) {
        return a.kind == b.kind && a.format == b.format && a.rule == b.rule && a.path == b.path &&
               a.has_offset == b.has_offset && a.offset == b.offset && a.source == b.source && a.message == b.message;
    };
    const auto files = linked_entries(FILES, impl_->index, "index");
    const std::string parts_at = "index.parts[";
    if (full) {  // every listed file whole: its size and digest, then every finding of its own
        for (const auto& [where, ref] : files) {
            const std::size_t before = rep.violations.size();
            try {
                for (const auto& f : impl_->whole_findings(*ref, where)) add(f);
                const auto [path, fd] = impl_->existing(*ref, where + "." + FILES.path);
                merge(detail::Access::validate_held(fd, path, true));
            } catch (const Raised& r) {
                add(r.f);
            }
            if (rep.violations.size() > before && where.compare(0, parts_at.size(), parts_at) == 0)
                said.insert(std::stoul(where.substr(parts_at.size(), where.size() - parts_at.size() - 1)));
        }
    } else {  // the parts as they are read (a part that does not open: its first finding), then index.aero
        for (std::size_t i = 0; i < part_count(); ++i) {
            failed[i] = std::nullopt;
            try {
                merge(impl_->part(i).validate(false));
            } catch (const Raised& r) {
                add(r.f);
                failed[i] = rep.violations.back();
            } catch (const FormatError& e) {
                rep.violations.push_back(error_violation(e));
                failed[i] = rep.violations.back();
            }
        }
        merge(impl_->global->validate(false));
    }
    rep.checked.push_back(full ? "sha256, size and full AERO check (every chunk hash, every hash_b3) of " +
                                     std::to_string(files.size()) + " files"
                               : "structure of " + std::to_string(files.size()) + " files");
    for (const auto& name : tensor_names()) {
        const auto i = impl_->part_of(name);
        if (i && !failed.count(*i)) {  // (a full validation: the part tried here, first)
            failed[*i] = std::nullopt;
            std::optional<Violation> v;
            try {
                impl_->part(*i);
            } catch (const Raised& r) {
                v = violation(r.f);
            } catch (const FormatError& e) {
                v = error_violation(e);
            }
            failed[*i] = v;
            if (v && !said.count(*i)) rep.violations.push_back(*v);
        }
        std::optional<Violation> v;
        try {
            impl_->info(name);
        } catch (const Raised& r) {
            v = violation(r.f);
        } catch (const FormatError& e) {
            v = error_violation(e);
        }
        // (a part that does not open is one finding, not one per tensor it holds)
        if (v && !(i && failed[*i] && same(*v, *failed[*i]))) rep.violations.push_back(*v);
    }
    rep.checked.push_back("index, " + std::to_string(part_count()) + " parts, " + std::to_string(tensor_names().size()) +
                          " tensors resolved");
    detail::fold_truncation(rep);
    return rep;
}

}  // namespace aero
