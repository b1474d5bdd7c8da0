#pragma once
// FP8 operands for cuBLASLt's FP8 GEMMs (Hopper and later), tensorwise scaling kept on the
// device: no host synchronisation between a tensor's amax, its scale and its cast.
//   amax:            amax[0] = max(amax[0], max_i |x[i]|)     (amax zeroed by the caller; a
//                    NaN makes it infinite)
//   scale_from_amax: scale = fp8_max / amax, at most FLT_MAX (1 when amax is 0 or not finite),
//                    scale_inv = 1/scale
//                    (what the GEMM multiplies its product by:
//                    CUBLASLT_MATMUL_DESC_*_SCALE_POINTER)
//   quantize:        out = fp8(x · scale), rounding to nearest even and saturating to ±max
//                    (__nv_cvt_float_to_fp8 with __NV_SATFINITE), row-major [rows × cols], or
//                    its transpose [cols × rows] when `transpose` — cuBLASLt's FP8 kernels take
//                    only the "TN" layout, so the dgrad and wgrad operands are transposed copies,
//                    as Transformer Engine keeps them.
// The CPU reference of all three is kernels/cpu fp8.h (fp8_scale, fp8_round); the GPU tests
// compare against it.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

enum class Fp8Type { e4m3, e5m2 };

template <typename T> // float or __nv_bfloat16
void amax(float* amax, const T* x, std::int64_t n, cudaStream_t stream);

void scale_from_amax(float* scale, float* scale_inv, const float* amax, Fp8Type type,
                     cudaStream_t stream);

template <typename T>
void quantize(void* out, const T* x, std::int64_t rows, std::int64_t cols, bool transpose,
              const float* scale, Fp8Type type, cudaStream_t stream);

} // namespace trident::kernels::cuda
