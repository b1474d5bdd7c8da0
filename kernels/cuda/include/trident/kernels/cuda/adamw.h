#pragma once
// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) over many tensors per launch, and
// the global gradient squared norm used for clipping. fp32 master weights and moments.
//   g = grad · grad_scale
//   m = β1·m + (1 − β1)·g;   v = β2·v + (1 − β2)·g²
//   p = p − lr·( (m / (1 − β1^step)) / (sqrt(v / (1 − β2^step)) + eps) + weight_decay·p )
// where step counts from 1. When param_bf16 is set the updated weight is also written there
// in bf16 (the copy the forward pass reads).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <span>

namespace trident::kernels::cuda {

struct AdamWTensor {
    float* param = nullptr;
    const float* grad = nullptr;
    float* exp_avg = nullptr;
    float* exp_avg_sq = nullptr;
    __nv_bfloat16* param_bf16 = nullptr; // optional
    std::int64_t numel = 0;
};

struct AdamWConfig {
    float lr = 1e-4f;
    float beta1 = 0.9f;
    float beta2 = 0.95f;
    float eps = 1e-8f;
    float weight_decay = 0.1f;
    int step = 1;
    float grad_scale = 1.0f; // e.g. the clipping coefficient max_norm / ‖g‖
};

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config,
                cudaStream_t stream);

struct GradientView {
    const float* data = nullptr;
    std::int64_t numel = 0;
};

// out (one fp32 on the device) += Σ over all tensors of Σ g². Zero it first; sqrt on the host
// or in the caller's next kernel after any all-reduce across data-parallel ranks.
void gradient_squared_norm(float* out, std::span<const GradientView> grads, cudaStream_t stream);

} // namespace trident::kernels::cuda
