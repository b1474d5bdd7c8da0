#pragma once
// Gpt2Pretokenizer: splits text into the pieces BPE merges within, as GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does, written out by hand (no regex library). Character classes come from gpt2_char_class.h;
// invalid UTF-8 bytes are single "other" characters. The pieces concatenate back to the text.
#include <cstddef>
#include <string_view>

namespace trident::data {

class Gpt2Pretokenizer {
public:
    explicit Gpt2Pretokenizer(std::string_view text) : text_(text) {}

    // Sets `piece` to the next piece and returns true, or returns false at the end.
    bool next(std::string_view& piece);

private:
    std::string_view text_;
    std::size_t at_ = 0;
};

} // namespace trident::data
