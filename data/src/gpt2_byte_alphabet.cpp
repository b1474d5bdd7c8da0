#include "trident/data/gpt2_byte_alphabet.h"

#include <array>

namespace trident::data {
namespace {

constexpr bool stands_for_itself(int byte) {
    return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
}

constexpr std::array<char32_t, 256> make_byte_to_char() {
    std::array<char32_t, 256> table{};
    char32_t shifted = 0x100;
    for (int byte = 0; byte < 256; ++byte)
        table[std::size_t(byte)] = stands_for_itself(byte) ? char32_t(byte) : shifted++;
    return table;
}

// Self-standing bytes first in byte order, then the shifted ones: ascending code points.
constexpr std::array<std::uint8_t, 256> make_rank_to_byte() {
    std::array<std::uint8_t, 256> table{};
    std::size_t rank = 0;
    for (int byte = 0; byte < 256; ++byte)
        if (stands_for_itself(byte)) table[rank++] = std::uint8_t(byte);
    for (int byte = 0; byte < 256; ++byte)
        if (!stands_for_itself(byte)) table[rank++] = std::uint8_t(byte);
    return table;
}

constexpr std::array<char32_t, 256> kByteToChar = make_byte_to_char();
constexpr std::array<std::uint8_t, 256> kRankToByte = make_rank_to_byte();
static_assert(kByteToChar[' '] == 0x120);  // 'Ġ'
static_assert(kByteToChar[0xAD] == 0x143); // the last shifted byte, 'Ń'

// Every character of the alphabet is below U+0144, so two UTF-8 bytes at most.
void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += char(c);
    } else {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    }
}

} // namespace

char32_t gpt2_char_of_byte(std::uint8_t byte) {
    return kByteToChar[byte];
}

std::uint8_t gpt2_byte_at_rank(int rank) {
    return kRankToByte[std::size_t(rank)];
}

std::string bytes_to_gpt2_text(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) append_utf8(out, kByteToChar[b]);
    return out;
}

std::optional<std::string> gpt2_text_to_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        char32_t c;
        if (lead < 0x80) {
            c = lead;
            i += 1;
        } else if (lead >= 0xC2 && lead < 0xE0 && i + 1 < text.size() &&
                   (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
            c = char32_t(lead & 0x1F) << 6 | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
            i += 2;
        } else {
            return std::nullopt; // longer sequences are all outside the alphabet
        }
        // The alphabet is U+0021..U+0143; find the byte by its code point.
        int byte = -1;
        if (c < 0x100 && stands_for_itself(int(c)))
            byte = int(c);
        else if (c >= 0x100 && c < 0x144)
            byte = kRankToByte[188 + (c - 0x100)];
        if (byte < 0 || kByteToChar[std::size_t(byte)] != c) return std::nullopt;
        out += char(byte);
    }
    return out;
}

} // namespace trident::data
