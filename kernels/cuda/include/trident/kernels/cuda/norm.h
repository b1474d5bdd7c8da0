#pragma once
// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) fused with the residual add
// that precedes them in a pre-norm transformer block:
//   sum = x + residual                     (stored in T: it is the next residual stream)
//   out = (sum − mean) · rstd · gamma + beta   LayerNorm, rstd = 1/sqrt(var + eps)
//   out = sum · rstd · gamma                   RMSNorm,   rstd = 1/sqrt(mean(sum²) + eps)
// Rows are tokens, cols the hidden size. T is float or __nv_bfloat16; statistics and all
// arithmetic are fp32. `residual` may be null (then sum = x). mean and rstd (fp32, one per
// row) are saved for the backward; sum may alias x or residual.
//
// Backward: dsum = d(norm)/d(sum)·dout + dsum_in, where dsum_in (may be null) is the gradient
// already arriving at `sum` from the next residual branch. dsum is the gradient of BOTH x and
// residual (the add passes it unchanged). dgamma, dbeta are fp32 and ACCUMULATED (+=): zero
// them once per step. For LayerNorm with x̂ = (sum − mean)·rstd and g = gamma·dout:
//   dsum = rstd · (g − mean(g) − x̂ · mean(g·x̂));  RMSNorm drops the mean(g) term.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

template <typename T>
void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* x,
                                const T* residual, const T* gamma, const T* beta, std::int64_t rows,
                                std::int64_t cols, float eps, cudaStream_t stream);
template <typename T>
void residual_layernorm_backward(T* dsum, float* dgamma, float* dbeta, const T* dout,
                                 const T* dsum_in, const T* sum, const T* gamma, const float* mean,
                                 const float* rstd, std::int64_t rows, std::int64_t cols,
                                 cudaStream_t stream);

template <typename T>
void residual_rmsnorm_forward(T* sum, T* out, float* rstd, const T* x, const T* residual,
                              const T* gamma, std::int64_t rows, std::int64_t cols, float eps,
                              cudaStream_t stream);
template <typename T>
void residual_rmsnorm_backward(T* dsum, float* dgamma, const T* dout, const T* dsum_in,
                               const T* sum, const T* gamma, const float* rstd, std::int64_t rows,
                               std::int64_t cols, cudaStream_t stream);

} // namespace trident::kernels::cuda
