// Dropout with position-keyed masks; see cpu.h.
#include "trident/core/hash.h"
#include "trident/kernels/cpu.h"

namespace trident::kernels::cpu {

std::uint64_t dropout_key(std::uint64_t key, std::uint64_t part) {
    return core::splitmix64(key ^ core::splitmix64(part));
}

float dropout_factor(std::uint64_t row_key, std::int64_t column, float p) {
    // The top 24 bits as a uniform number in [0, 1): kept when at or above p.
    const std::uint64_t bits = core::splitmix64(row_key ^ std::uint64_t(column)) >> 40;
    const float u = float(bits) * (1.0f / 16777216.0f);
    return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

void dropout_rows(float* x, std::int64_t rows, std::int64_t cols, const std::uint64_t* row_keys,
                  float p) {
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            x[r * cols + c] *= dropout_factor(row_keys[r], c, p);
}

} // namespace trident::kernels::cpu
