#pragma once
// bf16 GEMMs through cuBLASLt (fp32 accumulation, bf16 or fp32 output) in the three layouts
// of a transformer's linear layer, with a plan cache: the first call at a shape builds the
// descriptors and asks cuBLASLt's heuristic for an algorithm; later calls reuse both.
//
// Row-major, as nn.Linear stores them: x[N×C] (N tokens, C in-features), W[OC×C], y[N×OC].
//   forward: y  = alpha · x · Wᵀ + beta · y
//   dgrad:   dx = alpha · dy · W + beta · dx
//   wgrad:   dW = alpha · dyᵀ · x + beta · dW   (beta = 1 with an fp32 dW accumulates the main
//                                                 gradient across micro-batches)
// cuBLASLt is column-major, so each row-major product is issued as its transpose
// (Yᵀ = W·Xᵀ etc.), which reads the same memory without copies.
#include "trident/kernels/cuda/device_buffer.h"
#include "trident/kernels/cuda/fp8.h"

#include <cstddef>
#include <cstdint>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <map>
#include <memory>
#include <tuple>

namespace trident::kernels::cuda {

class LtGemm {
public:
    explicit LtGemm(std::size_t workspace_bytes = 32u << 20);
    ~LtGemm();
    LtGemm(const LtGemm&) = delete;
    LtGemm& operator=(const LtGemm&) = delete;

    // OutT is float or __nv_bfloat16.
    template <typename OutT>
    void forward(OutT* y, const __nv_bfloat16* x, const __nv_bfloat16* w, std::int64_t tokens,
                 std::int64_t in_features, std::int64_t out_features, float alpha, float beta,
                 cudaStream_t stream);
    template <typename OutT>
    void dgrad(OutT* dx, const __nv_bfloat16* dy, const __nv_bfloat16* w, std::int64_t tokens,
               std::int64_t in_features, std::int64_t out_features, float alpha, float beta,
               cudaStream_t stream);
    template <typename OutT>
    void wgrad(OutT* dw, const __nv_bfloat16* dy, const __nv_bfloat16* x, std::int64_t tokens,
               std::int64_t in_features, std::int64_t out_features, float alpha, float beta,
               cudaStream_t stream);

    // Column-major D[m×n] = alpha · op(A) · op(B) + beta · D, A and B bf16, D of `out_type`
    // (CUDA_R_16BF or CUDA_R_32F); the layouts above are special cases.
    void matmul(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
                const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* d,
                std::int64_t ldd, cudaDataType_t out_type, float alpha, float beta,
                cudaStream_t stream);

    // FP8 (Hopper or later): column-major D[m×n] = alpha · (a_scale_inv · b_scale_inv) ·
    // Aᵀ·B + beta · D, A stored k×m and B stored k×n (the "TN" layout, the only one cuBLASLt's
    // FP8 kernels take), each E4M3 or E5M2 (not both E5M2), their dequantisation factors
    // (fp8.h's scale_inv) as device pointers; D bf16 or fp32 of `out_type`.
    void matmul_fp8(std::int64_t m, std::int64_t n, std::int64_t k, const void* a, Fp8Type a_type,
                    const float* a_scale_inv, const void* b, Fp8Type b_type,
                    const float* b_scale_inv, void* d, std::int64_t ldd, cudaDataType_t out_type,
                    float alpha, float beta, cudaStream_t stream);
    // A linear layer's three FP8 products, row-major as above, from the operands fp8.h's
    // quantize writes (the transposed copies where the layout needs them):
    //   forward: y[N×OC]  from x [N×C] and w [OC×C]
    //   dgrad:   dx[N×C]  from dy [N×OC] and wᵀ [C×OC]
    //   wgrad:   dW[OC×C] from dyᵀ [OC×N] and xᵀ [C×N]
    template <typename OutT>
    void forward_fp8(OutT* y, const void* x, Fp8Type x_type, const float* x_scale_inv,
                     const void* w, Fp8Type w_type, const float* w_scale_inv, std::int64_t tokens,
                     std::int64_t in_features, std::int64_t out_features, float beta,
                     cudaStream_t stream);
    template <typename OutT>
    void dgrad_fp8(OutT* dx, const void* dy, Fp8Type dy_type, const float* dy_scale_inv,
                   const void* w_t, Fp8Type w_type, const float* w_scale_inv, std::int64_t tokens,
                   std::int64_t in_features, std::int64_t out_features, float beta,
                   cudaStream_t stream);
    template <typename OutT>
    void wgrad_fp8(OutT* dw, const void* dy_t, Fp8Type dy_type, const float* dy_scale_inv,
                   const void* x_t, Fp8Type x_type, const float* x_scale_inv, std::int64_t tokens,
                   std::int64_t in_features, std::int64_t out_features, float beta,
                   cudaStream_t stream);

    std::size_t cached_plans() const { return plans_.size(); }

private:
    struct Plan;
    // Transposes, m, n, k, leading dimensions, output type, accumulate, alignment, A and B
    // types.
    using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                           std::int64_t, std::int64_t, int, bool, int, int, int>;
    const Plan& plan_for(const Key& key);
    // The plan's matmul descriptor (per-call attributes), and the matmul itself.
    static cublasLtMatmulDesc_t plan_descriptor(const Plan& plan);
    void run_plan(const Plan& plan, float alpha, const void* a, const void* b, float beta, void* d,
                  cudaStream_t stream);

    cublasLtHandle_t handle_ = nullptr;
    DeviceBuffer<std::byte> workspace_;
    std::map<Key, std::unique_ptr<Plan>> plans_;
};

} // namespace trident::kernels::cuda
