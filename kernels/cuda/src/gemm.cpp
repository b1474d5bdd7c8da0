// cuBLASLt plans: a Plan owns its matmul and matrix-layout descriptors and the algorithm the
// heuristic chose; LtGemm keeps one per (transposes, shape, leading dimensions, output type,
// beta ≠ 0, pointer alignment).
#include "trident/kernels/cuda/gemm.h"

#include "gemm_types.h"
#include "trident/kernels/cuda/error.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trident::kernels::cuda {

struct LtGemm::Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};

    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (desc) cublasLtMatmulDescDestroy(desc);
    }
};

namespace {

// Largest power of two (up to 256) dividing the address: cuBLASLt's alignment preference.
int alignment_bytes(const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    if (address == 0) return 256;
    return static_cast<int>(std::min<std::uintptr_t>(256, address & (~address + 1)));
}

using detail::data_type;

} // namespace

LtGemm::LtGemm(std::size_t workspace_bytes) : workspace_(workspace_bytes) {
    TRIDENT_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

LtGemm::~LtGemm() {
    plans_.clear();
    if (handle_) cublasLtDestroy(handle_);
}

const LtGemm::Plan& LtGemm::plan_for(const Key& key) {
    if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
    const auto [ta, tb, m, n, k, lda, ldb, ldd, out_type, accumulate, align, a_type, b_type] = key;
    auto plan = std::make_unique<Plan>();
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &op_a, sizeof(op_a)));
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                        &op_b, sizeof(op_b)));
    // Stored shapes: op(A) is m×k, so A is stored m×k (N) or k×m (T); likewise B.
    TRIDENT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, static_cast<cudaDataType_t>(a_type),
                                                    ta ? k : m, ta ? m : k, lda));
    TRIDENT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, static_cast<cudaDataType_t>(b_type),
                                                    tb ? n : k, tb ? k : n, ldb));
    TRIDENT_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan->d, static_cast<cudaDataType_t>(out_type), m, n, ldd));

    cublasLtMatmulPreference_t pref = nullptr;
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                    decltype(&cublasLtMatmulPreferenceDestroy)>
        pref_owner(pref, &cublasLtMatmulPreferenceDestroy);
    const std::size_t workspace = workspace_.size_bytes();
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    const auto align_u = static_cast<std::uint32_t>(align);
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        TRIDENT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, attr, &align_u, sizeof(align_u)));

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    TRIDENT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(
        handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found));
    if (found == 0)
        throw CudaError("cublasLtMatmulAlgoGetHeuristic",
                        "no algorithm for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                            " k=" + std::to_string(k));
    plan->algo = result.algo;
    (void)accumulate;
    return *plans_.emplace(key, std::move(plan)).first->second;
}

void LtGemm::matmul(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                    std::int64_t k, const void* a, std::int64_t lda, const void* b,
                    std::int64_t ldb, void* d, std::int64_t ldd, cudaDataType_t out_type,
                    float alpha, float beta, cudaStream_t stream) {
    if (m <= 0 || n <= 0 || k <= 0)
        throw std::invalid_argument("LtGemm::matmul: m, n and k must be positive");
    const int align = std::min({alignment_bytes(a), alignment_bytes(b), alignment_bytes(d)});
    const Key key{transpose_a,
                  transpose_b,
                  m,
                  n,
                  k,
                  lda,
                  ldb,
                  ldd,
                  static_cast<int>(out_type),
                  beta != 0.0f,
                  align,
                  int(CUDA_R_16BF),
                  int(CUDA_R_16BF)};
    run_plan(plan_for(key), alpha, a, b, beta, d, stream);
}

cublasLtMatmulDesc_t LtGemm::plan_descriptor(const Plan& plan) {
    return plan.desc;
}

void LtGemm::run_plan(const Plan& plan, float alpha, const void* a, const void* b, float beta,
                      void* d, cudaStream_t stream) {
    TRIDENT_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, d,
                                        plan.d, d, plan.d, &plan.algo, workspace_.get(),
                                        workspace_.size_bytes(), stream));
}

// y[N×OC] row-major is yᵀ[OC×N] column-major = W·xᵀ: W (stored C×OC column-major) transposed,
// xᵀ (stored C×N) as is.
template <typename OutT>
void LtGemm::forward(OutT* y, const __nv_bfloat16* x, const __nv_bfloat16* w, std::int64_t tokens,
                     std::int64_t in_features, std::int64_t out_features, float alpha, float beta,
                     cudaStream_t stream) {
    matmul(true, false, out_features, tokens, in_features, w, in_features, x, in_features, y,
           out_features, data_type<OutT>(), alpha, beta, stream);
}

// dx[N×C] row-major is dxᵀ[C×N] = Wᵀ·dyᵀ: W stored C×OC column-major, dyᵀ stored OC×N.
template <typename OutT>
void LtGemm::dgrad(OutT* dx, const __nv_bfloat16* dy, const __nv_bfloat16* w, std::int64_t tokens,
                   std::int64_t in_features, std::int64_t out_features, float alpha, float beta,
                   cudaStream_t stream) {
    matmul(false, false, in_features, tokens, out_features, w, in_features, dy, out_features, dx,
           in_features, data_type<OutT>(), alpha, beta, stream);
}

// dW[OC×C] row-major is dWᵀ[C×OC] = xᵀ·dy: xᵀ stored C×N, dy stored OC×N then transposed.
template <typename OutT>
void LtGemm::wgrad(OutT* dw, const __nv_bfloat16* dy, const __nv_bfloat16* x, std::int64_t tokens,
                   std::int64_t in_features, std::int64_t out_features, float alpha, float beta,
                   cudaStream_t stream) {
    matmul(false, true, in_features, out_features, tokens, x, in_features, dy, out_features, dw,
           in_features, data_type<OutT>(), alpha, beta, stream);
}

#define TRIDENT_INSTANTIATE_GEMM(OutT)                                                             \
    template void LtGemm::forward<OutT>(OutT*, const __nv_bfloat16*, const __nv_bfloat16*,         \
                                        std::int64_t, std::int64_t, std::int64_t, float, float,    \
                                        cudaStream_t);                                             \
    template void LtGemm::dgrad<OutT>(OutT*, const __nv_bfloat16*, const __nv_bfloat16*,           \
                                      std::int64_t, std::int64_t, std::int64_t, float, float,      \
                                      cudaStream_t);                                               \
    template void LtGemm::wgrad<OutT>(OutT*, const __nv_bfloat16*, const __nv_bfloat16*,           \
                                      std::int64_t, std::int64_t, std::int64_t, float, float,      \
                                      cudaStream_t);
TRIDENT_INSTANTIATE_GEMM(float)
TRIDENT_INSTANTIATE_GEMM(__nv_bfloat16)

} // namespace trident::kernels::cuda
