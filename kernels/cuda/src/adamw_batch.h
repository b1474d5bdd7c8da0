#pragma once
// The kernel arguments of the multi-tensor AdamW and gradient-norm launches (C++17: shared by
// adamw.cu and adamw.cpp). One launch covers up to kMaxTensors tensors and kMaxBlocks blocks;
// block b updates chunk table.chunk[b] (kChunk elements) of tensor table.tensor[b]. The whole
// struct is passed by value and stays under the 4 KiB kernel-parameter limit.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda::detail {

constexpr int kMaxTensors = 24;
constexpr int kMaxBlocks = 320;
constexpr std::int64_t kChunk = 16384;

struct BlockTable {
    unsigned char tensor[kMaxBlocks];
    int chunk[kMaxBlocks];
};

struct AdamWBatch {
    float* param[kMaxTensors];
    const float* grad[kMaxTensors];
    float* m[kMaxTensors];
    float* v[kMaxTensors];
    __nv_bfloat16* copy[kMaxTensors];
    std::int64_t numel[kMaxTensors];
    bool vector[kMaxTensors];
    BlockTable table;
};

struct NormBatch {
    const float* grad[kMaxTensors];
    std::int64_t numel[kMaxTensors];
    bool vector[kMaxTensors];
    BlockTable table;
};

struct AdamWScalars {
    float lr, beta1, beta2, eps, weight_decay, grad_scale, bias1, bias2;
};

void launch_adamw(const AdamWBatch& batch, int blocks, const AdamWScalars& scalars,
                  cudaStream_t stream);
void launch_squared_norm(const NormBatch& batch, int blocks, float* out, cudaStream_t stream);

} // namespace trident::kernels::cuda::detail
