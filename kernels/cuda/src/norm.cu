// Residual-add + LayerNorm / RMSNorm, forward and backward. See norm.h for the formulas.
// Forward: one block per row; the row's fp32 sum stays in shared memory between the passes
// (mean, variance by a second pass for accuracy, then the output). Backward: one resident
// wave of blocks walks the rows; each block keeps its dgamma/dbeta partial sums in shared
// memory and adds them to the fp32 outputs once, at the end.
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/norm.h"

#include <algorithm>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

template <typename T, int V, bool kRms>
__global__ void residual_norm_forward_kernel(T* sum, T* out, float* mean_out, float* rstd_out,
                                             const T* x, const T* residual, const T* gamma,
                                             const T* beta, std::int64_t cols, float eps) {
    extern __shared__ float srow[];
    __shared__ float scratch[32];
    const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * cols;
    const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * V;
    const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;

    float local = 0.0f;
    for (std::int64_t c = first; c < cols; c += stride) {
        Pack<T, V> sv = load_pack<T, V>(x + base + c);
        if (residual) {
            const Pack<T, V> rv = load_pack<T, V>(residual + base + c);
#pragma unroll
            for (int i = 0; i < V; ++i)
                sv.v[i] = from_float<T>(to_float(sv.v[i]) + to_float(rv.v[i]));
        }
        store_pack<T, V>(sum + base + c, sv);
#pragma unroll
        for (int i = 0; i < V; ++i) {
            const float s = to_float(sv.v[i]);
            srow[c + i] = s;
            local += kRms ? s * s : s;
        }
    }
    const float total = block_sum(local, scratch);
    float mu = 0.0f;
    float rs;
    if constexpr (kRms) {
        rs = rsqrtf(total / static_cast<float>(cols) + eps);
    } else {
        mu = total / static_cast<float>(cols);
        float dev = 0.0f;
        for (std::int64_t c = first; c < cols; c += stride)
#pragma unroll
            for (int i = 0; i < V; ++i) {
                const float d = srow[c + i] - mu;
                dev += d * d;
            }
        rs = rsqrtf(block_sum(dev, scratch) / static_cast<float>(cols) + eps);
    }
    if (threadIdx.x == 0) {
        if (!kRms) mean_out[blockIdx.x] = mu;
        rstd_out[blockIdx.x] = rs;
    }
    for (std::int64_t c = first; c < cols; c += stride) {
        const Pack<T, V> gv = load_pack<T, V>(gamma + c);
        Pack<T, V> bv{};
        if (!kRms) bv = load_pack<T, V>(beta + c);
        Pack<T, V> ov;
#pragma unroll
        for (int i = 0; i < V; ++i) {
            float y = (srow[c + i] - mu) * rs * to_float(gv.v[i]);
            if (!kRms) y += to_float(bv.v[i]);
            ov.v[i] = from_float<T>(y);
        }
        store_pack<T, V>(out + base + c, ov);
    }
}

template <typename T, int V, bool kRms>
__global__ void residual_norm_backward_kernel(T* dsum, float* dgamma, float* dbeta, const T* dout,
                                              const T* dsum_in, const T* sum, const T* gamma,
                                              const float* mean, const float* rstd,
                                              std::int64_t rows, std::int64_t cols) {
    extern __shared__ float smem[];
    float* sxhat = smem;
    float* sg = smem + cols;
    float* pgamma = smem + 2 * cols;
    float* pbeta = smem + 3 * cols;
    __shared__ float scratch[32];
    const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * V;
    const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;
    for (std::int64_t c = first; c < cols; c += stride)
#pragma unroll
        for (int i = 0; i < V; ++i) pgamma[c + i] = pbeta[c + i] = 0.0f;

    const float inv_cols = 1.0f / static_cast<float>(cols);
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const std::int64_t base = row * cols;
        const float mu = kRms ? 0.0f : mean[row];
        const float rs = rstd[row];
        float sum_g = 0.0f, sum_gx = 0.0f;
        for (std::int64_t c = first; c < cols; c += stride) {
            const Pack<T, V> sv = load_pack<T, V>(sum + base + c);
            const Pack<T, V> dv = load_pack<T, V>(dout + base + c);
            const Pack<T, V> gv = load_pack<T, V>(gamma + c);
#pragma unroll
            for (int i = 0; i < V; ++i) {
                const float xhat = (to_float(sv.v[i]) - mu) * rs;
                const float dy = to_float(dv.v[i]);
                const float g = to_float(gv.v[i]) * dy;
                sxhat[c + i] = xhat;
                sg[c + i] = g;
                sum_g += g;
                sum_gx += g * xhat;
                pgamma[c + i] += dy * xhat;
                pbeta[c + i] += dy;
            }
        }
        const float mean_gx = block_sum(sum_gx, scratch) * inv_cols;
        const float mean_g = kRms ? 0.0f : block_sum(sum_g, scratch) * inv_cols;
        for (std::int64_t c = first; c < cols; c += stride) {
            Pack<T, V> extra{};
            if (dsum_in) extra = load_pack<T, V>(dsum_in + base + c);
            Pack<T, V> ov;
#pragma unroll
            for (int i = 0; i < V; ++i) {
                float d = rs * (sg[c + i] - mean_g - sxhat[c + i] * mean_gx);
                if (dsum_in) d += to_float(extra.v[i]);
                ov.v[i] = from_float<T>(d);
            }
            store_pack<T, V>(dsum + base + c, ov);
        }
    }
    for (std::int64_t c = first; c < cols; c += stride)
#pragma unroll
        for (int i = 0; i < V; ++i) {
            atomicAdd(dgamma + c + i, pgamma[c + i]);
            if (!kRms) atomicAdd(dbeta + c + i, pbeta[c + i]);
        }
}

template <typename T>
int pack_width(std::int64_t cols, bool aligned) {
    return (aligned && cols % kPack<T> == 0) ? kPack<T> : 1;
}

int threads_for(std::int64_t chunks) {
    const std::int64_t t = ((chunks + 31) / 32) * 32;
    return static_cast<int>(std::clamp<std::int64_t>(t, 32, 1024));
}

template <typename T, int V, bool kRms>
void launch_forward(T* sum, T* out, float* mean, float* rstd, const T* x, const T* residual,
                    const T* gamma, const T* beta, std::int64_t rows, std::int64_t cols, float eps,
                    cudaStream_t stream) {
    const std::size_t shared = static_cast<std::size_t>(cols) * sizeof(float);
    auto kernel = residual_norm_forward_kernel<T, V, kRms>;
    allow_shared_bytes(kernel, shared);
    kernel<<<static_cast<unsigned>(rows), threads_for(ceil_div(cols, V)), shared, stream>>>(
        sum, out, mean, rstd, x, residual, gamma, beta, cols, eps);
    check_launch("residual_norm_forward_kernel");
}

template <typename T, int V, bool kRms>
void launch_backward(T* dsum, float* dgamma, float* dbeta, const T* dout, const T* dsum_in,
                     const T* sum, const T* gamma, const float* mean, const float* rstd,
                     std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
    const std::size_t shared = 4 * static_cast<std::size_t>(cols) * sizeof(float);
    auto kernel = residual_norm_backward_kernel<T, V, kRms>;
    allow_shared_bytes(kernel, shared);
    // As many blocks as fit on the device at once: each walks rows and adds its dgamma/dbeta
    // partials once, so more blocks than that would only add atomics.
    const int threads = threads_for(ceil_div(cols, V));
    int per_sm = 0;
    TRIDENT_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared));
    const std::int64_t blocks = std::min<std::int64_t>(
        rows, std::max(per_sm, 1) * static_cast<std::int64_t>(multiprocessor_count()));
    kernel<<<static_cast<unsigned>(blocks), threads, shared, stream>>>(
        dsum, dgamma, dbeta, dout, dsum_in, sum, gamma, mean, rstd, rows, cols);
    check_launch("residual_norm_backward_kernel");
}

template <bool kRms, typename T>
void forward(T* sum, T* out, float* mean, float* rstd, const T* x, const T* residual,
             const T* gamma, const T* beta, std::int64_t rows, std::int64_t cols, float eps,
             cudaStream_t stream) {
    require(rows >= 0 && cols > 0, "residual_norm_forward", "need rows >= 0 and cols > 0");
    if (rows == 0) return;
    const bool aligned = aligned16(sum, out, x, residual, gamma, beta);
    if (pack_width<T>(cols, aligned) > 1)
        launch_forward<T, kPack<T>, kRms>(sum, out, mean, rstd, x, residual, gamma, beta, rows,
                                          cols, eps, stream);
    else
        launch_forward<T, 1, kRms>(sum, out, mean, rstd, x, residual, gamma, beta, rows, cols, eps,
                                   stream);
}

template <bool kRms, typename T>
void backward(T* dsum, float* dgamma, float* dbeta, const T* dout, const T* dsum_in, const T* sum,
              const T* gamma, const float* mean, const float* rstd, std::int64_t rows,
              std::int64_t cols, cudaStream_t stream) {
    require(rows >= 0 && cols > 0, "residual_norm_backward", "need rows >= 0 and cols > 0");
    if (rows == 0) return;
    const bool aligned = aligned16(dsum, dout, dsum_in, sum, gamma);
    if (pack_width<T>(cols, aligned) > 1)
        launch_backward<T, kPack<T>, kRms>(dsum, dgamma, dbeta, dout, dsum_in, sum, gamma, mean,
                                           rstd, rows, cols, stream);
    else
        launch_backward<T, 1, kRms>(dsum, dgamma, dbeta, dout, dsum_in, sum, gamma, mean, rstd,
                                    rows, cols, stream);
}

} // namespace

template <typename T>
void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* x,
                                const T* residual, const T* gamma, const T* beta, std::int64_t rows,
                                std::int64_t cols, float eps, cudaStream_t stream) {
    forward<false>(sum, out, mean, rstd, x, residual, gamma, beta, rows, cols, eps, stream);
}
template <typename T>
void residual_layernorm_backward(T* dsum, float* dgamma, float* dbeta, const T* dout,
                                 const T* dsum_in, const T* sum, const T* gamma, const float* mean,
                                 const float* rstd, std::int64_t rows, std::int64_t cols,
                                 cudaStream_t stream) {
    backward<false>(dsum, dgamma, dbeta, dout, dsum_in, sum, gamma, mean, rstd, rows, cols, stream);
}
template <typename T>
void residual_rmsnorm_forward(T* sum, T* out, float* rstd, const T* x, const T* residual,
                              const T* gamma, std::int64_t rows, std::int64_t cols, float eps,
                              cudaStream_t stream) {
    forward<true>(sum, out, static_cast<float*>(nullptr), rstd, x, residual, gamma,
                  static_cast<const T*>(nullptr), rows, cols, eps, stream);
}
template <typename T>
void residual_rmsnorm_backward(T* dsum, float* dgamma, const T* dout, const T* dsum_in,
                               const T* sum, const T* gamma, const float* rstd, std::int64_t rows,
                               std::int64_t cols, cudaStream_t stream) {
    backward<true>(dsum, dgamma, static_cast<float*>(nullptr), dout, dsum_in, sum, gamma,
                   static_cast<const float*>(nullptr), rstd, rows, cols, stream);
}

#define TRIDENT_INSTANTIATE_NORMS(T)                                                               \
    template void residual_layernorm_forward<T>(T*, T*, float*, float*, const T*, const T*,        \
                                                const T*, const T*, std::int64_t, std::int64_t,    \
                                                float, cudaStream_t);                              \
    template void residual_layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*, \
                                                 const T*, const float*, const float*,             \
                                                 std::int64_t, std::int64_t, cudaStream_t);        \
    template void residual_rmsnorm_forward<T>(T*, T*, float*, const T*, const T*, const T*,        \
                                              std::int64_t, std::int64_t, float, cudaStream_t);    \
    template void residual_rmsnorm_backward<T>(T*, float*, const T*, const T*, const T*, const T*, \
                                               const float*, std::int64_t, std::int64_t,           \
                                               cudaStream_t);
TRIDENT_INSTANTIATE_NORMS(float)
TRIDENT_INSTANTIATE_NORMS(__nv_bfloat16)

} // namespace trident::kernels::cuda
