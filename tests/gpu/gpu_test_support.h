#pragma once
// Helpers for the CUDA kernel tests: a fixture that skips (not fails) where no GPU is visible,
// host-side bf16 rounding, random inputs and the relative-error measure of the comparisons.
#include "trident/kernels/cuda/device_buffer.h"
#include "trident/kernels/cuda/stream.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuda_bf16.h>
#include <gtest/gtest.h>
#include <random>
#include <vector>

namespace trident::kernels::cuda::testing {

using bf16 = __nv_bfloat16;

class GpuTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (visible_device_count() == 0)
            GTEST_SKIP() << "no CUDA device visible: GPU kernel test skipped";
    }
};

// Round to nearest even, as the device's __float2bfloat16 does (finite inputs).
inline bf16 to_bf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    __nv_bfloat16_raw raw;
    raw.x = static_cast<unsigned short>(u >> 16);
    return bf16(raw);
}

inline float to_float(bf16 b) {
    const __nv_bfloat16_raw raw(b);
    const std::uint32_t u = static_cast<std::uint32_t>(raw.x) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float to_float(float f) {
    return f;
}

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float scale = 1.0f,
                                        float mean = 0.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(mean, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(gen);
    return v;
}

// Values of T, and `rounded` the same values as floats (what the device sees).
template <typename T>
std::vector<T> convert(const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        if constexpr (std::is_same_v<T, float>)
            out[i] = v[i];
        else
            out[i] = to_bf16(v[i]);
    }
    return out;
}

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_float(v[i]);
    return out;
}

// ‖got − ref‖₂ / ‖ref‖₂; infinity when got holds a NaN or infinity.
template <typename T>
double relative_error(const std::vector<T>& got, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double g = to_float(got[i]);
        if (!std::isfinite(g)) return INFINITY;
        num += (g - ref[i]) * (g - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

// Tolerance of a relative L2 error for outputs stored in T from fp32 arithmetic.
template <typename T>
constexpr double tolerance() {
    if constexpr (std::is_same_v<T, float>)
        return 2e-5;
    else
        return 8e-3;
}

} // namespace trident::kernels::cuda::testing
