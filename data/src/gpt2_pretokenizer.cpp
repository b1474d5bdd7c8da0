#include "trident/data/gpt2_pretokenizer.h"

#include "trident/data/gpt2_char_class.h"

namespace trident::data {
namespace {

// Length of the contraction ('s 't 're 've 'm 'll 'd, lower case only) at text[at], or 0.
std::size_t contraction_length(std::string_view text, std::size_t at) {
    if (text[at] != '\'' || at + 1 >= text.size()) return 0;
    const char a = text[at + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (at + 2 >= text.size()) return 0;
    const char b = text[at + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// End of the run of characters of class `kind` that starts at `at`.
std::size_t end_of_run(std::string_view text, std::size_t at, CharClass kind) {
    while (at < text.size()) {
        const Utf8Char c = decode_utf8_char(text, at);
        if (c.kind != kind) break;
        at += c.length_bytes;
    }
    return at;
}

} // namespace

bool Gpt2Pretokenizer::next(std::string_view& piece) {
    const std::size_t start = at_;
    if (start >= text_.size()) return false;
    std::size_t end;
    const Utf8Char first = decode_utf8_char(text_, start);
    if (const std::size_t n = contraction_length(text_, start); n > 0) {
        end = start + n;
    } else if (first.kind != CharClass::space) {
        end = end_of_run(text_, start, first.kind); // \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
    } else {
        // " ?X+": one plain space joins the word that follows it.
        const std::size_t after = start + 1;
        const Utf8Char second = after < text_.size() ? decode_utf8_char(text_, after) : Utf8Char{};
        if (text_[start] == ' ' && after < text_.size() && second.kind != CharClass::space) {
            end = end_of_run(text_, after, second.kind);
        } else {
            // \s+(?!\S) then \s+: a whitespace run keeps its last character for the word that
            // follows it, unless the run is that one character or ends the text.
            end = end_of_run(text_, start, CharClass::space);
            if (end < text_.size()) {
                std::size_t last = start, at = start;
                while (at < end) {
                    last = at;
                    at += decode_utf8_char(text_, at).length_bytes;
                }
                if (last > start) end = last;
            }
        }
    }
    at_ = end;
    piece = text_.substr(start, end - start);
    return true;
}

} // namespace trident::data
