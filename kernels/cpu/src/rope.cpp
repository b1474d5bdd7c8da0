// Rotary position embedding; see cpu.h. The angles depend on (position, pair) only, so each
// row computes its D/2 cosines and sines once and applies them to every head.
#include "trident/kernels/cpu.h"

#include <cmath>
#include <vector>

namespace trident::kernels::cpu {
namespace {

void rotate(float* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
            std::int64_t D, const std::int32_t* positions, double base, float direction) {
    const std::int64_t half = D / 2;
    std::vector<double> inv_freq(static_cast<std::size_t>(half));
    for (std::int64_t i = 0; i < half; ++i)
        inv_freq[std::size_t(i)] = std::pow(base, -2.0 * double(i) / double(D));
    std::vector<float> c(inv_freq.size()), s(inv_freq.size());
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t i = 0; i < half; ++i) {
            const double angle = double(positions[r]) * inv_freq[std::size_t(i)];
            c[std::size_t(i)] = float(std::cos(angle));
            s[std::size_t(i)] = direction * float(std::sin(angle));
        }
        float* row = x + r * row_stride;
        for (std::int64_t h = 0; h < heads; ++h) {
            float* a = row + h * D;
            float* b = a + half;
            for (std::int64_t i = 0; i < half; ++i) {
                const float x0 = a[i], x1 = b[i];
                a[i] = x0 * c[std::size_t(i)] - x1 * s[std::size_t(i)];
                b[i] = x1 * c[std::size_t(i)] + x0 * s[std::size_t(i)];
            }
        }
    }
}

} // namespace

void rope_forward(float* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                  std::int64_t D, const std::int32_t* positions, double base) {
    rotate(x, rows, row_stride, heads, D, positions, base, 1.0f);
}

void rope_backward(float* dx, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                   std::int64_t D, const std::int32_t* positions, double base) {
    rotate(dx, rows, row_stride, heads, D, positions, base, -1.0f);
}

} // namespace trident::kernels::cpu
