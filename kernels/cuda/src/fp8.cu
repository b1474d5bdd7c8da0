// FP8 operands; see fp8.h. Grid-stride loops: the casts move a few bytes per element next to
// the GEMMs they feed.
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/error.h"
#include "trident/kernels/cuda/fp8.h"

#include <algorithm>
#include <cfloat>
#include <cuda_fp8.h>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
    return grid_stride_blocks(n, kThreads);
}

// Non-negative floats order as their bit patterns do, so an integer atomicMax is a float max.
__device__ void atomic_max_nonnegative(float* address, float value) {
    atomicMax(reinterpret_cast<int*>(address), __float_as_int(value));
}

template <typename T>
__global__ void amax_kernel(float* amax, const T* x, std::int64_t n) {
    __shared__ float block_max[kThreads];
    float m = 0.0f;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const float v = fabsf(to_float(x[i]));
        m = isnan(v) ? INFINITY : fmaxf(m, v); // a NaN makes the amax not finite: scale 1,
    }                                          // as the CPU reference's abs_max says
    block_max[threadIdx.x] = m;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            block_max[threadIdx.x] = fmaxf(block_max[threadIdx.x], block_max[threadIdx.x + stride]);
        __syncthreads();
    }
    if (threadIdx.x == 0) atomic_max_nonnegative(amax, block_max[0]);
}

__global__ void scale_kernel(float* scale, float* scale_inv, const float* amax, float fp8_max) {
    const float a = *amax;
    const float s = a > 0.0f && isfinite(a) ? fminf(fp8_max / a, FLT_MAX) : 1.0f;
    *scale = s;
    *scale_inv = 1.0f / s;
}

template <typename T>
__global__ void quantize_kernel(__nv_fp8_storage_t* out, const T* x, std::int64_t rows,
                                std::int64_t cols, bool transpose, const float* scale,
                                __nv_fp8_interpretation_t type) {
    const float s = *scale;
    const std::int64_t n = rows * cols;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const std::int64_t r = i / cols, c = i % cols;
        out[transpose ? c * rows + r : i] =
            __nv_cvt_float_to_fp8(to_float(x[i]) * s, __NV_SATFINITE, type);
    }
}

} // namespace

template <typename T>
void amax(float* amax, const T* x, std::int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    amax_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(amax, x, n);
    check_launch("amax_kernel");
}

void scale_from_amax(float* scale, float* scale_inv, const float* amax, Fp8Type type,
                     cudaStream_t stream) {
    scale_kernel<<<1, 1, 0, stream>>>(scale, scale_inv, amax,
                                      type == Fp8Type::e4m3 ? 448.0f : 57344.0f);
    check_launch("scale_kernel");
}

template <typename T>
void quantize(void* out, const T* x, std::int64_t rows, std::int64_t cols, bool transpose,
              const float* scale, Fp8Type type, cudaStream_t stream) {
    require(rows >= 0 && cols >= 0, "quantize", "negative shape");
    if (rows * cols == 0) return;
    quantize_kernel<T><<<blocks_for(rows * cols), kThreads, 0, stream>>>(
        static_cast<__nv_fp8_storage_t*>(out), x, rows, cols, transpose, scale,
        type == Fp8Type::e4m3 ? __NV_E4M3 : __NV_E5M2);
    check_launch("quantize_kernel");
}

template void amax<float>(float*, const float*, std::int64_t, cudaStream_t);
template void amax<__nv_bfloat16>(float*, const __nv_bfloat16*, std::int64_t, cudaStream_t);
template void quantize<float>(void*, const float*, std::int64_t, std::int64_t, bool, const float*,
                              Fp8Type, cudaStream_t);
template void quantize<__nv_bfloat16>(void*, const __nv_bfloat16*, std::int64_t, std::int64_t, bool,
                                      const float*, Fp8Type, cudaStream_t);

} // namespace trident::kernels::cuda
