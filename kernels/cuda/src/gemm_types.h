#pragma once
// The cuBLASLt data type of a GEMM output element (gemm.cpp, gemm_fp8.cpp).
#include <cuda_bf16.h>
#include <library_types.h>

namespace trident::kernels::cuda::detail {

template <typename OutT>
cudaDataType_t data_type();
template <>
inline cudaDataType_t data_type<float>() {
    return CUDA_R_32F;
}
template <>
inline cudaDataType_t data_type<__nv_bfloat16>() {
    return CUDA_R_16BF;
}

} // namespace trident::kernels::cuda::detail
