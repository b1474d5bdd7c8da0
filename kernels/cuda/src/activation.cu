// Bias+GeLU and SwiGLU, forward and backward; formulas in activation.h.
// Bias+GeLU uses column strips: a 32×8 block covers 32 packs of columns and walks rows 8 at a
// time, so the backward can sum dbias in registers and add it to memory once per block.
// SwiGLU is a flat grid-stride loop over packs of the F output columns.
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/activation.h"

#include <algorithm>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float gelu(float x) {
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float gelu_grad(float x) {
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float t = tanhf(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

__device__ __forceinline__ float sigmoid(float x) {
    return 1.0f / (1.0f + __expf(-x));
}

constexpr int kStripRows = 8;

template <typename T, int V, bool kBackward>
__global__ void bias_gelu_kernel(T* result, float* dbias, const T* dout, const T* in, const T* bias,
                                 std::int64_t rows, std::int64_t cols) {
    const std::int64_t c = (static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x) * V;
    const bool active = c < cols;
    float b[V];
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
        b[i] = (active && bias) ? to_float(bias[c + i]) : 0.0f;
        acc[i] = 0.0f;
    }
    if (active) {
#pragma unroll 4
        for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kStripRows + threadIdx.y;
             r < rows; r += static_cast<std::int64_t>(gridDim.y) * kStripRows) {
            const std::int64_t at = r * cols + c;
            const Pack<T, V> xv = load_pack<T, V>(in + at);
            Pack<T, V> ov;
            if constexpr (kBackward) {
                const Pack<T, V> dv = load_pack<T, V>(dout + at);
#pragma unroll
                for (int i = 0; i < V; ++i) {
                    const float d = to_float(dv.v[i]) * gelu_grad(to_float(xv.v[i]) + b[i]);
                    acc[i] += d;
                    ov.v[i] = from_float<T>(d);
                }
            } else {
#pragma unroll
                for (int i = 0; i < V; ++i) ov.v[i] = from_float<T>(gelu(to_float(xv.v[i]) + b[i]));
            }
            store_pack<T, V>(result + at, ov);
        }
    }
    if constexpr (kBackward) {
        if (!dbias) return;
        __shared__ float partial[kStripRows][32 * V];
#pragma unroll
        for (int i = 0; i < V; ++i) partial[threadIdx.y][threadIdx.x * V + i] = acc[i];
        __syncthreads();
        if (threadIdx.y == 0 && active) {
#pragma unroll
            for (int i = 0; i < V; ++i) {
                float s = 0.0f;
                for (int y = 0; y < kStripRows; ++y) s += partial[y][threadIdx.x * V + i];
                atomicAdd(dbias + c + i, s);
            }
        }
    }
}

template <typename T, int V, bool kBackward>
void launch_bias_gelu(T* result, float* dbias, const T* dout, const T* in, const T* bias,
                      std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
    const std::int64_t col_blocks = ceil_div(cols, 32 * V);
    const std::int64_t target = 8 * static_cast<std::int64_t>(multiprocessor_count());
    const std::int64_t row_blocks = std::clamp<std::int64_t>(
        ceil_div(target, col_blocks), 1, std::min<std::int64_t>(ceil_div(rows, kStripRows), 65535));
    const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(row_blocks));
    bias_gelu_kernel<T, V, kBackward>
        <<<grid, dim3(32, kStripRows), 0, stream>>>(result, dbias, dout, in, bias, rows, cols);
    check_launch("bias_gelu_kernel");
}

template <bool kBackward, typename T>
void bias_gelu(T* result, float* dbias, const T* dout, const T* in, const T* bias,
               std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
    require(rows >= 0 && cols > 0, "bias_gelu", "need rows >= 0 and cols > 0");
    if (rows == 0) return;
    if (cols % kPack<T> == 0 && aligned16(result, dout, in, bias))
        launch_bias_gelu<T, kPack<T>, kBackward>(result, dbias, dout, in, bias, rows, cols, stream);
    else
        launch_bias_gelu<T, 1, kBackward>(result, dbias, dout, in, bias, rows, cols, stream);
}

template <typename T, int V, bool kBackward>
__global__ void swiglu_kernel(T* result, const T* dout, const T* in, std::int64_t rows,
                              std::int64_t ffn) {
    const std::int64_t packs_per_row = ffn / V;
    const std::int64_t total = rows * packs_per_row;
    for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         p < total; p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t r = p / packs_per_row;
        const std::int64_t f = (p - r * packs_per_row) * V;
        const T* gate_at = in + r * 2 * ffn + f;
        const Pack<T, V> gv = load_pack<T, V>(gate_at);
        const Pack<T, V> uv = load_pack<T, V>(gate_at + ffn);
        if constexpr (kBackward) {
            const Pack<T, V> dv = load_pack<T, V>(dout + r * ffn + f);
            Pack<T, V> dg, du;
#pragma unroll
            for (int i = 0; i < V; ++i) {
                const float g = to_float(gv.v[i]);
                const float s = sigmoid(g);
                const float d = to_float(dv.v[i]);
                dg.v[i] = from_float<T>(d * to_float(uv.v[i]) * s * (1.0f + g * (1.0f - s)));
                du.v[i] = from_float<T>(d * g * s);
            }
            store_pack<T, V>(result + r * 2 * ffn + f, dg);
            store_pack<T, V>(result + r * 2 * ffn + ffn + f, du);
        } else {
            Pack<T, V> ov;
#pragma unroll
            for (int i = 0; i < V; ++i) {
                const float g = to_float(gv.v[i]);
                ov.v[i] = from_float<T>(g * sigmoid(g) * to_float(uv.v[i]));
            }
            store_pack<T, V>(result + r * ffn + f, ov);
        }
    }
}

template <bool kBackward, typename T>
void swiglu(T* result, const T* dout, const T* in, std::int64_t rows, std::int64_t ffn,
            cudaStream_t stream) {
    require(rows >= 0 && ffn > 0, "swiglu", "need rows >= 0 and ffn > 0");
    if (rows == 0) return;
    const int threads = 256;
    const std::int64_t max_blocks = 16 * static_cast<std::int64_t>(multiprocessor_count());
    if (ffn % kPack<T> == 0 && aligned16(result, dout, in)) {
        constexpr int V = kPack<T>;
        const std::int64_t blocks =
            std::clamp<std::int64_t>(ceil_div(rows * ffn / V, threads), 1, max_blocks);
        swiglu_kernel<T, V, kBackward>
            <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(result, dout, in, rows, ffn);
    } else {
        const std::int64_t blocks =
            std::clamp<std::int64_t>(ceil_div(rows * ffn, threads), 1, max_blocks);
        swiglu_kernel<T, 1, kBackward>
            <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(result, dout, in, rows, ffn);
    }
    check_launch("swiglu_kernel");
}

} // namespace

template <typename T>
void bias_gelu_forward(T* out, const T* in, const T* bias, std::int64_t rows, std::int64_t cols,
                       cudaStream_t stream) {
    bias_gelu<false>(out, static_cast<float*>(nullptr), static_cast<const T*>(nullptr), in, bias,
                     rows, cols, stream);
}
template <typename T>
void bias_gelu_backward(T* din, float* dbias, const T* dout, const T* in, const T* bias,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
    bias_gelu<true>(din, dbias, dout, in, bias, rows, cols, stream);
}
template <typename T>
void swiglu_forward(T* out, const T* in, std::int64_t rows, std::int64_t ffn, cudaStream_t stream) {
    swiglu<false>(out, static_cast<const T*>(nullptr), in, rows, ffn, stream);
}
template <typename T>
void swiglu_backward(T* din, const T* dout, const T* in, std::int64_t rows, std::int64_t ffn,
                     cudaStream_t stream) {
    swiglu<true>(din, dout, in, rows, ffn, stream);
}

#define TRIDENT_INSTANTIATE_ACTIVATIONS(T)                                                         \
    template void bias_gelu_forward<T>(T*, const T*, const T*, std::int64_t, std::int64_t,         \
                                       cudaStream_t);                                              \
    template void bias_gelu_backward<T>(T*, float*, const T*, const T*, const T*, std::int64_t,    \
                                        std::int64_t, cudaStream_t);                               \
    template void swiglu_forward<T>(T*, const T*, std::int64_t, std::int64_t, cudaStream_t);       \
    template void swiglu_backward<T>(T*, const T*, const T*, std::int64_t, std::int64_t,           \
                                     cudaStream_t);
TRIDENT_INSTANTIATE_ACTIVATIONS(float)
TRIDENT_INSTANTIATE_ACTIVATIONS(__nv_bfloat16)

} // namespace trident::kernels::cuda
