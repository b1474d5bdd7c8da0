#pragma once
// Numeric storage types named in specs and profiles.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace trident::core {

enum class Dtype { fp32, bf16, fp16, fp8 };

inline constexpr std::array<std::string_view, 4> kDtypeNames = {"fp32", "bf16", "fp16", "fp8"};

constexpr std::int64_t dtype_bytes(Dtype d) {
    switch (d) {
    case Dtype::fp32:
        return 4;
    case Dtype::bf16:
    case Dtype::fp16:
        return 2;
    case Dtype::fp8:
        return 1;
    }
    return 0;
}

inline std::string to_string(Dtype d) {
    return std::string(kDtypeNames[static_cast<int>(d)]);
}

// Parses one of kDtypeNames; throws SpecError naming `field` otherwise.
Dtype parse_dtype(const std::string& word, const std::string& field);

} // namespace trident::core
