// Causal flash-attention forward (FlashAttention-2 style): a block of 8 (or 4) warps owns 128
// (or 64) query rows of one (batch, head), 16 rows per warp, and walks the key blocks 0..diagonal
// with K/V tiles double-buffered in shared memory by cp.async. Per key block each warp computes S =
// Q·Kᵀ (16×64) on the tensor cores, updates its running max and sum in base 2 (exp2(x·log2 e) =
// exp(x)), rescales its output accumulator, and adds P·V with P taken straight from the S
// accumulators (the C-fragment layout of two n-tiles is the A-fragment layout of one k-step).
#include "flash_attention_common.cuh"
#include "launch.h"

#include <cmath>
#include <cstdlib>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

template <int D, int kWarps>
__global__ void __launch_bounds__(32 * kWarps)
    flash_forward_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q,
                         const __nv_bfloat16* k, const __nv_bfloat16* v, int seq, int heads,
                         int kv_heads, float scale_log2) {
    constexpr int kBlockM = 16 * kWarps;
    constexpr int kLd = D + 8;
    constexpr int kNTiles = kKeyBlock / 8; // n-tiles of S
    constexpr int kDTiles = D / 8;         // n-tiles of O
    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto* sq = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    // Stage s of K at sk(s), of V at sv(s): [Q | K0 | K1 | V0 | V1].
    auto sk = [&](int stage) { return sq + (kBlockM + stage * kKeyBlock) * kLd; };
    auto sv = [&](int stage) { return sq + (kBlockM + (2 + stage) * kKeyBlock) * kLd; };

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int blocks_m = seq / kBlockM;
    const int qb = blocks_m - 1 - static_cast<int>(blockIdx.x); // longest rows first
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    const int hk = h / (heads / kv_heads);
    const std::int64_t q_stride = static_cast<std::int64_t>(heads) * D;
    const std::int64_t kv_stride = static_cast<std::int64_t>(kv_heads) * D;
    const int q0 = qb * kBlockM;
    const __nv_bfloat16* q_tile = q + (static_cast<std::int64_t>(b) * seq + q0) * q_stride + h * D;
    const __nv_bfloat16* k_base = k + static_cast<std::int64_t>(b) * seq * kv_stride + hk * D;
    const __nv_bfloat16* v_base = v + static_cast<std::int64_t>(b) * seq * kv_stride + hk * D;

    const int n_blocks = (q0 + kBlockM + kKeyBlock - 1) / kKeyBlock;
    load_tile_async<D>(sq, q_tile, q_stride, kBlockM);
    load_tile_async<D>(sk(0), k_base, kv_stride, kKeyBlock);
    load_tile_async<D>(sv(0), v_base, kv_stride, kKeyBlock);
    cp_async_commit();

    unsigned qf[D / 16][4];
    float o[kDTiles][4];
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY};
    float l_run[2] = {0.0f, 0.0f};
    const int row_a = q0 + warp * 16 + g; // this thread's two query rows
    const int row_b = row_a + 8;

    for (int kb = 0; kb < n_blocks; ++kb) {
        const int stage = kb & 1;
        if (kb + 1 < n_blocks) {
            const std::int64_t next = static_cast<std::int64_t>(kb + 1) * kKeyBlock * kv_stride;
            load_tile_async<D>(sk(stage ^ 1), k_base + next, kv_stride, kKeyBlock);
            load_tile_async<D>(sv(stage ^ 1), v_base + next, kv_stride, kKeyBlock);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (kb == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
                load_a(qf[kk], sq + warp * 16 * kLd + kk * 16, kLd, lane);
        }

        float s[kNTiles][4];
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int np = 0; np < kNTiles / 2; ++np) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                unsigned bf[4];
                load_b_nk(bf, sk(stage) + np * 16 * kLd + kk * 16, kLd, lane);
                mma_bf16(s[2 * np], qf[kk], bf[0], bf[1]);
                mma_bf16(s[2 * np + 1], qf[kk], bf[2], bf[3]);
            }
        }

        const int k0 = kb * kKeyBlock;
        const bool diagonal = k0 + kKeyBlock > q0;
        float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = k0 + j * 8 + 2 * t + (e & 1);
                const int row = e < 2 ? row_a : row_b;
                float x = s[j][e] * scale_log2;
                if (diagonal && key > row) x = -INFINITY;
                s[j][e] = x;
                row_max[e >> 1] = fmaxf(row_max[e >> 1], x);
            }
        }
        float correction[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 1));
            row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 2));
            const float m_new = fmaxf(m_run[r], row_max[r]);
            correction[r] = exp2f(m_run[r] - m_new);
            m_run[r] = m_new;
            l_run[r] *= correction[r];
        }
#pragma unroll
        for (int j = 0; j < kDTiles; ++j) {
            o[j][0] *= correction[0];
            o[j][1] *= correction[0];
            o[j][2] *= correction[1];
            o[j][3] *= correction[1];
        }
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = exp2f(s[j][e] - m_run[e >> 1]);
                s[j][e] = p;
                l_run[e >> 1] += p;
            }
        }

#pragma unroll
        for (int kk = 0; kk < kKeyBlock / 16; ++kk) {
            const unsigned pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                                    pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                    pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < kDTiles / 2; ++dp) {
                unsigned bf[4];
                load_b_kn(bf, sv(stage) + kk * 16 * kLd + dp * 16, kLd, lane);
                mma_bf16(o[2 * dp], pa, bf[0], bf[1]);
                mma_bf16(o[2 * dp + 1], pa, bf[2], bf[3]);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    const float inv[2] = {1.0f / l_run[0], 1.0f / l_run[1]};
    __nv_bfloat16* out_a = out + (static_cast<std::int64_t>(b) * seq + row_a) * q_stride + h * D;
    __nv_bfloat16* out_b = out_a + 8 * q_stride;
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) {
        const int c = j * 8 + 2 * t;
        *reinterpret_cast<unsigned*>(out_a + c) = pack_bf16(o[j][0] * inv[0], o[j][1] * inv[0]);
        *reinterpret_cast<unsigned*>(out_b + c) = pack_bf16(o[j][2] * inv[1], o[j][3] * inv[1]);
    }
    if (t == 0) {
        float* lse_row = lse + (static_cast<std::int64_t>(b) * heads + h) * seq;
        lse_row[row_a] = (m_run[0] + log2f(l_run[0])) * kLn2;
        lse_row[row_b] = (m_run[1] + log2f(l_run[1])) * kLn2;
    }
}

template <int D, int kWarps>
void launch_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                    const __nv_bfloat16* v, const AttentionShape& s, cudaStream_t stream) {
    constexpr int kBlockM = 16 * kWarps;
    const std::size_t shared =
        static_cast<std::size_t>(kBlockM + 4 * kKeyBlock) * (D + 8) * sizeof(__nv_bfloat16);
    auto kernel = flash_forward_kernel<D, kWarps>;
    allow_shared_bytes(kernel, shared);
    const dim3 grid(static_cast<unsigned>(s.seq / kBlockM), static_cast<unsigned>(s.heads),
                    static_cast<unsigned>(s.batch));
    kernel<<<grid, 32 * kWarps, shared, stream>>>(
        out, lse, q, k, v, static_cast<int>(s.seq), static_cast<int>(s.heads),
        static_cast<int>(s.kv_heads), resolved_scale(s) * kLog2e);
    check_launch("flash_forward_kernel");
}

// Query rows per block: 128 (8 warps; each K/V tile is shared by more rows) where seq allows
// it, else 64 (4 warps). AttentionShape::forward_block_rows 64|128 asks for one, to compare.
int forward_block_rows(const AttentionShape& s) {
    int rows = s.seq % 128 == 0 ? 128 : 64;
    if (s.forward_block_rows != 0) {
        const int wanted = s.forward_block_rows;
        if (wanted == 64 || (wanted == 128 && s.seq % 128 == 0)) rows = wanted;
    }
    return rows;
}

} // namespace

void check_attention_shape(const AttentionShape& s) {
    require(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.kv_heads > 0, "flash_attention",
            "batch, seq, heads and kv_heads must be positive");
    require(s.head_dim == 64 || s.head_dim == 128, "flash_attention", "head_dim must be 64 or 128");
    require(s.seq % kKeyBlock == 0, "flash_attention", "seq must be a multiple of 64");
    require(s.heads % s.kv_heads == 0, "flash_attention", "kv_heads must divide heads");
    require(s.seq * s.heads * s.head_dim < (std::int64_t{1} << 31), "flash_attention",
            "one sequence must hold fewer than 2^31 elements");
}

void flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q,
                             const __nv_bfloat16* k, const __nv_bfloat16* v,
                             const AttentionShape& shape, cudaStream_t stream) {
    check_attention_shape(shape);
    const bool wide = forward_block_rows(shape) == 128;
    if (shape.head_dim == 64) {
        if (wide)
            launch_forward<64, 8>(out, lse, q, k, v, shape, stream);
        else
            launch_forward<64, 4>(out, lse, q, k, v, shape, stream);
    } else {
        if (wide)
            launch_forward<128, 8>(out, lse, q, k, v, shape, stream);
        else
            launch_forward<128, 4>(out, lse, q, k, v, shape, stream);
    }
}

double flash_attention_forward_flops(const AttentionShape& s) {
    return 4.0 * s.batch * s.heads * static_cast<double>(s.seq) * s.seq * s.head_dim / 2.0;
}

double flash_attention_backward_flops(const AttentionShape& s) {
    return 2.5 * flash_attention_forward_flops(s);
}

} // namespace trident::kernels::cuda
