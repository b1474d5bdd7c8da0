#pragma once
// Numeric storage types named in specs and profiles.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace trident::core {

// fp4: NVFP4's E2M1 — a GEMM table and peak of a profile, never a model's storage dtype.
enum class Dtype { fp32, bf16, fp16, fp8, fp4 };

inline constexpr std::array<std::string_view, 5> kDtypeNames = {"fp32", "bf16", "fp16", "fp8",
                                                                "fp4"};

constexpr std::int64_t dtype_bytes(Dtype d) {
    switch (d) {
    case Dtype::fp32:
        return 4;
    case Dtype::bf16:
    case Dtype::fp16:
        return 2;
    case Dtype::fp8:
        return 1;
    case Dtype::fp4: // two to a byte: what stores FP4 counts its half bytes itself (nvfp4 casts,
        return 1;    // saved inputs); a model's precision is never FP4 (model_from_json refuses it)
    }
    return 0;
}

inline std::string to_string(Dtype d) {
    return std::string(kDtypeNames[static_cast<int>(d)]);
}

// Parses one of kDtypeNames; throws SpecError naming `field` otherwise.
Dtype parse_dtype(const std::string& word, const std::string& field);

} // namespace trident::core
