#pragma once
// GPT-2's reversible mapping between bytes and printable Unicode characters, used to write
// byte-level tokens into vocab.json and merges.txt: the 188 bytes that are printable Latin-1
// ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 (controls, space, DEL,
// NBSP, soft hyphen) are shifted to U+0100.. in byte order, so the space byte becomes 'Ġ'.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trident::data {

// The code point that stands for `byte`.
char32_t gpt2_char_of_byte(std::uint8_t byte);

// The 256 bytes in GPT-2's vocabulary order (sorted by their code points): the first 256 token
// ids of GPT-2's vocab.json, and of every vocabulary `BpeTokenizer::train` writes.
std::uint8_t gpt2_byte_at_rank(int rank);

// Bytes -> GPT-2 alphabet text (UTF-8), e.g. " the" -> "Ġthe".
std::string bytes_to_gpt2_text(std::string_view bytes);

// GPT-2 alphabet text (UTF-8) -> bytes; nullopt when the text is not valid UTF-8 or holds a
// character outside the alphabet (such as a plain space).
std::optional<std::string> gpt2_text_to_bytes(std::string_view text);

} // namespace trident::data
