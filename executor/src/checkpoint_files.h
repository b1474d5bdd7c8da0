#pragma once
// The files of a checkpoint directory, shared by saving, loading and listing: names, the
// manifest, and each shard's size and checksum check.
#include "trident/core/json_io.h"
#include "trident/executor/checkpoint.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace trident::executor::checkpoint_files {

inline constexpr const char* kLatest = "latest_checkpointed_iteration.txt"; // Megatron's name
inline constexpr const char* kManifest = "manifest.json";

std::uint64_t checksum(const std::uint8_t* p, std::size_t n);
std::string hex(std::uint64_t v);
std::string shard_name(int rank); // "rank_00003.bin"

// 10 for "iter_0000010", nothing for any other name (an interrupted save's ".partial").
std::optional<std::int64_t> iteration_of(const std::string& name);

// The manifest of checkpoint `dir`; SpecError("--load") when missing or not JSON.
core::Json read_manifest(const std::filesystem::path& dir);

// The problem with shard `rank` of checkpoint `dir`, or "" when its size and checksum match
// (its bytes then go to *bytes_out when given).
std::string check_shard(const std::filesystem::path& dir, const core::Json& manifest, int rank,
                        std::vector<std::uint8_t>* bytes_out);
// The same for any file the manifest lists as {"file", "bytes", "checksum"} (a shard, the FP8
// amax histories).
std::string check_listed_file(const std::filesystem::path& dir, const core::Json& entry,
                              std::vector<std::uint8_t>* bytes_out);

// "tp 1 · cp 1 · ep 1 · dp 2 · pp 2 · vpp 1 · layers 2 2": a manifest's layout for people.
std::string describe_layout(const core::Json& layout);

// What is wrong with checkpoint `dir` (manifest, then every file it lists), or "" when it
// is whole.
std::string integrity_problem(const std::filesystem::path& dir);

// Rank 0's choice for `request`: the iteration to load, or −1 for a first launch.
// SpecError("--load") when the directory or the requested iteration is not there.
std::int64_t choose_iteration(const LoadRequest& request);

// For a refusal of damaged iteration `damaged`: how to load the newest whole checkpoint
// before it, or that there is none.
std::string newest_whole_hint(const std::filesystem::path& root, std::int64_t damaged);

} // namespace trident::executor::checkpoint_files
