// FP8 GEMMs through cuBLASLt (Hopper or later): the TN layout, per-operand dequantisation
// factors as device pointers (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER), fp32 accumulation,
// bf16 or fp32 output. The plan cache is LtGemm's (gemm.cpp), keyed with the operand types.
#include "gemm_types.h"
#include "trident/kernels/cuda/error.h"
#include "trident/kernels/cuda/gemm.h"

#include <algorithm>
#include <stdexcept>

namespace trident::kernels::cuda {
namespace {

cudaDataType_t cuda_type(Fp8Type t) {
    return t == Fp8Type::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

template <typename OutT>
cudaDataType_t out_type() {
    return detail::data_type<OutT>();
}

} // namespace

void LtGemm::matmul_fp8(std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                        Fp8Type a_type, const float* a_scale_inv, const void* b, Fp8Type b_type,
                        const float* b_scale_inv, void* d, std::int64_t ldd, cudaDataType_t out,
                        float alpha, float beta, cudaStream_t stream) {
    if (m <= 0 || n <= 0 || k <= 0)
        throw std::invalid_argument("LtGemm::matmul_fp8: m, n and k must be positive");
    if (a_type == Fp8Type::e5m2 && b_type == Fp8Type::e5m2)
        throw std::invalid_argument("LtGemm::matmul_fp8: E5M2 × E5M2 has no cuBLASLt kernel");
    // cuBLASLt's FP8 kernels want 16-byte-aligned leading dimensions: k a multiple of 16.
    if (k % 16 != 0)
        throw std::invalid_argument("LtGemm::matmul_fp8: k = " + std::to_string(k) +
                                    " is not a multiple of 16");
    const auto address = [](const void* p) {
        const auto v = reinterpret_cast<std::uintptr_t>(p);
        return v == 0 ? 256 : int(std::min<std::uintptr_t>(256, v & (~v + 1)));
    };
    const int align = std::min({address(a), address(b), address(d)});
    const Key key{true,
                  false,
                  m,
                  n,
                  k,
                  k,
                  k,
                  ldd,
                  static_cast<int>(out),
                  beta != 0.0f,
                  align,
                  static_cast<int>(cuda_type(a_type)),
                  static_cast<int>(cuda_type(b_type))};
    const Plan& plan = plan_for(key);
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_descriptor(plan),
                                                        CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                        &a_scale_inv, sizeof(a_scale_inv)));
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_descriptor(plan),
                                                        CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                        &b_scale_inv, sizeof(b_scale_inv)));
    run_plan(plan, alpha, a, b, beta, d, stream);
}

// y[N×OC] row-major is yᵀ[OC×N] = W·xᵀ: W[OC×C] row-major is stored C×OC (k×m), x[N×C] is
// stored C×N (k×n).
template <typename OutT>
void LtGemm::forward_fp8(OutT* y, const void* x, Fp8Type x_type, const float* x_scale_inv,
                         const void* w, Fp8Type w_type, const float* w_scale_inv,
                         std::int64_t tokens, std::int64_t in_features, std::int64_t out_features,
                         float beta, cudaStream_t stream) {
    matmul_fp8(out_features, tokens, in_features, w, w_type, w_scale_inv, x, x_type, x_scale_inv, y,
               out_features, out_type<OutT>(), 1.0f, beta, stream);
}

// dx[N×C] is dxᵀ[C×N] = Wᵀ·dyᵀ: wᵀ[C×OC] row-major is stored OC×C (k×m), dy[N×OC] is stored
// OC×N (k×n).
template <typename OutT>
void LtGemm::dgrad_fp8(OutT* dx, const void* dy, Fp8Type dy_type, const float* dy_scale_inv,
                       const void* w_t, Fp8Type w_type, const float* w_scale_inv,
                       std::int64_t tokens, std::int64_t in_features, std::int64_t out_features,
                       float beta, cudaStream_t stream) {
    matmul_fp8(in_features, tokens, out_features, w_t, w_type, w_scale_inv, dy, dy_type,
               dy_scale_inv, dx, in_features, out_type<OutT>(), 1.0f, beta, stream);
}

// dW[OC×C] is dWᵀ[C×OC] = xᵀ·dy: xᵀ[C×N] row-major is stored N×C (k×m), dyᵀ[OC×N] is stored
// N×OC (k×n).
template <typename OutT>
void LtGemm::wgrad_fp8(OutT* dw, const void* dy_t, Fp8Type dy_type, const float* dy_scale_inv,
                       const void* x_t, Fp8Type x_type, const float* x_scale_inv,
                       std::int64_t tokens, std::int64_t in_features, std::int64_t out_features,
                       float beta, cudaStream_t stream) {
    matmul_fp8(in_features, out_features, tokens, x_t, x_type, x_scale_inv, dy_t, dy_type,
               dy_scale_inv, dw, in_features, out_type<OutT>(), 1.0f, beta, stream);
}

#define TRIDENT_INSTANTIATE_FP8_GEMM(OutT)                                                         \
    template void LtGemm::forward_fp8<OutT>(OutT*, const void*, Fp8Type, const float*,             \
                                            const void*, Fp8Type, const float*, std::int64_t,      \
                                            std::int64_t, std::int64_t, float, cudaStream_t);      \
    template void LtGemm::dgrad_fp8<OutT>(OutT*, const void*, Fp8Type, const float*, const void*,  \
                                          Fp8Type, const float*, std::int64_t, std::int64_t,       \
                                          std::int64_t, float, cudaStream_t);                      \
    template void LtGemm::wgrad_fp8<OutT>(OutT*, const void*, Fp8Type, const float*, const void*,  \
                                          Fp8Type, const float*, std::int64_t, std::int64_t,       \
                                          std::int64_t, float, cudaStream_t);
TRIDENT_INSTANTIATE_FP8_GEMM(float)
TRIDENT_INSTANTIATE_FP8_GEMM(__nv_bfloat16)

} // namespace trident::kernels::cuda
