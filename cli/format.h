#pragma once
// Formatting numbers for people (only at the edge; everything inside stays in base units).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>

namespace trident::cli {

// 174604259328 -> "174,604,259,328"
inline std::string with_commas(std::int64_t v) {
    std::string digits = std::to_string(v < 0 ? -v : v), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return v < 0 ? "-" + out : out;
}

// 174604259328 -> "174.6B"; 124439808 -> "124.4M"
inline std::string short_count(double v) {
    const char* suffix[] = {"", "K", "M", "B", "T"};
    int i = 0;
    while (v >= 1000.0 && i < 4) {
        v /= 1000.0;
        ++i;
    }
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, i == 0 ? "%.0f%s" : "%.1f%s", v, suffix[i]);
    return buffer;
}

// "1 micro-batch", "2 micro-batches".
inline std::string count_of(std::int64_t n, const std::string& singular,
                            const std::string& plural) {
    return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

// The shortest text that reads back as exactly `v` (std::to_chars): 6.944870912e+10 stays
// 69448709120, 1.1311e-16 keeps every digit it needs. For machine-read outputs (CSV).
inline std::string exact_number(double v) {
    char buffer[32];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
    return std::string(buffer, end);
}

} // namespace trident::cli
