#pragma once
// The small element-wise and reduction steps around a transformer layer's big kernels, for
// the CUDA backend's model (executor). T is float or __nv_bfloat16; arithmetic is fp32.
// Row-major [rows × cols] everywhere.
//   add_bias:            x[r,c] += bias[c]
//   bias_gradient:       dbias[c] += Σ_r dout[r,c]            (fp32, ACCUMULATED)
//   add:                 out[i] = a[i] + b[i]                  (out may alias a or b)
//   convert:             out[i] = in[i]  (fp32 ↔ bf16, round to nearest even)
//   add_position_embedding: x[r,c] += table[(first_row + r) mod seq, c]   (learned positions;
//                        first_row: where this rank's rows start under sequence parallelism)
//   position_embedding_backward: dtable[t,c] += Σ_{r ≡ t mod seq} dout[r,c]   (fp32)
//   fill_columns:        x[r,c] = value for c ≥ first_col      (masks vocabulary padding)
//   accumulate_sum:      out[0] += Σ_i in[i]                   (fp32, one value)
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

template <typename T>
void add_bias(T* x, const T* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

template <typename T>
void bias_gradient(float* dbias, const T* dout, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream);

template <typename T>
void add(T* out, const T* a, const T* b, std::int64_t n, cudaStream_t stream);

template <typename Out, typename In>
void convert(Out* out, const In* in, std::int64_t n, cudaStream_t stream);

template <typename T>
void add_position_embedding(T* x, const T* table, std::int64_t rows, std::int64_t first_row,
                            std::int64_t seq, std::int64_t cols, cudaStream_t stream);

template <typename T>
void position_embedding_backward(float* dtable, const T* dout, std::int64_t rows, std::int64_t seq,
                                 std::int64_t cols, cudaStream_t stream);

template <typename T>
void fill_columns(T* x, std::int64_t rows, std::int64_t cols, std::int64_t first_col, float value,
                  cudaStream_t stream);

void accumulate_sum(float* out, const float* in, std::int64_t n, cudaStream_t stream);

} // namespace trident::kernels::cuda
