// LayerNorm and RMSNorm, forward and backward (the backward follows llm.c's derivation).
#include "trident/kernels/cpu.h"

#include <cmath>

namespace trident::kernels::cpu {
namespace {
constexpr std::int64_t kColumnGrain = 64; // columns of a weight-gradient block (a cache line ×4)
} // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C, float eps) {
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n) {
            const float* x = inp + n * C;
            float m = 0.0f;
            for (std::int64_t i = 0; i < C; ++i) m += x[i];
            m /= float(C);
            float var = 0.0f;
            for (std::int64_t i = 0; i < C; ++i) var += (x[i] - m) * (x[i] - m);
            const float s = 1.0f / std::sqrt(var / float(C) + eps);
            for (std::int64_t i = 0; i < C; ++i)
                out[n * C + i] = (x[i] - m) * s * weight[i] + bias[i];
            mean[n] = m;
            rstd[n] = s;
        }
    });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C) {
    // Rows in parallel for the input gradient; then columns in parallel for the weight and
    // bias gradients, each column summed over the rows in order (the one-thread sums).
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n) {
            const float* x = inp + n * C;
            const float* dy = dout + n * C;
            float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
            for (std::int64_t i = 0; i < C; ++i) {
                const float norm = (x[i] - mean[n]) * rstd[n];
                const float dnorm = weight[i] * dy[i];
                dnorm_mean += dnorm;
                dnorm_norm_mean += dnorm * norm;
            }
            dnorm_mean /= float(C);
            dnorm_norm_mean /= float(C);
            for (std::int64_t i = 0; i < C; ++i) {
                const float norm = (x[i] - mean[n]) * rstd[n];
                const float dnorm = weight[i] * dy[i];
                dinp[n * C + i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n];
            }
        }
    });
    parallel_for(C, kColumnGrain, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = 0; n < N; ++n) {
            const float* x = inp + n * C;
            const float* dy = dout + n * C;
            for (std::int64_t i = first; i < last; ++i) {
                const float norm = (x[i] - mean[n]) * rstd[n];
                dbias[i] += dy[i];
                dweight[i] += norm * dy[i];
            }
        }
    });
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t N,
                     std::int64_t C, float eps) {
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n) {
            const float* x = inp + n * C;
            float ss = 0.0f;
            for (std::int64_t i = 0; i < C; ++i) ss += x[i] * x[i];
            const float s = 1.0f / std::sqrt(ss / float(C) + eps);
            for (std::int64_t i = 0; i < C; ++i) out[n * C + i] = x[i] * s * weight[i];
            rstd[n] = s;
        }
    });
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C) {
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n) {
            const float* x = inp + n * C;
            const float* dy = dout + n * C;
            // y = x·s·w with s = (mean(x²) + ε)^(-1/2): dx = s·(w·dy) − x·s³·mean(x·w·dy).
            float dot = 0.0f;
            for (std::int64_t i = 0; i < C; ++i) dot += x[i] * weight[i] * dy[i];
            dot /= float(C);
            const float s = rstd[n];
            for (std::int64_t i = 0; i < C; ++i)
                dinp[n * C + i] += s * weight[i] * dy[i] - x[i] * s * s * s * dot;
        }
    });
    parallel_for(C, kColumnGrain, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t i = first; i < last; ++i)
                dweight[i] += inp[n * C + i] * rstd[n] * dout[n * C + i];
    });
}

} // namespace trident::kernels::cpu
