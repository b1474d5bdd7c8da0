#pragma once
// Causal flash attention (Dao et al. 2022, FlashAttention; Dao 2023, FlashAttention-2) for
// bf16 inputs with fp32 accumulation on the tensor cores (mma.sync m16n8k16).
//
// Layouts (row-major, "bshd"): q and out are [batch × seq × heads × head_dim]; k and v are
// [batch × seq × kv_heads × head_dim]; query head h reads kv head h / (heads / kv_heads)
// (grouped-query attention, Ainslie et al. 2023). lse is [batch × heads × seq] fp32: the
// natural log of Σ_j exp(scale · q·k_j) over the visible keys j ≤ i, saved by the forward so
// the backward can recompute the probabilities without a second softmax pass.
//
// The forward never stores the seq × seq probabilities: it walks the key blocks with an online
// softmax (running max and sum, rescaling the output accumulator). The backward recomputes
// P = exp(scale·QKᵀ − lse) block by block, with delta_i = Σ_d dout·out (FlashAttention-2,
// Alg. 2), and dS = P ∘ (dP − delta):
//   dV = Pᵀ·dO,  dK = scale · dSᵀ·Q,  dQ = scale · dS·K.
// It parallelises over key blocks; each block sums dK and dV over the query heads of its kv
// group in registers, and dQ is accumulated in an fp32 workspace with atomics.
//
// Supported: head_dim 64 or 128, seq a multiple of 64, heads a multiple of kv_heads.
#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

struct AttentionShape {
    std::int64_t batch = 1;
    std::int64_t seq = 0;
    std::int64_t heads = 1;
    std::int64_t kv_heads = 1;
    std::int64_t head_dim = 64;
    float softmax_scale = 0.0f; // 0: 1 / sqrt(head_dim)
    // Query rows per forward block: 0 chooses (128 where seq allows, else 64); 64 or 128 ask
    // for one (benchmarks compare them; 128 needs seq % 128 == 0, else 64 runs).
    int forward_block_rows = 0;
};

// Throws std::invalid_argument naming the first unsupported field.
void check_attention_shape(const AttentionShape& shape);

void flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q,
                             const __nv_bfloat16* k, const __nv_bfloat16* v,
                             const AttentionShape& shape, cudaStream_t stream);

// fp32 elements of workspace the backward needs (dq accumulator and delta).
std::size_t flash_attention_backward_workspace_floats(const AttentionShape& shape);

// dq, dk, dv are overwritten (bf16). workspace holds
// flash_attention_backward_workspace_floats(shape) floats.
void flash_attention_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                              const __nv_bfloat16* dout, const __nv_bfloat16* q,
                              const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const __nv_bfloat16* out, const float* lse, float* workspace,
                              const AttentionShape& shape, cudaStream_t stream);

// Multiply-adds of one causal pass (forward: 2 matrix products over the lower triangle;
// backward: 5), counted as in FlashAttention's benchmarks: 4·B·H·T²·D / 2 for the forward.
double flash_attention_forward_flops(const AttentionShape& shape);
double flash_attention_backward_flops(const AttentionShape& shape);

} // namespace trident::kernels::cuda
