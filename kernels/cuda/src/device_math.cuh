#pragma once
// Device helpers shared by the elementwise and reduction kernels: bf16/fp32 conversion,
// 16-byte packs for vector loads and stores, warp and block sums.
#include <cstdint>
#include <cuda_bf16.h>

namespace trident::kernels::cuda::detail {

__device__ __forceinline__ float to_float(float x) {
    return x;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
    return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
    return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16(x);
}

// Elements of T in one 16-byte access.
template <typename T>
inline constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
    T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_pack(const T* p) {
    return *reinterpret_cast<const Pack<T, N>*>(p);
}
template <typename T, int N>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, N>& pack) {
    *reinterpret_cast<Pack<T, N>*>(p) = pack;
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
// `scratch` holds 32 floats; the call ends with a barrier so scratch may be reused at once.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    x = warp_sum(x);
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    float total = lane < warps ? scratch[lane] : 0.0f;
    total = warp_sum(total);
    __syncthreads();
    return total;
}

__device__ __forceinline__ float block_max(float x, float* scratch) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    x = warp_max(x);
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    float total = lane < warps ? scratch[lane] : -INFINITY;
    total = warp_max(total);
    __syncthreads();
    return total;
}

} // namespace trident::kernels::cuda::detail
