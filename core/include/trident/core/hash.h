#pragma once
// The two small hashes Trident's deterministic generators are built from, in one place:
// splitmix64 (Steele, Lea & Flood 2014) turns a counter into well-mixed 64 bits, and FNV-1a
// (Fowler–Noll–Vo) turns a name into a seed. Both give the same numbers on every platform,
// which the layout-independent initialisation and data order rely on.
#include <cstdint>
#include <string_view>

namespace trident::core {

inline constexpr std::uint64_t kSplitmixIncrement = 0x9E3779B97F4A7C15ull;
inline constexpr std::uint64_t kFnvOffsetBasis = 1469598103934665603ull;

// splitmix64's output for counter z: advance by the increment, then mix.
constexpr std::uint64_t splitmix64(std::uint64_t z) {
    z += kSplitmixIncrement;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

constexpr std::uint64_t fnv1a(std::string_view bytes, std::uint64_t basis = kFnvOffsetBasis) {
    std::uint64_t h = basis;
    for (const char c : bytes) h = (h ^ std::uint8_t(c)) * 1099511628211ull;
    return h;
}

} // namespace trident::core
