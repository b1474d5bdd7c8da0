#include "checkpoint_files.h"

#include "trident/core/spec_error.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace trident::executor::checkpoint_files {
namespace fs = std::filesystem;

// FNV-1a over 64-bit words (the tail bytes zero-padded): detects torn and flipped bytes at
// memory speed, which byte-wise FNV would not reach on large shards.
std::uint64_t checksum(const std::uint8_t* p, std::size_t n) {
    std::uint64_t h = 1469598103934665603ull;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    h = (h ^ tail ^ (std::uint64_t(n) << 56)) * 1099511628211ull;
    return h;
}

std::string hex(std::uint64_t v) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", (unsigned long long)v);
    return text;
}

std::string shard_name(int rank) {
    char text[32];
    std::snprintf(text, sizeof text, "rank_%05d.bin", rank);
    return text;
}

std::optional<std::int64_t> iteration_of(const std::string& name) {
    if (name.size() != 12 || name.rfind("iter_", 0) != 0) return std::nullopt;
    std::int64_t v = 0;
    for (std::size_t i = 5; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return std::nullopt;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

core::Json read_manifest(const fs::path& dir) {
    std::ifstream in(dir / kManifest);
    if (!in) throw core::SpecError("--load", "'" + (dir / kManifest).string() + "' is missing");
    try {
        return core::Json::parse(in);
    } catch (const std::exception&) {
        throw core::SpecError("--load", "'" + (dir / kManifest).string() + "' is not valid JSON");
    }
}

std::string check_shard(const fs::path& dir, const core::Json& manifest, int rank,
                        std::vector<std::uint8_t>* bytes_out) {
    const core::Json& shards = manifest.at("shards");
    if (!shards.is_array() || rank >= int(shards.size()))
        return "the manifest lists no shard for rank " + std::to_string(rank);
    return check_listed_file(dir, shards[std::size_t(rank)], bytes_out);
}

std::string check_listed_file(const fs::path& dir, const core::Json& entry,
                              std::vector<std::uint8_t>* bytes_out) {
    const fs::path path = dir / entry.at("file").get<std::string>();
    std::ifstream in(path, std::ios::binary);
    if (!in) return "'" + path.string() + "' is missing";
    std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    const auto expected = entry.at("bytes").get<std::uint64_t>();
    if (bytes.size() != expected)
        return "'" + path.string() + "' has " + std::to_string(bytes.size()) +
               " bytes, the manifest says " + std::to_string(expected) + " (truncated?)";
    if (hex(checksum(bytes.data(), bytes.size())) != entry.at("checksum").get<std::string>())
        return "'" + path.string() + "' does not match its checksum (corrupt)";
    if (bytes_out) *bytes_out = std::move(bytes);
    return {};
}

std::string describe_layout(const core::Json& l) {
    std::ostringstream s;
    s << "tp " << l.value("tp", 0) << " · cp " << l.value("cp", 0) << " · ep " << l.value("ep", 0)
      << " · dp " << l.value("dp", 0) << " · pp " << l.value("pp", 0) << " · vpp "
      << l.value("vpp", 0)
      << (l.value("distributed_optimizer", false) ? " · distributed optimizer" : "");
    if (l.contains("zero_stage")) s << " · zero-" << l["zero_stage"].get<int>();
    if (l.contains("optimizer_instances"))
        s << " · " << l["optimizer_instances"].get<std::int64_t>() << " replicas";
    if (l.contains("stage_placement") && l["stage_placement"] != "loop")
        s << " · " << l["stage_placement"].get<std::string>() << " stages";
    if (l.contains("layers_per_stage")) {
        s << " · layers";
        for (const auto& n : l["layers_per_stage"]) s << " " << n.get<std::int64_t>();
    }
    return s.str();
}

std::string integrity_problem(const fs::path& dir) {
    try {
        const core::Json manifest = read_manifest(dir);
        const int shards = int(manifest.at("shards").size());
        for (int r = 0; r < shards; ++r)
            if (std::string problem = check_shard(dir, manifest, r, nullptr); !problem.empty())
                return problem;
        if (const auto fp8 = manifest.find("fp8_amax_history"); fp8 != manifest.end())
            return check_listed_file(dir, *fp8, nullptr);
        return {};
    } catch (const core::SpecError& e) {
        return e.reason();
    } catch (const std::exception& e) {
        return std::string("malformed manifest: ") + e.what();
    }
}

} // namespace trident::executor::checkpoint_files
