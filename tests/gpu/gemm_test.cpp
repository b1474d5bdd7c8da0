// cuBLASLt GEMMs in the three transformer layouts against double-precision CPU products.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/gemm.h"

namespace trident::kernels::cuda::testing {
namespace {

class GemmTest : public GpuTest {};

constexpr std::int64_t kTokens = 136, kIn = 200, kOut = 72;

struct Operands {
    std::vector<bf16> x, w, dy;
    DeviceBuffer<bf16> dx, dw, ddy;
};

Operands make_operands() {
    Operands o;
    o.x = convert<bf16>(random_floats(kTokens * kIn, 71));
    o.w = convert<bf16>(random_floats(kOut * kIn, 72));
    o.dy = convert<bf16>(random_floats(kTokens * kOut, 73));
    o.dx = DeviceBuffer<bf16>(o.x);
    o.dw = DeviceBuffer<bf16>(o.w);
    o.ddy = DeviceBuffer<bf16>(o.dy);
    return o;
}

// Row-major C[M×N] = Σ_k A(m,k)·B(k,n) with accessor lambdas.
template <typename A, typename B>
std::vector<double> product(std::int64_t M, std::int64_t N, std::int64_t K, A a, B b) {
    std::vector<double> c(M * N, 0.0);
    for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
            double s = 0.0;
            for (std::int64_t k = 0; k < K; ++k) s += a(m, k) * b(k, n);
            c[m * N + n] = s;
        }
    return c;
}

TEST_F(GemmTest, ForwardDgradWgradBf16Out) {
    auto o = make_operands();
    LtGemm gemm;
    DeviceBuffer<bf16> y(kTokens * kOut), dxo(kTokens * kIn), dwo(kOut * kIn);
    y.fill_bytes(0xFF);
    dxo.fill_bytes(0xFF);
    dwo.fill_bytes(0xFF);
    gemm.forward(y.get(), o.dx.get(), o.dw.get(), kTokens, kIn, kOut, 1.0f, 0.0f, nullptr);
    gemm.dgrad(dxo.get(), o.ddy.get(), o.dw.get(), kTokens, kIn, kOut, 1.0f, 0.0f, nullptr);
    gemm.wgrad(dwo.get(), o.ddy.get(), o.dx.get(), kTokens, kIn, kOut, 1.0f, 0.0f, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto X = [&](std::int64_t r, std::int64_t c) {
        return double(to_float(o.x[r * kIn + c]));
    };
    const auto W = [&](std::int64_t r, std::int64_t c) {
        return double(to_float(o.w[r * kIn + c]));
    };
    const auto DY = [&](std::int64_t r, std::int64_t c) {
        return double(to_float(o.dy[r * kOut + c]));
    };
    const auto y_ref = product(kTokens, kOut, kIn, X, [&](auto k, auto n) { return W(n, k); });
    const auto dx_ref = product(kTokens, kIn, kOut, DY, W);
    const auto dw_ref = product(
        kOut, kIn, kTokens, [&](auto m, auto k) { return DY(k, m); }, X);
    EXPECT_LT(relative_error(y.to_host(), y_ref), tolerance<bf16>()) << "forward";
    EXPECT_LT(relative_error(dxo.to_host(), dx_ref), tolerance<bf16>()) << "dgrad";
    EXPECT_LT(relative_error(dwo.to_host(), dw_ref), tolerance<bf16>()) << "wgrad";
    EXPECT_EQ(gemm.cached_plans(), 3u);
    gemm.forward(y.get(), o.dx.get(), o.dw.get(), kTokens, kIn, kOut, 1.0f, 0.0f, nullptr);
    EXPECT_EQ(gemm.cached_plans(), 3u) << "the second call at a shape reuses its plan";
}

TEST_F(GemmTest, WgradAccumulatesIntoFp32) {
    auto o = make_operands();
    LtGemm gemm;
    const auto dw0 = random_floats(kOut * kIn, 74);
    DeviceBuffer<float> dw(dw0);
    gemm.wgrad(dw.get(), o.ddy.get(), o.dx.get(), kTokens, kIn, kOut, 1.0f, 1.0f, nullptr);
    gemm.wgrad(dw.get(), o.ddy.get(), o.dx.get(), kTokens, kIn, kOut, 1.0f, 1.0f, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    auto ref = product(
        kOut, kIn, kTokens, [&](auto m, auto k) { return double(to_float(o.dy[k * kOut + m])); },
        [&](auto k, auto n) { return double(to_float(o.x[k * kIn + n])); });
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = dw0[i] + 2.0 * ref[i];
    EXPECT_LT(relative_error(dw.to_host(), ref), 1e-5) << "fp32 main-gradient accumulation";
}

TEST_F(GemmTest, ForwardFp32Out) {
    auto o = make_operands();
    LtGemm gemm;
    DeviceBuffer<float> y(kTokens * kOut);
    y.fill_bytes(0xFF);
    gemm.forward(y.get(), o.dx.get(), o.dw.get(), kTokens, kIn, kOut, 0.5f, 0.0f, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto ref = product(
        kTokens, kOut, kIn, [&](auto m, auto k) { return 0.5 * to_float(o.x[m * kIn + k]); },
        [&](auto k, auto n) { return double(to_float(o.w[n * kIn + k])); });
    EXPECT_LT(relative_error(y.to_host(), ref), 1e-5);
}

} // namespace
} // namespace trident::kernels::cuda::testing
