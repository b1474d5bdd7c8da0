// libFuzzer target for the GPT-2-format tokenizer files (vocab.json + merges.txt): the input is
// cut into the two; they must load and encode a text, or raise SpecError naming the file.
#include "fuzz_files.h"
#include "trident/core/spec_error.h"
#include "trident/data/bpe_tokenizer.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trident;
    const fuzz::TwoParts parts = fuzz::two_parts(data, size);
    const auto vocab = fuzz::scratch_dir() / "vocab.json",
               merges = fuzz::scratch_dir() / "merges.txt";
    fuzz::write_file(vocab, parts.first);
    fuzz::write_file(merges, parts.second);
    try {
        const data::BpeTokenizer tokenizer = data::BpeTokenizer::load(vocab, merges);
        std::vector<std::int32_t> ids;
        tokenizer.encode("Hello, world: 3.14 \xc3\xa9t\xc3\xa9 <|endoftext|>", ids);
    } catch (const core::SpecError&) {
    }
    return 0;
}
