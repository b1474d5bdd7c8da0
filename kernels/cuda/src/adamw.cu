// Multi-tensor AdamW and gradient squared-norm kernels (formulas in adamw.h, batching in
// adamw_batch.h and adamw.cpp): each block updates one chunk of kChunk elements of one tensor,
// with 16-byte accesses where every address of that tensor allows it.
#include "adamw_batch.h"
#include "device_math.cuh"
#include "trident/kernels/cuda/error.h"

namespace trident::kernels::cuda::detail {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ float adamw_one(float& p, float g, float& m, float& v,
                                           const AdamWScalars& s) {
    g *= s.grad_scale;
    m = s.beta1 * m + (1.0f - s.beta1) * g;
    v = s.beta2 * v + (1.0f - s.beta2) * g * g;
    const float update = (m / s.bias1) / (sqrtf(v / s.bias2) + s.eps);
    p -= s.lr * (update + s.weight_decay * p);
    return p;
}

__global__ void adamw_kernel(AdamWBatch batch, AdamWScalars s) {
    const int t = batch.table.tensor[blockIdx.x];
    const std::int64_t start = batch.table.chunk[blockIdx.x] * kChunk;
    const std::int64_t n = min(kChunk, batch.numel[t] - start);
    float* p = batch.param[t] + start;
    const float* g = batch.grad[t] + start;
    float* m = batch.m[t] + start;
    float* v = batch.v[t] + start;
    __nv_bfloat16* copy = batch.copy[t] ? batch.copy[t] + start : nullptr;
    std::int64_t done = 0;
    if (batch.vector[t]) {
        const std::int64_t n4 = n / 4 * 4;
        for (std::int64_t i = threadIdx.x * 4; i < n4; i += blockDim.x * 4) {
            Pack<float, 4> pv = load_pack<float, 4>(p + i);
            const Pack<float, 4> gv = load_pack<float, 4>(g + i);
            Pack<float, 4> mv = load_pack<float, 4>(m + i);
            Pack<float, 4> vv = load_pack<float, 4>(v + i);
            Pack<__nv_bfloat16, 4> cv;
#pragma unroll
            for (int k = 0; k < 4; ++k)
                cv.v[k] = __float2bfloat16(adamw_one(pv.v[k], gv.v[k], mv.v[k], vv.v[k], s));
            store_pack<float, 4>(p + i, pv);
            store_pack<float, 4>(m + i, mv);
            store_pack<float, 4>(v + i, vv);
            if (copy) store_pack<__nv_bfloat16, 4>(copy + i, cv);
        }
        done = n4;
    }
    for (std::int64_t i = done + threadIdx.x; i < n; i += blockDim.x) {
        const float out = adamw_one(p[i], g[i], m[i], v[i], s);
        if (copy) copy[i] = __float2bfloat16(out);
    }
}

__global__ void squared_norm_kernel(NormBatch batch, float* out) {
    __shared__ float scratch[32];
    const int t = batch.table.tensor[blockIdx.x];
    const std::int64_t start = batch.table.chunk[blockIdx.x] * kChunk;
    const std::int64_t n = min(kChunk, batch.numel[t] - start);
    const float* g = batch.grad[t] + start;
    float acc = 0.0f;
    std::int64_t done = 0;
    if (batch.vector[t]) {
        const std::int64_t n4 = n / 4 * 4;
        for (std::int64_t i = threadIdx.x * 4; i < n4; i += blockDim.x * 4) {
            const Pack<float, 4> gv = load_pack<float, 4>(g + i);
#pragma unroll
            for (int k = 0; k < 4; ++k) acc += gv.v[k] * gv.v[k];
        }
        done = n4;
    }
    for (std::int64_t i = done + threadIdx.x; i < n; i += blockDim.x) acc += g[i] * g[i];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) atomicAdd(out, acc);
}

} // namespace

void launch_adamw(const AdamWBatch& batch, int blocks, const AdamWScalars& scalars,
                  cudaStream_t stream) {
    adamw_kernel<<<blocks, kThreads, 0, stream>>>(batch, scalars);
    check_launch("adamw_kernel");
}

void launch_squared_norm(const NormBatch& batch, int blocks, float* out, cudaStream_t stream) {
    squared_norm_kernel<<<blocks, kThreads, 0, stream>>>(batch, out);
    check_launch("squared_norm_kernel");
}

} // namespace trident::kernels::cuda::detail
