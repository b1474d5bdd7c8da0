// Causal flash attention (forward: output and logsumexp; backward: dq, dk, dv) against a
// double-precision CPU implementation that materialises the probabilities.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/flash_attention.h"

#include <cstdlib>

namespace trident::kernels::cuda {
// Names a shape in test output instead of GoogleTest's byte dump.
void PrintTo(const AttentionShape& s, std::ostream* os) {
    *os << "b" << s.batch << " t" << s.seq << " h" << s.heads << " kv" << s.kv_heads << " d"
        << s.head_dim;
}
} // namespace trident::kernels::cuda

namespace trident::kernels::cuda::testing {
namespace {

struct AttentionReference {
    std::vector<double> out, lse, dq, dk, dv;
};

// Layouts as in flash_attention.h; inputs already rounded to bf16.
AttentionReference attention_reference(const AttentionShape& s, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       const std::vector<double>& dout) {
    const std::int64_t B = s.batch, T = s.seq, H = s.heads, KV = s.kv_heads, D = s.head_dim;
    const double scale = 1.0 / std::sqrt(double(D));
    AttentionReference r{std::vector<double>(B * T * H * D, 0.0), std::vector<double>(B * H * T),
                         std::vector<double>(B * T * H * D, 0.0),
                         std::vector<double>(B * T * KV * D, 0.0),
                         std::vector<double>(B * T * KV * D, 0.0)};
    const auto qi = [&](auto b, auto t, auto h, auto d) { return ((b * T + t) * H + h) * D + d; };
    const auto ki = [&](auto b, auto t, auto h, auto d) { return ((b * T + t) * KV + h) * D + d; };
    std::vector<double> p(T), dp(T);
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t hk = h / (H / KV);
            for (std::int64_t i = 0; i < T; ++i) {
                double m = -INFINITY;
                for (std::int64_t j = 0; j <= i; ++j) {
                    double sdot = 0.0;
                    for (std::int64_t d = 0; d < D; ++d)
                        sdot += q[qi(b, i, h, d)] * k[ki(b, j, hk, d)];
                    p[j] = sdot * scale;
                    m = std::max(m, p[j]);
                }
                double sum = 0.0;
                for (std::int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - m));
                r.lse[(b * H + h) * T + i] = m + std::log(sum);
                for (std::int64_t j = 0; j <= i; ++j) p[j] /= sum;
                double delta = 0.0;
                for (std::int64_t d = 0; d < D; ++d) {
                    double o = 0.0;
                    for (std::int64_t j = 0; j <= i; ++j) o += p[j] * v[ki(b, j, hk, d)];
                    r.out[qi(b, i, h, d)] = o;
                    delta += o * dout[qi(b, i, h, d)];
                }
                for (std::int64_t j = 0; j <= i; ++j) {
                    double s_dp = 0.0;
                    for (std::int64_t d = 0; d < D; ++d)
                        s_dp += dout[qi(b, i, h, d)] * v[ki(b, j, hk, d)];
                    const double ds = p[j] * (s_dp - delta);
                    for (std::int64_t d = 0; d < D; ++d) {
                        r.dv[ki(b, j, hk, d)] += p[j] * dout[qi(b, i, h, d)];
                        r.dq[qi(b, i, h, d)] += scale * ds * k[ki(b, j, hk, d)];
                        r.dk[ki(b, j, hk, d)] += scale * ds * q[qi(b, i, h, d)];
                    }
                }
            }
        }
    return r;
}

class FlashAttentionTest : public GpuTest, public ::testing::WithParamInterface<AttentionShape> {};

TEST_P(FlashAttentionTest, ForwardAndBackwardMatchReference) {
    const AttentionShape s = GetParam();
    const std::int64_t nq = s.batch * s.seq * s.heads * s.head_dim;
    const std::int64_t nkv = s.batch * s.seq * s.kv_heads * s.head_dim;
    const auto q = convert<bf16>(random_floats(nq, 81));
    const auto k = convert<bf16>(random_floats(nkv, 82));
    const auto v = convert<bf16>(random_floats(nkv, 83));
    const auto dout = convert<bf16>(random_floats(nq, 84));
    DeviceBuffer<bf16> dq_in(q), dk_in(k), dv_in(v), ddout(dout);
    DeviceBuffer<bf16> out(nq), dq(nq), dk(nkv), dv(nkv);
    DeviceBuffer<float> lse(s.batch * s.heads * s.seq);
    DeviceBuffer<float> workspace(flash_attention_backward_workspace_floats(s));
    for (auto* buf : {&out, &dq, &dk, &dv}) buf->fill_bytes(0xFF);
    lse.fill_bytes(0xFF);
    const auto ref = attention_reference(s, widen(q), widen(k), widen(v), widen(dout));
    // Both forward block shapes (64 and, where seq allows, 128 query rows); the last one run,
    // the default, feeds the backward.
    for (const char* rows : {"64", "128", ""}) {
        if (*rows)
            setenv("TRIDENT_FLASH_FORWARD_ROWS", rows, 1);
        else
            unsetenv("TRIDENT_FLASH_FORWARD_ROWS");
        out.fill_bytes(0xFF);
        lse.fill_bytes(0xFF);
        flash_attention_forward(out.get(), lse.get(), dq_in.get(), dk_in.get(), dv_in.get(), s,
                                nullptr);
        TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_LT(relative_error(out.to_host(), ref.out), 1e-2) << "out, rows " << rows;
        EXPECT_LT(relative_error(lse.to_host(), ref.lse), 1e-4) << "logsumexp, rows " << rows;
    }
    flash_attention_backward(dq.get(), dk.get(), dv.get(), ddout.get(), dq_in.get(), dk_in.get(),
                             dv_in.get(), out.get(), lse.get(), workspace.get(), s, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(dq.to_host(), ref.dq), 2e-2) << "dq";
    EXPECT_LT(relative_error(dk.to_host(), ref.dk), 2e-2) << "dk";
    EXPECT_LT(relative_error(dv.to_host(), ref.dv), 2e-2) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionTest,
                         ::testing::Values(AttentionShape{2, 128, 4, 2, 64, 0.0f},
                                           AttentionShape{1, 192, 4, 1, 128, 0.0f},
                                           AttentionShape{1, 256, 2, 2, 128, 0.0f},
                                           AttentionShape{1, 64, 3, 3, 64, 0.0f}),
                         [](const ::testing::TestParamInfo<AttentionShape>& info) {
                             const auto& s = info.param;
                             return "b" + std::to_string(s.batch) + "_t" + std::to_string(s.seq) +
                                    "_h" + std::to_string(s.heads) + "_kv" +
                                    std::to_string(s.kv_heads) + "_d" + std::to_string(s.head_dim);
                         });

TEST(FlashAttentionShape, RejectsUnsupportedShapes) {
    EXPECT_THROW(check_attention_shape({1, 100, 4, 4, 64, 0.0f}), std::invalid_argument);
    EXPECT_THROW(check_attention_shape({1, 128, 4, 4, 96, 0.0f}), std::invalid_argument);
    EXPECT_THROW(check_attention_shape({1, 128, 4, 3, 64, 0.0f}), std::invalid_argument);
    EXPECT_NO_THROW(check_attention_shape({2, 2048, 32, 8, 128, 0.0f}));
}

} // namespace
} // namespace trident::kernels::cuda::testing
