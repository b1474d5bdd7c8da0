#pragma once
// Fused MLP activations. T is float or __nv_bfloat16; arithmetic is fp32.
//
// Bias + GeLU, tanh form (Hendrycks & Gimpel 2016, eq. for GELU ≈ 0.5·x·(1 + tanh(√(2/π)·
// (x + 0.044715·x³)))): out[r,c] = gelu(in[r,c] + bias[c]) over rows × cols. The backward
// recomputes the pre-activation from `in` and `bias` (nothing else is saved), writes
// din = dout · gelu'(in + bias) and ACCUMULATES dbias[c] += Σ_r din[r,c] in fp32 (dbias may
// be null). bias may be null in both directions (plain GeLU).
//
// SwiGLU (Shazeer 2020): in is [rows × 2F] = [gate | up] per row, out[rows × F] =
// silu(gate) · up with silu(g) = g·σ(g). Backward writes din [rows × 2F]:
//   dgate = dout · up · σ(g)·(1 + g·(1 − σ(g))),   dup = dout · silu(g).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

template <typename T>
void bias_gelu_forward(T* out, const T* in, const T* bias, std::int64_t rows, std::int64_t cols,
                       cudaStream_t stream);
template <typename T>
void bias_gelu_backward(T* din, float* dbias, const T* dout, const T* in, const T* bias,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream);

template <typename T>
void swiglu_forward(T* out, const T* in, std::int64_t rows, std::int64_t ffn, cudaStream_t stream);
template <typename T>
void swiglu_backward(T* din, const T* dout, const T* in, std::int64_t rows, std::int64_t ffn,
                     cudaStream_t stream);

} // namespace trident::kernels::cuda
