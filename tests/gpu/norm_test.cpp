// Residual-add LayerNorm / RMSNorm against double-precision loops on the CPU.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/norm.h"

namespace trident::kernels::cuda::testing {
namespace {

struct NormReference {
    std::vector<double> out, dsum, dgamma, dbeta;
};

// sum holds the rounded residual sums the device stored; everything else in double.
NormReference norm_reference(bool rms, const std::vector<double>& sum,
                             const std::vector<double>& gamma, const std::vector<double>& beta,
                             const std::vector<double>& dout, const std::vector<double>& dsum_in,
                             std::int64_t rows, std::int64_t cols, double eps) {
    NormReference r{std::vector<double>(rows * cols), std::vector<double>(rows * cols),
                    std::vector<double>(cols, 0.0), std::vector<double>(cols, 0.0)};
    for (std::int64_t i = 0; i < rows; ++i) {
        const double* s = &sum[i * cols];
        double mean = 0.0, var = 0.0;
        if (!rms) {
            for (std::int64_t c = 0; c < cols; ++c) mean += s[c];
            mean /= cols;
        }
        for (std::int64_t c = 0; c < cols; ++c) var += (s[c] - mean) * (s[c] - mean);
        const double rstd = 1.0 / std::sqrt(var / cols + eps);
        double mean_g = 0.0, mean_gx = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) {
            const double xhat = (s[c] - mean) * rstd;
            const double dy = dout[i * cols + c];
            r.out[i * cols + c] = xhat * gamma[c] + (rms ? 0.0 : beta[c]);
            mean_g += gamma[c] * dy / cols;
            mean_gx += gamma[c] * dy * xhat / cols;
            r.dgamma[c] += dy * xhat;
            r.dbeta[c] += dy;
        }
        for (std::int64_t c = 0; c < cols; ++c) {
            const double xhat = (s[c] - mean) * rstd;
            const double g = gamma[c] * dout[i * cols + c];
            r.dsum[i * cols + c] = rstd * (g - (rms ? 0.0 : mean_g) - xhat * mean_gx) +
                                   (dsum_in.empty() ? 0.0 : dsum_in[i * cols + c]);
        }
    }
    return r;
}

template <typename T>
void check_norm(bool rms, std::int64_t rows, std::int64_t cols, bool with_residual) {
    const float eps = 1e-5f;
    const std::size_t n = rows * cols;
    const auto x = convert<T>(random_floats(n, 1, 1.0f, 0.5f));
    const auto res = convert<T>(random_floats(n, 2));
    const auto gamma = convert<T>(random_floats(cols, 3, 0.2f, 1.0f));
    const auto beta = convert<T>(random_floats(cols, 4, 0.2f));
    const auto dout = convert<T>(random_floats(n, 5));
    const auto dsum_in = convert<T>(random_floats(n, 6));
    const std::vector<float> dgamma0(cols, 0.25f), dbeta0(cols, -0.5f);

    DeviceBuffer<T> dx(x), dres(res), dgam(gamma), dbet(beta), ddout(dout), ddsum_in(dsum_in);
    DeviceBuffer<T> dsum(n), dout_norm(n), ddsum(n);
    DeviceBuffer<float> dmean(rows), drstd(rows), ddgamma(dgamma0), ddbeta(dbeta0);
    dsum.fill_bytes(0xFF);
    dout_norm.fill_bytes(0xFF);
    ddsum.fill_bytes(0xFF);
    const T* residual = with_residual ? dres.get() : nullptr;
    if (rms) {
        residual_rmsnorm_forward<T>(dsum.get(), dout_norm.get(), drstd.get(), dx.get(), residual,
                                    dgam.get(), rows, cols, eps, nullptr);
        residual_rmsnorm_backward<T>(ddsum.get(), ddgamma.get(), ddout.get(), ddsum_in.get(),
                                     dsum.get(), dgam.get(), drstd.get(), rows, cols, nullptr);
    } else {
        residual_layernorm_forward<T>(dsum.get(), dout_norm.get(), dmean.get(), drstd.get(),
                                      dx.get(), residual, dgam.get(), dbet.get(), rows, cols, eps,
                                      nullptr);
        residual_layernorm_backward<T>(ddsum.get(), ddgamma.get(), ddbeta.get(), ddout.get(),
                                       ddsum_in.get(), dsum.get(), dgam.get(), dmean.get(),
                                       drstd.get(), rows, cols, nullptr);
    }
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<double> sum_ref(n);
    for (std::size_t i = 0; i < n; ++i)
        sum_ref[i] = double(to_float(x[i])) + (with_residual ? double(to_float(res[i])) : 0.0);
    const auto sum_got = dsum.to_host();
    EXPECT_LT(relative_error(sum_got, sum_ref), tolerance<T>());

    const auto ref = norm_reference(rms, widen(sum_got), widen(gamma), widen(beta), widen(dout),
                                    widen(dsum_in), rows, cols, eps);
    EXPECT_LT(relative_error(dout_norm.to_host(), ref.out), tolerance<T>()) << "forward";
    EXPECT_LT(relative_error(ddsum.to_host(), ref.dsum), 2 * tolerance<T>()) << "dsum";
    std::vector<double> dgamma_ref(cols), dbeta_ref(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
        dgamma_ref[c] = ref.dgamma[c] + dgamma0[c];
        dbeta_ref[c] = ref.dbeta[c] + dbeta0[c];
    }
    EXPECT_LT(relative_error(ddgamma.to_host(), dgamma_ref), 1e-4) << "dgamma (accumulated)";
    if (!rms) {
        EXPECT_LT(relative_error(ddbeta.to_host(), dbeta_ref), 1e-4) << "dbeta";
    }
}

class NormTest : public GpuTest {};

TEST_F(NormTest, LayerNormBf16WithResidual) {
    check_norm<bf16>(false, 67, 1024, true);
}
TEST_F(NormTest, LayerNormBf16WideRow) {
    check_norm<bf16>(false, 9, 12288, true);
}
TEST_F(NormTest, LayerNormFp32OddWidth) {
    check_norm<float>(false, 33, 100, true);
}
TEST_F(NormTest, LayerNormBf16NoResidualScalarPath) {
    check_norm<bf16>(false, 20, 90, false);
}
TEST_F(NormTest, RmsNormBf16WithResidual) {
    check_norm<bf16>(true, 67, 2048, true);
}
TEST_F(NormTest, RmsNormFp32) {
    check_norm<float>(true, 41, 256, true);
}

} // namespace
} // namespace trident::kernels::cuda::testing
