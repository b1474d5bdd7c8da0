#pragma once
// The character classes GPT-2's pre-tokenizer pattern distinguishes: \p{L} letters, \p{N}
// numbers, \s whitespace, and everything else. ASCII is classified exactly. Beyond ASCII the
// classes come from a table of ranges that covers the letters and digits of Latin-1, the Latin
// extensions, Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Bengali, Thai, Georgian,
// Hangul, Hiragana, Katakana, Bopomofo, CJK ideographs and fullwidth forms, plus Unicode's
// number forms (superscripts, fractions, Roman numerals, circled digits) and White_Space
// characters; any other code point, including combining marks, counts as "other". Scripts the
// table misses only change where words split, never the round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trident::data {

enum class CharClass : std::uint8_t { letter, number, space, other };

CharClass gpt2_char_class(char32_t code_point);

struct Utf8Char {
    std::size_t length_bytes = 1;
    CharClass kind = CharClass::other;
};

// Decodes the character that starts at text[at] (at < text.size()). A byte that does not start
// a well-formed UTF-8 sequence (stray continuation, overlong form, surrogate, beyond U+10FFFF,
// truncated) is one character of class "other", so arbitrary bytes still split and round-trip.
Utf8Char decode_utf8_char(std::string_view text, std::size_t at);

} // namespace trident::data
