// Multi-tensor AdamW and the gradient squared norm against a double-precision CPU loop, over
// many tensors, including one large enough to be split across launches.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/adamw.h"

namespace trident::kernels::cuda::testing {
namespace {

class AdamWTest : public GpuTest {};

std::vector<std::int64_t> tensor_sizes() {
    std::vector<std::int64_t> sizes;
    for (int i = 0; i < 40; ++i) sizes.push_back(1 + (i * 7919) % 50000); // odd sizes, >24 tensors
    sizes.push_back(6'000'001); // more chunks than one launch's table holds
    sizes.push_back(3);
    return sizes;
}

TEST_F(AdamWTest, ManyTensorsMatchReference) {
    const auto sizes = tensor_sizes();
    AdamWConfig cfg;
    cfg.lr = 1e-3f;
    cfg.weight_decay = 0.1f;
    cfg.step = 3;
    cfg.grad_scale = 0.7f;
    std::vector<DeviceBuffer<float>> p, g, m, v;
    std::vector<DeviceBuffer<bf16>> copy;
    std::vector<std::vector<float>> hp, hg, hm, hv;
    std::vector<AdamWTensor> tensors;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const auto n = static_cast<std::size_t>(sizes[i]);
        hp.push_back(random_floats(n, 100 + i));
        hg.push_back(random_floats(n, 200 + i, 0.1f));
        hm.push_back(random_floats(n, 300 + i, 0.01f));
        auto vv = random_floats(n, 400 + i, 0.001f);
        for (auto& x : vv) x = std::abs(x);
        hv.push_back(vv);
        p.emplace_back(hp.back());
        g.emplace_back(hg.back());
        m.emplace_back(hm.back());
        v.emplace_back(hv.back());
        copy.emplace_back(i % 2 == 0 ? n : 0);
        tensors.push_back({p.back().get(), g.back().get(), m.back().get(), v.back().get(),
                           copy.back().get(), sizes[i]});
    }
    adamw_step(tensors, cfg, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());

    const double b1 = cfg.beta1, b2 = cfg.beta2;
    const double bias1 = 1.0 - std::pow(b1, cfg.step), bias2 = 1.0 - std::pow(b2, cfg.step);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::size_t n = sizes[i];
        std::vector<double> pr(n), mr(n), vr(n);
        for (std::size_t j = 0; j < n; ++j) {
            const double gj = double(hg[i][j]) * cfg.grad_scale;
            mr[j] = b1 * hm[i][j] + (1 - b1) * gj;
            vr[j] = b2 * hv[i][j] + (1 - b2) * gj * gj;
            const double upd = (mr[j] / bias1) / (std::sqrt(vr[j] / bias2) + cfg.eps);
            pr[j] = hp[i][j] - cfg.lr * (upd + cfg.weight_decay * hp[i][j]);
        }
        ASSERT_LT(relative_error(p[i].to_host(), pr), 1e-6) << "param of tensor " << i;
        ASSERT_LT(relative_error(m[i].to_host(), mr), 1e-6) << "exp_avg of tensor " << i;
        ASSERT_LT(relative_error(v[i].to_host(), vr), 1e-6) << "exp_avg_sq of tensor " << i;
        if (copy[i].size() > 0) {
            ASSERT_LT(relative_error(copy[i].to_host(), pr), tolerance<bf16>())
                << "bf16 copy " << i;
        }
    }
}

TEST_F(AdamWTest, GradientSquaredNormOverManyTensors) {
    const auto sizes = tensor_sizes();
    std::vector<DeviceBuffer<float>> g;
    std::vector<GradientView> views;
    double ref = 0.0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const auto host = random_floats(sizes[i], 500 + i);
        for (float x : host) ref += double(x) * x;
        g.emplace_back(host);
        views.push_back({g.back().get(), sizes[i]});
    }
    DeviceBuffer<float> out(std::vector<float>{0.0f});
    gradient_squared_norm(out.get(), views, nullptr);
    const float got = out.to_host()[0];
    EXPECT_NEAR(got, ref, 1e-5 * ref);
}

} // namespace
} // namespace trident::kernels::cuda::testing
