#pragma once
// What the CPU kernel tests share: seeded random inputs, the dot product their losses are, and
// the finite-difference check of a backward.
#include <cmath>
#include <cstddef>
#include <functional>
#include <gtest/gtest.h>
#include <random>
#include <vector>

namespace trident::kernels::test {

using Vec = std::vector<float>;

inline Vec random_vec(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    Vec v(n);
    for (auto& x : v) x = d(g);
    return v;
}

inline double dot(const Vec& a, const Vec& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
    return s;
}

// Checks analytic gradient `grad` of `loss` w.r.t. `x` at a sample of coordinates.
inline void check_gradient(Vec& x, const Vec& grad, const std::function<double()>& loss,
                           const char* what, float eps = 1e-2f, double tol = 2e-2) {
    ASSERT_EQ(x.size(), grad.size());
    const std::size_t stride = std::max<std::size_t>(1, x.size() / 40);
    for (std::size_t i = 0; i < x.size(); i += stride) {
        const float saved = x[i];
        x[i] = saved + eps;
        const double up = loss();
        x[i] = saved - eps;
        const double down = loss();
        x[i] = saved;
        const double numeric = (up - down) / (2.0 * eps);
        EXPECT_NEAR(grad[i], numeric, tol * (1.0 + std::fabs(numeric))) << what << " [" << i << "]";
    }
}

} // namespace trident::kernels::test
