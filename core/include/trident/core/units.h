#pragma once
// Binary units, and bytes written for people ("68.1 GiB") — used where reasons and tables are
// composed; everything else stays in bytes.
#include <cstdio>
#include <string>

namespace trident::core {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

inline std::string gib_text(double bytes) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.1f GiB", bytes / kGiB);
    return buffer;
}

} // namespace trident::core
