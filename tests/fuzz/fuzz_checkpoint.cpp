// libFuzzer target for checkpoint files (`--load`, `trident checkpoint verify|list`): the input
// is cut into a manifest.json and rank 0's shard. The shard bytes are parsed on their own (as
// loading does after the checksum matched), then the directory is checked as a whole. Any bytes
// must be accepted or raise SpecError.
#include "../../executor/src/checkpoint_files.h"
#include "../../executor/src/checkpoint_shard.h"
#include "fuzz_files.h"
#include "trident/core/spec_error.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trident;
    const fuzz::TwoParts parts = fuzz::two_parts(data, size);
    const std::vector<std::uint8_t> shard(parts.second.begin(), parts.second.end());
    try {
        (void)executor::checkpoint_detail::parse_shard(shard, "rank_00000.bin");
    } catch (const core::SpecError&) {
    }
    const auto dir = fuzz::scratch_dir() / "iter_0000001";
    std::filesystem::create_directories(dir);
    fuzz::write_file(dir / executor::checkpoint_files::kManifest, parts.first);
    fuzz::write_file(dir / executor::checkpoint_files::shard_name(0), parts.second);
    try {
        (void)executor::checkpoint_files::integrity_problem(dir);
    } catch (const core::SpecError&) {
    }
    return 0;
}
