#pragma once
// Shared pieces of the flash-attention forward and backward kernels.
#include "mma.cuh"
#include "trident/kernels/cuda/flash_attention.h"

namespace trident::kernels::cuda::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kAttentionWarps = 4;
constexpr int kAttentionThreads = 32 * kAttentionWarps;
constexpr int kKeyBlock = 64; // keys per tile; also the seq granularity

// Copies `rows` rows of D bf16 (global row stride `gstride` elements) into shared memory rows
// of stride D + 8, 16 bytes per thread per step, asynchronously.
template <int D>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* smem, const __nv_bfloat16* gmem,
                                                std::int64_t gstride, int rows) {
    constexpr int kChunks = D / 8;
    for (int i = threadIdx.x; i < rows * kChunks; i += blockDim.x) {
        const int r = i / kChunks;
        const int c = (i % kChunks) * 8;
        cp_async_16(smem + r * (D + 8) + c, gmem + r * gstride + c);
    }
}

inline float resolved_scale(const AttentionShape& s) {
    return s.softmax_scale > 0.0f ? s.softmax_scale
                                  : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

} // namespace trident::kernels::cuda::detail
