// Causal flash-attention backward (FlashAttention-2, Alg. 2, parallel over key blocks).
// A block of 4 warps owns 64 keys of one (batch, kv head), 16 keys per warp, and visits every
// query block at or after the diagonal for each query head of its kv group. Per visit, each
// warp recomputes Sᵀ = K·Qᵀ for its keys, Pᵀ = exp(scale·Sᵀ − lse), dPᵀ = V·dOᵀ and
// dSᵀ = Pᵀ ∘ (dPᵀ − delta), adding Pᵀ·dO to dV and dSᵀ·Q to dK in registers. dSᵀ goes to
// shared memory so the warps can share out dQ = dS·K for the query block, which they add to
// the fp32 workspace with atomics; a last kernel scales it and rounds it to bf16.
#include "flash_attention_common.cuh"
#include "launch.h"

#include <cmath>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

// delta[b, h, t] = Σ_d dout·out: one warp per (b, t, h) row.
template <int D>
__global__ void attention_delta_kernel(float* delta, const __nv_bfloat16* dout,
                                       const __nv_bfloat16* out, std::int64_t rows, int seq,
                                       int heads) {
    const std::int64_t row =
        (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    float acc = 0.0f;
#pragma unroll
    for (int c = lane * 2; c < D; c += 64) {
        const float2 a =
            __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dout + row * D + c));
        const float2 o =
            __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(out + row * D + c));
        acc += a.x * o.x + a.y * o.y;
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (lane == 0) {
        const std::int64_t h = row % heads;
        const std::int64_t bt = row / heads;
        const std::int64_t b = bt / seq;
        const std::int64_t t = bt % seq;
        delta[(b * heads + h) * seq + t] = acc;
    }
}

__global__ void scale_to_bf16_kernel(__nv_bfloat16* dst, const float* src, std::int64_t n,
                                     float scale) {
    for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
         i < n; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x * 4) {
        const float4 x = *reinterpret_cast<const float4*>(src + i);
        *reinterpret_cast<__nv_bfloat162*>(dst + i) =
            __floats2bfloat162_rn(x.x * scale, x.y * scale);
        *reinterpret_cast<__nv_bfloat162*>(dst + i + 2) =
            __floats2bfloat162_rn(x.z * scale, x.w * scale);
    }
}

// p[0] += x, p[1] += y; one 8-byte atomic on sm_90 (p is 8-byte aligned).
__device__ __forceinline__ void add_pair(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));
#else
    atomicAdd(p, x);
    atomicAdd(p + 1, y);
#endif
}

template <int D, int kBlockQ>
__global__ void __launch_bounds__(kAttentionThreads)
    flash_backward_kernel(__nv_bfloat16* dk, __nv_bfloat16* dv, float* dq_accum,
                          const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                          const __nv_bfloat16* v, const float* lse, const float* delta, int seq,
                          int heads, int kv_heads, float scale_log2, float scale) {
    constexpr int kLd = D + 8;
    constexpr int kLdS = kBlockQ + 8;
    constexpr int kQTiles = kBlockQ / 8;
    constexpr int kDTiles = D / 8;
    constexpr int kRowTiles = kBlockQ / 16;                // dQ row tiles per query block
    constexpr int kColSplit = kAttentionWarps / kRowTiles; // warps sharing one row tile
    constexpr int kDW = D / kColSplit;                     // dQ columns per warp
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // [K | V | Q0 | Q1 | dO0 | dO1 | dSᵀ | lse0 | lse1 | delta0 | delta1]: Q, dO and the row
    // statistics are double-buffered so the next query block loads during this one's maths.
    auto* sk = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* sv = sk + kKeyBlock * kLd;
    __nv_bfloat16* sq_base = sv + kKeyBlock * kLd;
    __nv_bfloat16* sdo_base = sq_base + 2 * kBlockQ * kLd;
    __nv_bfloat16* sds = sdo_base + 2 * kBlockQ * kLd;
    auto* slse_base = reinterpret_cast<float*>(sds + kKeyBlock * kLdS);
    float* sdelta_base = slse_base + 2 * kBlockQ;

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int kb = blockIdx.x;
    const int hk = blockIdx.y;
    const int b = blockIdx.z;
    const int group = heads / kv_heads;
    const std::int64_t q_stride = static_cast<std::int64_t>(heads) * D;
    const std::int64_t kv_stride = static_cast<std::int64_t>(kv_heads) * D;
    const int k0 = kb * kKeyBlock;
    const std::int64_t kv_offset = (static_cast<std::int64_t>(b) * seq + k0) * kv_stride + hk * D;
    load_tile_async<D>(sk, k + kv_offset, kv_stride, kKeyBlock);
    load_tile_async<D>(sv, v + kv_offset, kv_stride, kKeyBlock);
    cp_async_commit();

    // Visits: every query head of the kv group × every query block from the diagonal on.
    const int q_first = (k0 / kBlockQ) * kBlockQ;
    const int q_blocks = (seq - q_first) / kBlockQ;
    const int visits = group * q_blocks;
    const auto visit_head = [&](int it) { return hk * group + it / q_blocks; };
    const auto visit_q0 = [&](int it) { return q_first + (it % q_blocks) * kBlockQ; };
    const auto prefetch = [&](int it, int stage) {
        const std::int64_t q_offset =
            (static_cast<std::int64_t>(b) * seq + visit_q0(it)) * q_stride + visit_head(it) * D;
        load_tile_async<D>(sq_base + stage * kBlockQ * kLd, q + q_offset, q_stride, kBlockQ);
        load_tile_async<D>(sdo_base + stage * kBlockQ * kLd, dout + q_offset, q_stride, kBlockQ);
        cp_async_commit();
    };
    prefetch(0, 0);

    float dk_acc[kDTiles][4];
    float dv_acc[kDTiles][4];
#pragma unroll
    for (int j = 0; j < kDTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk_acc[j][e] = dv_acc[j][e] = 0.0f;
    const int key_a = k0 + warp * 16 + g;
    const int key_b = key_a + 8;
    const int rt = warp % kRowTiles;
    const int cw = warp / kRowTiles;

    for (int it = 0; it < visits; ++it) {
        const int stage = it & 1;
        const int h = visit_head(it);
        const int q0 = visit_q0(it);
        const __nv_bfloat16* sq = sq_base + stage * kBlockQ * kLd;
        const __nv_bfloat16* sdo = sdo_base + stage * kBlockQ * kLd;
        float* slse = slse_base + stage * kBlockQ;
        float* sdelta = sdelta_base + stage * kBlockQ;
        if (it + 1 < visits) {
            prefetch(it + 1, stage ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        if (threadIdx.x < kBlockQ) {
            const std::int64_t row = (static_cast<std::int64_t>(b) * heads + h) * seq + q0;
            slse[threadIdx.x] = lse[row + threadIdx.x] * kLog2e;
            sdelta[threadIdx.x] = delta[row + threadIdx.x];
        }
        __syncthreads();

        {
            float pt[kQTiles][4];
            float dpt[kQTiles][4];
#pragma unroll
            for (int j = 0; j < kQTiles; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) pt[j][e] = dpt[j][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                unsigned ka[4], va[4];
                load_a(ka, sk + warp * 16 * kLd + kk * 16, kLd, lane);
                load_a(va, sv + warp * 16 * kLd + kk * 16, kLd, lane);
#pragma unroll
                for (int np = 0; np < kQTiles / 2; ++np) {
                    unsigned bq[4], bo[4];
                    load_b_nk(bq, sq + np * 16 * kLd + kk * 16, kLd, lane);
                    load_b_nk(bo, sdo + np * 16 * kLd + kk * 16, kLd, lane);
                    mma_bf16(pt[2 * np], ka, bq[0], bq[1]);
                    mma_bf16(pt[2 * np + 1], ka, bq[2], bq[3]);
                    mma_bf16(dpt[2 * np], va, bo[0], bo[1]);
                    mma_bf16(dpt[2 * np + 1], va, bo[2], bo[3]);
                }
            }

            const bool diagonal = q0 < k0 + kKeyBlock;
#pragma unroll
            for (int j = 0; j < kQTiles; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = j * 8 + 2 * t + (e & 1);
                    const int key = e < 2 ? key_a : key_b;
                    float p = exp2f(pt[j][e] * scale_log2 - slse[col]);
                    if (diagonal && key > q0 + col) p = 0.0f;
                    pt[j][e] = p;
                }

                // dV += Pᵀ·dO
#pragma unroll
            for (int kk = 0; kk < kBlockQ / 16; ++kk) {
                const unsigned pa[4] = {pack_bf16(pt[2 * kk][0], pt[2 * kk][1]),
                                        pack_bf16(pt[2 * kk][2], pt[2 * kk][3]),
                                        pack_bf16(pt[2 * kk + 1][0], pt[2 * kk + 1][1]),
                                        pack_bf16(pt[2 * kk + 1][2], pt[2 * kk + 1][3])};
#pragma unroll
                for (int dp = 0; dp < kDTiles / 2; ++dp) {
                    unsigned bf[4];
                    load_b_kn(bf, sdo + kk * 16 * kLd + dp * 16, kLd, lane);
                    mma_bf16(dv_acc[2 * dp], pa, bf[0], bf[1]);
                    mma_bf16(dv_acc[2 * dp + 1], pa, bf[2], bf[3]);
                }
            }

            // dSᵀ = Pᵀ ∘ (dPᵀ − delta), kept in pt; also staged in shared memory for dQ.
#pragma unroll
            for (int j = 0; j < kQTiles; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = j * 8 + 2 * t + (e & 1);
                    pt[j][e] = pt[j][e] * (dpt[j][e] - sdelta[col]);
                }
                const int col = j * 8 + 2 * t;
                *reinterpret_cast<unsigned*>(sds + (warp * 16 + g) * kLdS + col) =
                    pack_bf16(pt[j][0], pt[j][1]);
                *reinterpret_cast<unsigned*>(sds + (warp * 16 + g + 8) * kLdS + col) =
                    pack_bf16(pt[j][2], pt[j][3]);
            }

            // dK += dSᵀ·Q (scaled at the end)
#pragma unroll
            for (int kk = 0; kk < kBlockQ / 16; ++kk) {
                const unsigned da[4] = {pack_bf16(pt[2 * kk][0], pt[2 * kk][1]),
                                        pack_bf16(pt[2 * kk][2], pt[2 * kk][3]),
                                        pack_bf16(pt[2 * kk + 1][0], pt[2 * kk + 1][1]),
                                        pack_bf16(pt[2 * kk + 1][2], pt[2 * kk + 1][3])};
#pragma unroll
                for (int dp = 0; dp < kDTiles / 2; ++dp) {
                    unsigned bf[4];
                    load_b_kn(bf, sq + kk * 16 * kLd + dp * 16, kLd, lane);
                    mma_bf16(dk_acc[2 * dp], da, bf[0], bf[1]);
                    mma_bf16(dk_acc[2 * dp + 1], da, bf[2], bf[3]);
                }
            }
            __syncthreads();

            // dQ[rows of tile rt, columns of chunk cw] += dS·K
            float dq[kDW / 8][4];
#pragma unroll
            for (int j = 0; j < kDW / 8; ++j) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < kKeyBlock / 16; ++kk) {
                unsigned a[4];
                load_a_trans(a, sds + kk * 16 * kLdS + rt * 16, kLdS, lane);
#pragma unroll
                for (int dp = 0; dp < kDW / 16; ++dp) {
                    unsigned bf[4];
                    load_b_kn(bf, sk + kk * 16 * kLd + cw * kDW + dp * 16, kLd, lane);
                    mma_bf16(dq[2 * dp], a, bf[0], bf[1]);
                    mma_bf16(dq[2 * dp + 1], a, bf[2], bf[3]);
                }
            }
            float* dq_a = dq_accum +
                          (static_cast<std::int64_t>(b) * seq + q0 + rt * 16 + g) * q_stride +
                          h * D + cw * kDW;
            float* dq_b = dq_a + 8 * q_stride;
#pragma unroll
            for (int j = 0; j < kDW / 8; ++j) {
                const int c = j * 8 + 2 * t;
                add_pair(dq_a + c, dq[j][0], dq[j][1]);
                add_pair(dq_b + c, dq[j][2], dq[j][3]);
            }
        }
        __syncthreads();
    }

    __nv_bfloat16* dk_a = dk + (static_cast<std::int64_t>(b) * seq + key_a) * kv_stride + hk * D;
    __nv_bfloat16* dv_a = dv + (static_cast<std::int64_t>(b) * seq + key_a) * kv_stride + hk * D;
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) {
        const int c = j * 8 + 2 * t;
        *reinterpret_cast<unsigned*>(dk_a + c) =
            pack_bf16(dk_acc[j][0] * scale, dk_acc[j][1] * scale);
        *reinterpret_cast<unsigned*>(dk_a + 8 * kv_stride + c) =
            pack_bf16(dk_acc[j][2] * scale, dk_acc[j][3] * scale);
        *reinterpret_cast<unsigned*>(dv_a + c) = pack_bf16(dv_acc[j][0], dv_acc[j][1]);
        *reinterpret_cast<unsigned*>(dv_a + 8 * kv_stride + c) =
            pack_bf16(dv_acc[j][2], dv_acc[j][3]);
    }
}

template <int D, int kBlockQ>
void launch_backward(__nv_bfloat16* dk, __nv_bfloat16* dv, float* dq_accum,
                     const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                     const __nv_bfloat16* v, const float* lse, const float* delta,
                     const AttentionShape& s, cudaStream_t stream) {
    const std::size_t shared =
        static_cast<std::size_t>(2 * kKeyBlock + 4 * kBlockQ) * (D + 8) * sizeof(__nv_bfloat16) +
        static_cast<std::size_t>(kKeyBlock) * (kBlockQ + 8) * sizeof(__nv_bfloat16) +
        4 * kBlockQ * sizeof(float);
    auto kernel = flash_backward_kernel<D, kBlockQ>;
    allow_shared_bytes(kernel, shared);
    const float scale = resolved_scale(s);
    const dim3 grid(static_cast<unsigned>(s.seq / kKeyBlock), static_cast<unsigned>(s.kv_heads),
                    static_cast<unsigned>(s.batch));
    kernel<<<grid, kAttentionThreads, shared, stream>>>(
        dk, dv, dq_accum, dout, q, k, v, lse, delta, static_cast<int>(s.seq),
        static_cast<int>(s.heads), static_cast<int>(s.kv_heads), scale * kLog2e, scale);
    check_launch("flash_backward_kernel");
}

} // namespace

std::size_t flash_attention_backward_workspace_floats(const AttentionShape& s) {
    return static_cast<std::size_t>(s.batch * s.seq * s.heads * s.head_dim) +
           static_cast<std::size_t>(s.batch * s.heads * s.seq);
}

void flash_attention_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                              const __nv_bfloat16* dout, const __nv_bfloat16* q,
                              const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const __nv_bfloat16* out, const float* lse, float* workspace,
                              const AttentionShape& shape, cudaStream_t stream) {
    check_attention_shape(shape);
    const std::int64_t dq_elems = shape.batch * shape.seq * shape.heads * shape.head_dim;
    float* dq_accum = workspace;
    float* delta = workspace + dq_elems;
    require(reinterpret_cast<std::uintptr_t>(workspace) % 16 == 0, "flash_attention_backward",
            "workspace must be 16-byte aligned");
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, dq_elems * sizeof(float), stream));

    const std::int64_t rows = shape.batch * shape.seq * shape.heads;
    const auto delta_blocks = static_cast<unsigned>(ceil_div(rows * 32, 256));
    if (shape.head_dim == 64) {
        attention_delta_kernel<64><<<delta_blocks, 256, 0, stream>>>(
            delta, dout, out, rows, static_cast<int>(shape.seq), static_cast<int>(shape.heads));
        check_launch("attention_delta_kernel");
        launch_backward<64, 64>(dk, dv, dq_accum, dout, q, k, v, lse, delta, shape, stream);
    } else {
        attention_delta_kernel<128><<<delta_blocks, 256, 0, stream>>>(
            delta, dout, out, rows, static_cast<int>(shape.seq), static_cast<int>(shape.heads));
        check_launch("attention_delta_kernel");
        launch_backward<128, 32>(dk, dv, dq_accum, dout, q, k, v, lse, delta, shape, stream);
    }
    const auto convert_blocks = static_cast<unsigned>(
        std::min<std::int64_t>(ceil_div(dq_elems / 4, 256), 16 * multiprocessor_count()));
    scale_to_bf16_kernel<<<convert_blocks, 256, 0, stream>>>(dq, dq_accum, dq_elems,
                                                             resolved_scale(shape));
    check_launch("scale_to_bf16_kernel");
}

} // namespace trident::kernels::cuda
