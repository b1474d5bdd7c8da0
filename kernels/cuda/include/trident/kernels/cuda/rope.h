#pragma once
// Rotary position embedding (Su et al. 2021, RoFormer) in place, "rotate half" layout (GPT-NeoX,
// Llama, Megatron-LM): within each head of head_dim values, element i pairs with i + D/2 and
// the pair turns by angle pos·base^(−2i/D):
//   x'_i = x_i·cos − x_{i+D/2}·sin,   x'_{i+D/2} = x_{i+D/2}·cos + x_i·sin.
// x holds `rows` rows of stride `row_stride` elements, each with `heads` heads at h·head_dim;
// row r is at position r mod seq (rows are whole sequences). The backward turns the gradient
// by the opposite angle (the rotation's transpose). T is float or __nv_bfloat16; the angle is
// computed in double (positions in the thousands times the fastest frequency), the rotation
// in fp32. head_dim must be even.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

template <typename T>
void rope_forward(T* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                  std::int64_t head_dim, std::int64_t seq, double base, cudaStream_t stream);
template <typename T>
void rope_backward(T* dx, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                   std::int64_t head_dim, std::int64_t seq, double base, cudaStream_t stream);

} // namespace trident::kernels::cuda
