#include "trident/kernels/nvfp4.h"

#include "trident/kernels/fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace trident::kernels::cpu {
namespace {

// E2M1's spacing around a magnitude: 0.5 below 2 (0, 0.5, 1, 1.5), 1 up to 4 (2, 3), 2 to 6.
float e2m1_step(float magnitude) {
    return magnitude < 2.0f ? 0.5f : magnitude < 4.0f ? 1.0f : 2.0f;
}

// A uniform number in [0, 1) from the element's index (SplitMix64 finaliser, Steele et al.
// 2014): the same stream on every run, whatever the thread count.
float uniform_of(std::uint64_t seed, std::uint64_t index) {
    std::uint64_t z = seed ^ (index * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(z >> 40) * 0x1.0p-24f;
}

// The fixed random signs of the transform's columns (a constant table, as Transformer Engine
// keeps one cached sign vector).
constexpr int kSigns[kNvfp4Block] = {1, -1, 1, 1, -1, 1, -1, -1, 1, 1, -1, 1, -1, 1, 1, -1};

// Element i of the 16-long line starting at `base`, `stride` apart.
struct Line {
    std::int64_t base, stride;
    std::int64_t at(std::int64_t i) const { return base + i * stride; }
};

// y = M x over one full 16-line (inverse: x = Mᵀ y).
void hadamard_line(float* data, const Line& line, bool inverse) {
    float in[kNvfp4Block], out[kNvfp4Block];
    for (int i = 0; i < kNvfp4Block; ++i) in[i] = data[line.at(i)];
    for (int r = 0; r < kNvfp4Block; ++r) {
        float s = 0.0f;
        for (int c = 0; c < kNvfp4Block; ++c)
            s += (inverse ? nvfp4_hadamard(c, r) : nvfp4_hadamard(r, c)) * in[c];
        out[r] = s;
    }
    for (int i = 0; i < kNvfp4Block; ++i) data[line.at(i)] = out[i];
}

// The contraction dimension's full 16-lines of a [rows × cols] matrix (a partial edge block is
// left as it is: Megatron pads NVFP4 tensors to multiples of 128).
template <typename F>
void for_each_line(std::int64_t rows, std::int64_t cols, bool contract_rows, F&& f) {
    const std::int64_t lines = contract_rows ? cols : rows, length = contract_rows ? rows : cols;
    for (std::int64_t l = 0; l < lines; ++l)
        for (std::int64_t b = 0; b + kNvfp4Block <= length; b += kNvfp4Block)
            f(contract_rows ? Line{b * cols + l, cols} : Line{l * cols + b, 1});
}

} // namespace

float e2m1_round(float x) {
    if (std::isnan(x)) return x;
    const float m = std::fabs(x);
    if (m >= kE2m1Max) return std::copysign(kE2m1Max, x);
    const float step = e2m1_step(m);
    // nearbyint: ties to even, which on this grid is the even mantissa (1 of 1, 1.5; 2 of 2, 3).
    return std::copysign(std::min(std::nearbyint(m / step) * step, kE2m1Max), x);
}

float e2m1_round_stochastic(float x, float uniform) {
    if (std::isnan(x)) return x;
    const float m = std::fabs(x);
    if (m >= kE2m1Max) return std::copysign(kE2m1Max, x);
    const float step = e2m1_step(m);
    const float lower = std::floor(m / step) * step;
    const float upper = lower + step;
    return std::copysign(uniform < (m - lower) / step ? upper : lower, x);
}

float nvfp4_hadamard(int r, int c) {
    // Sylvester's H16: (−1)^popcount(r & c); times the column's sign; / √16.
    const float h = (std::popcount(unsigned(r & c)) & 1) ? -1.0f : 1.0f;
    return h * float(kSigns[c]) * 0.25f;
}

float nvfp4_tensor_amax(const float* x, std::int64_t rows, std::int64_t cols,
                        const Nvfp4Layout& layout) {
    if (!layout.hadamard) return abs_max(x, rows * cols);
    std::vector<float> t(x, x + rows * cols);
    for_each_line(rows, cols, layout.contract_rows,
                  [&](const Line& line) { hadamard_line(t.data(), line, false); });
    return abs_max(t.data(), rows * cols);
}

void fake_quantize_nvfp4(float* out, const float* x, std::int64_t rows, std::int64_t cols,
                         float tensor_amax, const Nvfp4Layout& layout) {
    std::copy(x, x + rows * cols, out);
    if (layout.hadamard)
        for_each_line(rows, cols, layout.contract_rows,
                      [&](const Line& line) { hadamard_line(out, line, false); });
    // s_global maps the tensor's amax onto E4M3's largest block scale times E2M1's largest
    // value (448 · 6): every block scale then fits E4M3.
    const float global = tensor_amax > 0.0f && std::isfinite(tensor_amax)
                             ? tensor_amax / (fp8_max(Fp8Kind::e4m3) * kE2m1Max)
                             : 1.0f;
    // Blocks: 16 × 16 tiles, or 1 × 16 along the contraction dimension.
    const std::int64_t block_rows = layout.square_blocks || layout.contract_rows ? kNvfp4Block : 1;
    const std::int64_t block_cols = layout.square_blocks || !layout.contract_rows ? kNvfp4Block : 1;
    const auto quantize_block = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0,
                                    std::int64_t c1, float amax) {
        if (std::isnan(amax)) return; // NaN stays NaN
        const float block = fp8_round(amax / kE2m1Max / global, Fp8Kind::e4m3) * global;
        for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = c0; c < c1; ++c) {
                float& v = out[r * cols + c];
                if (block == 0.0f) {
                    v = 0.0f;
                    continue;
                }
                const float scaled = v / block;
                v = (layout.stochastic
                         ? e2m1_round_stochastic(
                               scaled, uniform_of(layout.seed, std::uint64_t(r * cols + c)))
                         : e2m1_round(scaled)) *
                    block;
            }
    };
    for_each_block(out, rows, cols, block_rows, block_cols, quantize_block);
    if (layout.hadamard)
        for_each_line(rows, cols, layout.contract_rows,
                      [&](const Line& line) { hadamard_line(out, line, true); });
}

} // namespace trident::kernels::cpu
