// Vocabulary-parallel softmax cross-entropy; see cross_entropy.h. One block per row. The
// shard's max and Σ exp come from a single pass (each thread keeps a running max and rescales
// its sum when the max grows, the online softmax of Milakov & Gimelshein 2018), then the block
// combines the per-thread pairs. The gradient pass reads the row once more and overwrites it.
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/cross_entropy.h"

namespace trident::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 512;

struct RowStats {
    float max;
    float sumexp;
};

// The row's max and Σ exp(x − max), every thread of the block gets both.
template <typename T, int V>
__device__ RowStats row_stats(const T* row, std::int64_t n, float* scratch) {
    float m = -INFINITY;
    float s = 0.0f;
    for (std::int64_t c = static_cast<std::int64_t>(threadIdx.x) * V; c < n;
         c += static_cast<std::int64_t>(blockDim.x) * V) {
        const Pack<T, V> xv = load_pack<T, V>(row + c);
        float local = -INFINITY;
#pragma unroll
        for (int i = 0; i < V; ++i) local = fmaxf(local, to_float(xv.v[i]));
        if (local > m) {
            s *= __expf(m - local);
            m = local;
        }
#pragma unroll
        for (int i = 0; i < V; ++i) s += __expf(to_float(xv.v[i]) - m);
    }
    const float row_max = block_max(m, scratch);
    const float scaled = (m == -INFINITY) ? 0.0f : s * __expf(m - row_max);
    return {row_max, block_sum(scaled, scratch)};
}

template <typename T, int V>
__device__ void write_grad(T* row, std::int64_t n, std::int64_t local_target, float max,
                           float inv_sum, float scale, bool ignored) {
    for (std::int64_t c = static_cast<std::int64_t>(threadIdx.x) * V; c < n;
         c += static_cast<std::int64_t>(blockDim.x) * V) {
        Pack<T, V> xv = load_pack<T, V>(row + c);
#pragma unroll
        for (int i = 0; i < V; ++i) {
            float g = __expf(to_float(xv.v[i]) - max) * inv_sum;
            if (c + i == local_target) g -= 1.0f;
            xv.v[i] = from_float<T>(ignored ? 0.0f : g * scale);
        }
        store_pack<T, V>(row + c, xv);
    }
}

template <typename T, int V>
__global__ void partials_kernel(float* row_max, float* row_sumexp, float* target_logit,
                                const T* logits, const std::int32_t* targets,
                                std::int64_t local_vocab, std::int64_t vocab_start) {
    __shared__ float scratch[32];
    const std::int64_t r = blockIdx.x;
    const T* row = logits + r * local_vocab;
    const RowStats st = row_stats<T, V>(row, local_vocab, scratch);
    if (threadIdx.x == 0) {
        row_max[r] = st.max;
        row_sumexp[r] = st.sumexp;
        const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
        target_logit[r] = (targets[r] >= 0 && t >= 0 && t < local_vocab) ? to_float(row[t]) : 0.0f;
    }
}

__global__ void rescale_kernel(float* sumexp, const float* local_max, const float* global_max,
                               std::int64_t rows) {
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r < rows) sumexp[r] *= __expf(local_max[r] - global_max[r]);
}

template <typename T, int V>
__global__ void loss_grad_kernel(float* loss, T* logits, const std::int32_t* targets,
                                 const float* global_max, const float* global_sumexp,
                                 const float* target_logit, std::int64_t local_vocab,
                                 std::int64_t vocab_start, float scale) {
    const std::int64_t r = blockIdx.x;
    const bool ignored = targets[r] < 0;
    const float m = global_max[r];
    const float s = global_sumexp[r];
    if (threadIdx.x == 0 && loss) loss[r] = ignored ? 0.0f : logf(s) + m - target_logit[r];
    write_grad<T, V>(logits + r * local_vocab, local_vocab,
                     static_cast<std::int64_t>(targets[r]) - vocab_start, m, 1.0f / s, scale,
                     ignored);
}

template <typename T, int V>
__global__ void fused_kernel(float* loss, T* logits, const std::int32_t* targets,
                             std::int64_t vocab, float scale) {
    __shared__ float scratch[32];
    const std::int64_t r = blockIdx.x;
    T* row = logits + r * vocab;
    const RowStats st = row_stats<T, V>(row, vocab, scratch);
    const bool ignored = targets[r] < 0;
    const std::int64_t t = targets[r];
    if (threadIdx.x == 0 && loss)
        loss[r] = ignored ? 0.0f : logf(st.sumexp) + st.max - to_float(row[t]);
    __syncthreads(); // row[t] is read above before any thread overwrites it
    write_grad<T, V>(row, vocab, t, st.max, 1.0f / st.sumexp, scale, ignored);
}

template <typename T>
bool packed(std::int64_t n, const void* p) {
    return n % kPack<T> == 0 && aligned16(p);
}

} // namespace

template <typename T>
void cross_entropy_partials(float* row_max, float* row_sumexp, float* target_logit, const T* logits,
                            const std::int32_t* targets, std::int64_t rows,
                            std::int64_t local_vocab, std::int64_t vocab_start,
                            cudaStream_t stream) {
    require(rows >= 0 && local_vocab > 0, "cross_entropy_partials", "bad shape");
    if (rows == 0) return;
    const auto blocks = static_cast<unsigned>(rows);
    if (packed<T>(local_vocab, logits))
        partials_kernel<T, kPack<T>><<<blocks, kThreads, 0, stream>>>(
            row_max, row_sumexp, target_logit, logits, targets, local_vocab, vocab_start);
    else
        partials_kernel<T, 1><<<blocks, kThreads, 0, stream>>>(
            row_max, row_sumexp, target_logit, logits, targets, local_vocab, vocab_start);
    check_launch("cross_entropy partials_kernel");
}

void cross_entropy_rescale_sumexp(float* row_sumexp, const float* local_max,
                                  const float* global_max, std::int64_t rows, cudaStream_t stream) {
    if (rows <= 0) return;
    rescale_kernel<<<static_cast<unsigned>(ceil_div(rows, 256)), 256, 0, stream>>>(
        row_sumexp, local_max, global_max, rows);
    check_launch("cross_entropy rescale_kernel");
}

template <typename T>
void cross_entropy_loss_and_grad(float* loss, T* logits, const std::int32_t* targets,
                                 const float* global_max, const float* global_sumexp,
                                 const float* target_logit, std::int64_t rows,
                                 std::int64_t local_vocab, std::int64_t vocab_start,
                                 float grad_scale, cudaStream_t stream) {
    require(rows >= 0 && local_vocab > 0, "cross_entropy_loss_and_grad", "bad shape");
    if (rows == 0) return;
    const auto blocks = static_cast<unsigned>(rows);
    if (packed<T>(local_vocab, logits))
        loss_grad_kernel<T, kPack<T>>
            <<<blocks, kThreads, 0, stream>>>(loss, logits, targets, global_max, global_sumexp,
                                              target_logit, local_vocab, vocab_start, grad_scale);
    else
        loss_grad_kernel<T, 1>
            <<<blocks, kThreads, 0, stream>>>(loss, logits, targets, global_max, global_sumexp,
                                              target_logit, local_vocab, vocab_start, grad_scale);
    check_launch("cross_entropy loss_grad_kernel");
}

template <typename T>
void cross_entropy_forward_backward(float* loss, T* logits, const std::int32_t* targets,
                                    std::int64_t rows, std::int64_t vocab, float grad_scale,
                                    cudaStream_t stream) {
    require(rows >= 0 && vocab > 0, "cross_entropy_forward_backward", "bad shape");
    if (rows == 0) return;
    const auto blocks = static_cast<unsigned>(rows);
    if (packed<T>(vocab, logits))
        fused_kernel<T, kPack<T>>
            <<<blocks, kThreads, 0, stream>>>(loss, logits, targets, vocab, grad_scale);
    else
        fused_kernel<T, 1>
            <<<blocks, kThreads, 0, stream>>>(loss, logits, targets, vocab, grad_scale);
    check_launch("cross_entropy fused_kernel");
}

#define TRIDENT_INSTANTIATE_CROSS_ENTROPY(T)                                                       \
    template void cross_entropy_partials<T>(float*, float*, float*, const T*, const std::int32_t*, \
                                            std::int64_t, std::int64_t, std::int64_t,              \
                                            cudaStream_t);                                         \
    template void cross_entropy_loss_and_grad<T>(float*, T*, const std::int32_t*, const float*,    \
                                                 const float*, const float*, std::int64_t,         \
                                                 std::int64_t, std::int64_t, float, cudaStream_t); \
    template void cross_entropy_forward_backward<T>(float*, T*, const std::int32_t*, std::int64_t, \
                                                    std::int64_t, float, cudaStream_t);
TRIDENT_INSTANTIATE_CROSS_ENTROPY(float)
TRIDENT_INSTANTIATE_CROSS_ENTROPY(__nv_bfloat16)

} // namespace trident::kernels::cuda
