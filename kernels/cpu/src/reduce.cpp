// Passes over every parameter of the optimizer step (10^8 of them for GPT-2 124M): the global
// gradient norm's sum of squares, and zeroing the gradients. And the routed experts' gate
// backward, a per-row sum kept in strict IEEE order.
// One double accumulator in order was a serial chain of dependent adds — about 0.3 s of a
// GPT-2 step on this machine, a fifth of its non-GEMM time at sequence 1024.
#include "simd_clones.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <vector>

namespace trident::kernels::cpu {
namespace {

// Fixed chunks, summed in order afterwards: the result depends on n alone, not on the
// threads that took the chunks.
constexpr std::int64_t kChunk = 1 << 14;
constexpr int kLanes = 8; // independent accumulators: the adds pipeline and vectorise

TRIDENT_SIMD_CLONES double chunk_squares(const float* x, std::int64_t n) {
    double lane[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; ++l) lane[l] += double(x[i + l]) * double(x[i + l]);
    for (; i < n; ++i) lane[0] += double(x[i]) * double(x[i]);
    double sum = 0.0;
    for (double s : lane) sum += s;
    return sum;
}

} // namespace

double sum_of_squares(const float* x, std::int64_t n) {
    if (n <= 0) return 0.0;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(static_cast<std::size_t>(chunks));
    parallel_for(chunks, 1, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t c = first; c < last; ++c)
            partial[std::size_t(c)] =
                chunk_squares(x + c * kChunk, std::min(kChunk, n - c * kChunk));
    });
    double sum = 0.0;
    for (double p : partial) sum += p;
    return sum;
}

void fill(float* x, std::int64_t n, float value) {
    parallel_for(n, 1024, [=](std::int64_t first, std::int64_t last) {
        std::fill(x + first, x + last, value);
    });
}

namespace {

// Here, not in activation.cpp: under that file's -ffast-math GCC vectorises the sum with an
// alignment-dependent peel, so the bits would depend on where the buffers sit (layouts would
// differ); and not target_clones, whose AVX2 clone would fuse the products into FMAs.
void gated_row_backward(float* d_gate, float* d, const float* act, float gate, std::int64_t F) {
    // In order, in a register (not through d_gate: stores in the chain cost more than the adds).
    float sum = 0.0f;
    for (std::int64_t f = 0; f < F; ++f) sum += d[f] * act[f];
    *d_gate = sum;
    for (std::int64_t f = 0; f < F; ++f) d[f] *= gate;
}

} // namespace

void gated_rows_backward(float* d_gate, float* d_act, const float* act, const float* gate,
                         std::int64_t N, std::int64_t F) {
    parallel_for(N, 16, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n)
            gated_row_backward(d_gate + n, d_act + n * F, act + n * F, gate[n], F);
    });
}

} // namespace trident::kernels::cpu
