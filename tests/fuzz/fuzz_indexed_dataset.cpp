// libFuzzer target for Megatron's indexed datasets (`--data-path P`: P.idx + P.bin): the input
// is cut into the .idx and the .bin; they must open and read back every sequence, or raise
// SpecError naming the file.
#include "fuzz_files.h"
#include "trident/core/spec_error.h"
#include "trident/data/indexed_dataset.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trident;
    const fuzz::TwoParts parts = fuzz::two_parts(data, size);
    const std::string prefix = (fuzz::scratch_dir() / "ds").string();
    fuzz::write_file(prefix + ".idx", parts.first);
    fuzz::write_file(prefix + ".bin", parts.second);
    try {
        const data::IndexedDataset dataset(prefix);
        std::vector<std::int32_t> tokens;
        for (std::int64_t s = 0; s < dataset.sequences(); ++s) {
            tokens.resize(std::size_t(dataset.length(s)));
            dataset.read(s, 0, dataset.length(s), tokens.data());
        }
    } catch (const core::SpecError&) {
    }
    return 0;
}
