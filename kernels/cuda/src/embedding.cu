// Embedding gather and its scatter-add backward; see embedding.h. One block per token row.
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/embedding.h"

namespace trident::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 128;

template <typename T, int V>
__global__ void embedding_forward_kernel(T* out, const T* table, const std::int32_t* ids,
                                         std::int64_t local_vocab, std::int64_t vocab_start,
                                         std::int64_t dim) {
    const std::int64_t r = blockIdx.x;
    const std::int64_t local = static_cast<std::int64_t>(ids[r]) - vocab_start;
    const bool held = local >= 0 && local < local_vocab;
    for (std::int64_t c = static_cast<std::int64_t>(threadIdx.x) * V; c < dim;
         c += static_cast<std::int64_t>(blockDim.x) * V) {
        Pack<T, V> v;
        if (held) {
            v = load_pack<T, V>(table + local * dim + c);
        } else {
#pragma unroll
            for (int i = 0; i < V; ++i) v.v[i] = from_float<T>(0.0f);
        }
        store_pack<T, V>(out + r * dim + c, v);
    }
}

template <typename T, int V>
__global__ void embedding_backward_kernel(float* dtable, const T* dout, const std::int32_t* ids,
                                          std::int64_t local_vocab, std::int64_t vocab_start,
                                          std::int64_t dim) {
    const std::int64_t r = blockIdx.x;
    const std::int64_t local = static_cast<std::int64_t>(ids[r]) - vocab_start;
    if (local < 0 || local >= local_vocab) return;
    for (std::int64_t c = static_cast<std::int64_t>(threadIdx.x) * V; c < dim;
         c += static_cast<std::int64_t>(blockDim.x) * V) {
        const Pack<T, V> d = load_pack<T, V>(dout + r * dim + c);
#pragma unroll
        for (int i = 0; i < V; ++i) atomicAdd(dtable + local * dim + c + i, to_float(d.v[i]));
    }
}

} // namespace

template <typename T>
void embedding_forward(T* out, const T* table, const std::int32_t* ids, std::int64_t rows,
                       std::int64_t local_vocab, std::int64_t vocab_start, std::int64_t dim,
                       cudaStream_t stream) {
    require(rows >= 0 && dim > 0 && local_vocab > 0, "embedding_forward", "bad shape");
    if (rows == 0) return;
    const auto blocks = static_cast<unsigned>(rows);
    if (dim % kPack<T> == 0 && aligned16(out, table))
        embedding_forward_kernel<T, kPack<T>>
            <<<blocks, kThreads, 0, stream>>>(out, table, ids, local_vocab, vocab_start, dim);
    else
        embedding_forward_kernel<T, 1>
            <<<blocks, kThreads, 0, stream>>>(out, table, ids, local_vocab, vocab_start, dim);
    check_launch("embedding_forward_kernel");
}

template <typename T>
void embedding_backward(float* dtable, const T* dout, const std::int32_t* ids, std::int64_t rows,
                        std::int64_t local_vocab, std::int64_t vocab_start, std::int64_t dim,
                        cudaStream_t stream) {
    require(rows >= 0 && dim > 0 && local_vocab > 0, "embedding_backward", "bad shape");
    if (rows == 0) return;
    const auto blocks = static_cast<unsigned>(rows);
    if (dim % kPack<T> == 0 && aligned16(dout))
        embedding_backward_kernel<T, kPack<T>>
            <<<blocks, kThreads, 0, stream>>>(dtable, dout, ids, local_vocab, vocab_start, dim);
    else
        embedding_backward_kernel<T, 1>
            <<<blocks, kThreads, 0, stream>>>(dtable, dout, ids, local_vocab, vocab_start, dim);
    check_launch("embedding_backward_kernel");
}

#define TRIDENT_INSTANTIATE_EMBEDDING(T)                                                           \
    template void embedding_forward<T>(T*, const T*, const std::int32_t*, std::int64_t,            \
                                       std::int64_t, std::int64_t, std::int64_t, cudaStream_t);    \
    template void embedding_backward<T>(float*, const T*, const std::int32_t*, std::int64_t,       \
                                        std::int64_t, std::int64_t, std::int64_t, cudaStream_t);
TRIDENT_INSTANTIATE_EMBEDDING(float)
TRIDENT_INSTANTIATE_EMBEDDING(__nv_bfloat16)

} // namespace trident::kernels::cuda
