#include "trident/data/gpt2_char_class.h"

#include <algorithm>
#include <array>

namespace trident::data {
namespace {

struct CodeRange {
    char32_t first, last;
    CharClass kind;
};

constexpr CharClass L = CharClass::letter, N = CharClass::number, S = CharClass::space;

// Non-ASCII ranges, sorted and disjoint; code points outside every range are "other". An
// approximation of the Unicode categories (see the header), compact enough to read.
constexpr CodeRange kRanges[] = {
    {0x0085, 0x0085, S},   {0x00A0, 0x00A0, S},   {0x00AA, 0x00AA, L},   {0x00B2, 0x00B3, N},
    {0x00B5, 0x00B5, L},   {0x00B9, 0x00B9, N},   {0x00BA, 0x00BA, L},   {0x00BC, 0x00BE, N},
    {0x00C0, 0x00D6, L},   {0x00D8, 0x00F6, L},   {0x00F8, 0x02C1, L},   {0x02C6, 0x02D1, L},
    {0x02E0, 0x02E4, L},   {0x02EC, 0x02EC, L},   {0x02EE, 0x02EE, L},   {0x0370, 0x0374, L},
    {0x0376, 0x0377, L},   {0x037A, 0x037D, L},   {0x037F, 0x037F, L},   {0x0386, 0x0386, L},
    {0x0388, 0x038A, L},   {0x038C, 0x038C, L},   {0x038E, 0x03A1, L},   {0x03A3, 0x03F5, L},
    {0x03F7, 0x0481, L},   {0x048A, 0x052F, L},   {0x0531, 0x0556, L},   {0x0559, 0x0559, L},
    {0x0560, 0x0588, L},   {0x05D0, 0x05EA, L},   {0x05EF, 0x05F2, L},   {0x0620, 0x064A, L},
    {0x0660, 0x0669, N},   {0x066E, 0x066F, L},   {0x0671, 0x06D3, L},   {0x06D5, 0x06D5, L},
    {0x06E5, 0x06E6, L},   {0x06EE, 0x06EF, L},   {0x06F0, 0x06F9, N},   {0x06FA, 0x06FC, L},
    {0x06FF, 0x06FF, L},   {0x0904, 0x0939, L},   {0x093D, 0x093D, L},   {0x0950, 0x0950, L},
    {0x0958, 0x0961, L},   {0x0966, 0x096F, N},   {0x0971, 0x0980, L},   {0x0985, 0x09B9, L},
    {0x09E6, 0x09EF, N},   {0x0E01, 0x0E30, L},   {0x0E32, 0x0E33, L},   {0x0E40, 0x0E46, L},
    {0x0E50, 0x0E59, N},   {0x10A0, 0x10C5, L},   {0x10D0, 0x10FA, L},   {0x10FC, 0x11FF, L},
    {0x1680, 0x1680, S},   {0x1E00, 0x1FBC, L},   {0x2000, 0x200A, S},   {0x2028, 0x2029, S},
    {0x202F, 0x202F, S},   {0x205F, 0x205F, S},   {0x2070, 0x2070, N},   {0x2071, 0x2071, L},
    {0x2074, 0x2079, N},   {0x207F, 0x207F, L},   {0x2080, 0x2089, N},   {0x2150, 0x2182, N},
    {0x2183, 0x2184, L},   {0x2185, 0x2189, N},   {0x2460, 0x249B, N},   {0x24EA, 0x24FF, N},
    {0x2776, 0x2793, N},   {0x2C00, 0x2CE4, L},   {0x2D00, 0x2D25, L},   {0x3000, 0x3000, S},
    {0x3005, 0x3006, L},   {0x3007, 0x3007, N},   {0x3021, 0x3029, N},   {0x3031, 0x3035, L},
    {0x3038, 0x303A, N},   {0x303B, 0x303C, L},   {0x3041, 0x3096, L},   {0x309D, 0x309F, L},
    {0x30A1, 0x30FA, L},   {0x30FC, 0x30FF, L},   {0x3105, 0x312F, L},   {0x3131, 0x318E, L},
    {0x31F0, 0x31FF, L},   {0x3220, 0x3229, N},   {0x3248, 0x324F, N},   {0x3251, 0x325F, N},
    {0x3280, 0x3289, N},   {0x32B1, 0x32BF, N},   {0x3400, 0x4DBF, L},   {0x4E00, 0x9FFF, L},
    {0xA000, 0xA48C, L},   {0xA640, 0xA66E, L},   {0xA680, 0xA69D, L},   {0xA722, 0xA788, L},
    {0xA78B, 0xA7CA, L},   {0xAC00, 0xD7A3, L},   {0xF900, 0xFA6D, L},   {0xFA70, 0xFAD9, L},
    {0xFB00, 0xFB06, L},   {0xFB1D, 0xFB1D, L},   {0xFB1F, 0xFB28, L},   {0xFB2A, 0xFB4F, L},
    {0xFB50, 0xFBB1, L},   {0xFBD3, 0xFD3D, L},   {0xFE70, 0xFEFC, L},   {0xFF10, 0xFF19, N},
    {0xFF21, 0xFF3A, L},   {0xFF41, 0xFF5A, L},   {0xFF66, 0xFFBE, L},   {0x10400, 0x1044F, L},
    {0x1D400, 0x1D6A5, L}, {0x1D7CE, 0x1D7FF, N}, {0x1F100, 0x1F10C, N}, {0x20000, 0x2A6DF, L},
    {0x2A700, 0x2EBE0, L}, {0x2F800, 0x2FA1D, L}, {0x30000, 0x3134A, L},
};

constexpr bool sorted_and_disjoint() {
    for (std::size_t i = 0; i < std::size(kRanges); ++i) {
        if (kRanges[i].first > kRanges[i].last) return false;
        if (i > 0 && kRanges[i - 1].last >= kRanges[i].first) return false;
    }
    return true;
}
static_assert(sorted_and_disjoint());

constexpr std::array<CharClass, 128> make_ascii_classes() {
    std::array<CharClass, 128> table{};
    for (int c = 0; c < 128; ++c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            table[std::size_t(c)] = L;
        else if (c >= '0' && c <= '9')
            table[std::size_t(c)] = N;
        else if (c == ' ' || (c >= '\t' && c <= '\r'))
            table[std::size_t(c)] = S;
        else
            table[std::size_t(c)] = CharClass::other;
    }
    return table;
}

constexpr std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

unsigned byte_at(std::string_view text, std::size_t at) {
    return static_cast<unsigned char>(text[at]);
}

} // namespace

CharClass gpt2_char_class(char32_t code_point) {
    if (code_point < 0x80) return kAsciiClasses[code_point];
    const auto* end = std::end(kRanges);
    const auto* range =
        std::upper_bound(std::begin(kRanges), end, code_point, [](char32_t c, const CodeRange& r) {
            return c < r.first;
        }); // first range after c
    if (range == std::begin(kRanges)) return CharClass::other;
    --range;
    return code_point <= range->last ? range->kind : CharClass::other;
}

Utf8Char decode_utf8_char(std::string_view text, std::size_t at) {
    const unsigned lead = byte_at(text, at);
    if (lead < 0x80) return {1, kAsciiClasses[lead]};
    std::size_t length;
    char32_t c;
    char32_t min_value; // smaller values are overlong encodings
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2, c = lead & 0x1F, min_value = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3, c = lead & 0x0F, min_value = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4, c = lead & 0x07, min_value = 0x10000;
    } else {
        return {1, CharClass::other};
    }
    if (at + length > text.size()) return {1, CharClass::other};
    for (std::size_t i = 1; i < length; ++i) {
        const unsigned next = byte_at(text, at + i);
        if ((next & 0xC0) != 0x80) return {1, CharClass::other};
        c = (c << 6) | (next & 0x3F);
    }
    if (c < min_value || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {1, CharClass::other};
    return {length, gpt2_char_class(c)};
}

} // namespace trident::data
