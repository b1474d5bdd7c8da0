#include "trident/kernels/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trident::kernels::cpu {
namespace {

struct Format {
    int mantissa_bits;
    int min_normal_exponent; // of the smallest normal value, 2^e
    float max;
};

Format format_of(Fp8Kind kind) {
    return kind == Fp8Kind::e4m3 ? Format{3, -6, 448.0f} : Format{2, -14, 57344.0f};
}

} // namespace

float fp8_max(Fp8Kind kind) {
    return format_of(kind).max;
}

float fp8_round(float x, Fp8Kind kind) {
    if (std::isnan(x)) return x;
    const Format f = format_of(kind);
    const float magnitude = std::fabs(x);
    if (magnitude >= f.max) return std::copysign(f.max, x);
    if (magnitude == 0.0f) return x;
    // The spacing of representable values around |x|: 2^(e − mantissa bits) for the binade
    // [2^e, 2^(e+1)), the subnormal spacing below the smallest normal.
    int e = 0;
    std::frexp(magnitude, &e); // magnitude = m · 2^e, m in [0.5, 1)
    const int exponent = std::max(e - 1, f.min_normal_exponent);
    const float step = std::ldexp(1.0f, exponent - f.mantissa_bits);
    // nearbyint rounds ties to even under the default rounding mode; the quotient is exact
    // (a power-of-two divisor), and so is the product.
    const float rounded = std::nearbyint(magnitude / step) * step;
    return std::copysign(std::min(rounded, f.max), x);
}

float abs_max(const float* x, std::int64_t n) {
    float m = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) return x[i];
        m = std::max(m, std::fabs(x[i]));
    }
    return m;
}

float fp8_scale(float amax, Fp8Kind kind) {
    if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
    // A tiny amax overflows max / amax: the largest finite scale, as Transformer Engine clamps.
    return std::min(fp8_max(kind) / amax, std::numeric_limits<float>::max());
}

void fake_quantize(float* out, const float* x, std::int64_t n, float scale, Fp8Kind kind) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = fp8_round(x[i] * scale, kind) / scale;
}

void fake_quantize_blocks(float* out, const float* x, std::int64_t rows, std::int64_t cols,
                          std::int64_t block_rows, std::int64_t block_cols, Fp8Kind kind) {
    for_each_block(
        x, rows, cols, block_rows, block_cols,
        [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1, float amax) {
            const float scale = fp8_scale(amax, kind);
            for (std::int64_t r = r0; r < r1; ++r)
                fake_quantize(out + r * cols + c0, x + r * cols + c0, c1 - c0, scale, kind);
        });
}

float mx_decode_scale(float amax, Fp8Kind kind) {
    if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
    int e = 0;
    // In double: a subnormal amax over 448 would underflow a float.
    const double m = std::frexp(double(amax) / double(fp8_max(kind)), &e); // m in [0.5, 1)
    // log2 rounded up: e − 1 when the ratio is a power of two (m = 0.5), else e.
    const int exponent = std::clamp(m == 0.5f ? e - 1 : e, -127, 127);
    return std::ldexp(1.0f, exponent);
}

void fake_quantize_mx(float* out, const float* x, std::int64_t rows, std::int64_t cols,
                      bool contract_rows, Fp8Kind kind) {
    // Block b of line l (a row, or a column when contracting over rows): element i at
    // x[l·line_stride + i·step].
    const std::int64_t lines = contract_rows ? cols : rows, length = contract_rows ? rows : cols;
    const std::int64_t line_stride = contract_rows ? 1 : cols, step = contract_rows ? cols : 1;
    for (std::int64_t l = 0; l < lines; ++l)
        for (std::int64_t b0 = 0; b0 < length; b0 += kMxBlock) {
            const std::int64_t b1 = std::min(length, b0 + kMxBlock);
            float amax = 0.0f;
            for (std::int64_t i = b0; i < b1; ++i) {
                const float v = x[l * line_stride + i * step];
                amax = std::isnan(v) ? v : std::max(amax, std::fabs(v));
                if (std::isnan(amax)) break;
            }
            // Dividing by a power of two is exact: the stored value times the scale.
            const float scale = mx_decode_scale(amax, kind);
            for (std::int64_t i = b0; i < b1; ++i) {
                const std::int64_t at = l * line_stride + i * step;
                out[at] = fp8_round(x[at] / scale, kind) * scale;
            }
        }
}

} // namespace trident::kernels::cpu
