#pragma once
// Units for people: bytes in the binary unit that fits them ("512 B", "45.1 MiB", "68.1 GiB")
// and FLOP rates in the decimal one ("84.0 GFLOP/s", "163.2 TFLOP/s") — used where reasons,
// logs and tables are composed, so a tiny CPU model and a 1T-parameter run both read well.
// Everything else (JSON, CSV, the code) stays in base units at full precision.
#include <cmath>
#include <cstdio>
#include <string>

namespace trident::core {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;

struct Unit {
    const char* name;
    double scale; // base units per one of these
};

// The largest of B, KiB, MiB, GiB, TiB in which `bytes` is at least 1 (B for 0).
inline Unit byte_unit(double bytes) {
    static constexpr Unit kUnits[] = {
        {"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", kGiB}, {"TiB", kGiB * 1024.0}};
    Unit u = kUnits[0];
    for (const Unit& c : kUnits)
        if (std::fabs(bytes) >= c.scale) u = c;
    return u;
}

// The largest of MFLOP/s … PFLOP/s in which the rate is at least 1 (MFLOP/s below that).
inline Unit flop_rate_unit(double flops_per_s) {
    static constexpr Unit kUnits[] = {
        {"MFLOP/s", 1e6}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15}};
    Unit u = kUnits[0];
    for (const Unit& c : kUnits)
        if (std::fabs(flops_per_s) >= c.scale) u = c;
    return u;
}

// `value` in `unit`, with `decimals` after the point: "45.1 MiB".
inline std::string in_unit(double value, const Unit& unit, int decimals = 1) {
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "%.*f %s", decimals, value / unit.scale, unit.name);
    return buffer;
}

inline std::string bytes_text(double bytes, int decimals = 1) {
    const Unit u = byte_unit(bytes);
    return in_unit(bytes, u, u.scale == 1.0 ? 0 : decimals);
}

inline std::string flop_rate_text(double flops_per_s, int decimals = 1) {
    return in_unit(flops_per_s, flop_rate_unit(flops_per_s), decimals);
}

} // namespace trident::core
