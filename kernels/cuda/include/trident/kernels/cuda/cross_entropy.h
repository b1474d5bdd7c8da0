#pragma once
// Softmax cross-entropy over vocabulary-parallel logits (Megatron-LM, Shoeybi et al. 2019,
// §3: each tensor rank holds the logits of a contiguous vocabulary slice). A rank's shard is
// logits[rows × local_vocab] for global ids [vocab_start, vocab_start + local_vocab).
// targets[r] is a global id; a negative target marks an ignored row (loss 0, gradient 0).
//
// The three steps around the two all-reduces a tensor-parallel caller makes:
//   1. cross_entropy_partials: per row, the shard's max m, Σ exp(x − m) and the target's logit
//      (0 where another rank holds the target).
//   2. caller all-reduces row_max with MAX into global_max, then
//      cross_entropy_rescale_sumexp: sumexp ·= exp(m − global_max), and all-reduces sumexp
//      and target_logit with SUM.
//   3. cross_entropy_loss_and_grad: loss[r] = log Σ + global_max − target_logit, and the
//      logits are overwritten IN PLACE by (softmax − onehot) · grad_scale (the probabilities
//      are never stored; grad_scale is typically 1 / number of counted rows).
// cross_entropy_forward_backward does all three for an unsharded vocabulary in one launch.
// T is float or __nv_bfloat16; every sum is fp32.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

template <typename T>
void cross_entropy_partials(float* row_max, float* row_sumexp, float* target_logit, const T* logits,
                            const std::int32_t* targets, std::int64_t rows,
                            std::int64_t local_vocab, std::int64_t vocab_start,
                            cudaStream_t stream);

void cross_entropy_rescale_sumexp(float* row_sumexp, const float* local_max,
                                  const float* global_max, std::int64_t rows, cudaStream_t stream);

template <typename T>
void cross_entropy_loss_and_grad(float* loss, T* logits, const std::int32_t* targets,
                                 const float* global_max, const float* global_sumexp,
                                 const float* target_logit, std::int64_t rows,
                                 std::int64_t local_vocab, std::int64_t vocab_start,
                                 float grad_scale, cudaStream_t stream);

template <typename T>
void cross_entropy_forward_backward(float* loss, T* logits, const std::int32_t* targets,
                                    std::int64_t rows, std::int64_t vocab, float grad_scale,
                                    cudaStream_t stream);

} // namespace trident::kernels::cuda
