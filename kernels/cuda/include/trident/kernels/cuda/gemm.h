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

    std::size_t cached_plans() const { return plans_.size(); }

private:
    struct Plan;
    using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                           std::int64_t, std::int64_t, int, bool, int>;
    const Plan& plan_for(const Key& key);

    cublasLtHandle_t handle_ = nullptr;
    DeviceBuffer<std::byte> workspace_;
    std::map<Key, std::unique_ptr<Plan>> plans_;
};

} // namespace trident::kernels::cuda
