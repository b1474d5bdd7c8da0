#pragma once
// Token embedding over a vocabulary-parallel table shard: this rank holds rows
// [vocab_start, vocab_start + local_vocab) of the [vocab × dim] table.
// Forward: out[r, :] = table[ids[r] − vocab_start, :] when this rank holds ids[r], else zeros
// (a tensor-parallel caller then all-reduces out, as in Megatron-LM's VocabParallelEmbedding).
// Backward: dtable[ids[r] − vocab_start, :] += dout[r, :] for the rows this rank holds, in
// fp32 with atomic adds (repeated tokens add up). T is float or __nv_bfloat16.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

template <typename T>
void embedding_forward(T* out, const T* table, const std::int32_t* ids, std::int64_t rows,
                       std::int64_t local_vocab, std::int64_t vocab_start, std::int64_t dim,
                       cudaStream_t stream);

template <typename T>
void embedding_backward(float* dtable, const T* dout, const std::int32_t* ids, std::int64_t rows,
                        std::int64_t local_vocab, std::int64_t vocab_start, std::int64_t dim,
                        cudaStream_t stream);

} // namespace trident::kernels::cuda
