// Vocabulary-parallel embedding and softmax cross-entropy (Shoeybi et al. 2019, §3): each
// tensor rank holds a contiguous slice of the vocabulary; the tensor group sums or maximises
// the per-shard pieces between these calls.
#include "simd_clones.h"
#include "trident/kernels/cpu.h"

#include <cmath>
#include <cstring>

namespace trident::kernels::cpu {
namespace {

TRIDENT_SIMD_CLONES float max_of(const float* x, std::int64_t n) {
    float m = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) m = std::fmax(m, x[i]);
    return m;
}

// x = exp(x − shift) in place; returns the sum.
TRIDENT_SIMD_CLONES float exp_in_place(float* x, std::int64_t n, float shift) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) s += (x[i] = std::exp(x[i] - shift));
    return s;
}

TRIDENT_SIMD_CLONES void scale_row(float* x, std::int64_t n, float factor) {
    for (std::int64_t i = 0; i < n; ++i) x[i] *= factor;
}

} // namespace

void embedding_forward(float* out, const std::int32_t* tokens, const float* table, std::int64_t N,
                       std::int64_t C, std::int64_t vocab_start, std::int64_t vocab_local) {
    for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t row = std::int64_t(tokens[n]) - vocab_start;
        if (row >= 0 && row < vocab_local)
            std::memcpy(out + n * C, table + row * C, std::size_t(C) * sizeof(float));
        else
            std::memset(out + n * C, 0, std::size_t(C) * sizeof(float));
    }
}

void embedding_backward(float* dtable, const std::int32_t* tokens, const float* dout,
                        std::int64_t N, std::int64_t C, std::int64_t vocab_start,
                        std::int64_t vocab_local) {
    for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t row = std::int64_t(tokens[n]) - vocab_start;
        if (row < 0 || row >= vocab_local) continue;
        for (std::int64_t i = 0; i < C; ++i) dtable[row * C + i] += dout[n * C + i];
    }
}

void cross_entropy_row_max(float* row_max, const float* logits, std::int64_t N, std::int64_t V) {
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n) row_max[n] = max_of(logits + n * V, V);
    });
}

void cross_entropy_exp(float* logits, float* sum_exp, const float* row_max, std::int64_t N,
                       std::int64_t V) {
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n)
            sum_exp[n] = exp_in_place(logits + n * V, V, row_max[n]);
    });
}

void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                std::int64_t vocab_start) {
    for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t col = std::int64_t(targets[n]) - vocab_start;
        target_logit[n] = col >= 0 && col < V ? logits[n * V + col] : 0.0f;
    }
}

void cross_entropy_backward(float* exps, const float* sum_exp, const std::int32_t* targets,
                            float scale, std::int64_t N, std::int64_t V, std::int64_t vocab_start) {
    parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
        for (std::int64_t n = first; n < last; ++n) {
            const std::int64_t col = std::int64_t(targets[n]) - vocab_start;
            scale_row(exps + n * V, V, scale / sum_exp[n]);
            if (col >= 0 && col < V) exps[n * V + col] -= scale;
        }
    });
}

namespace {
// One block of AdamW, its scalars taken by value so the compiler knows no store changes them
// and vectorises the loop (through the lambda's captured references it did not).
TRIDENT_SIMD_CLONES
void adamw_block(float* params, const float* grads, float* m, float* v, std::int64_t first,
                 std::int64_t last, float lr, float beta1, float beta2, float eps,
                 float weight_decay, float c1, float c2, float grad_scale) {
    for (std::int64_t i = first; i < last; ++i) {
        const float g = grads[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        const float update = (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
        params[i] -= lr * (update + weight_decay * params[i]);
    }
}
} // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, std::int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int t,
                  float grad_scale) {
    const float c1 = 1.0f - std::pow(beta1, float(t)), c2 = 1.0f - std::pow(beta2, float(t));
    // Blocks of 1024 values: the vectorised loop and its tail cover the same elements whatever
    // the thread count.
    parallel_for(n, 1024, [=](std::int64_t first, std::int64_t last) {
        adamw_block(params, grads, m, v, first, last, lr, beta1, beta2, eps, weight_decay, c1, c2,
                    grad_scale);
    });
}

} // namespace trident::kernels::cpu
