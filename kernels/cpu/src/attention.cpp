// Causal (grouped-query) attention: softmax(QKᵀ/√D)·V per head, masked to t' ≤ t. The
// probabilities are stored for the backward (fine at the sizes the CPU backend runs).
#include "trident/kernels/cpu.h"

#include <cmath>
#include <vector>

namespace trident::kernels::cpu {

void attention_forward(float* out, float* probs, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t H, std::int64_t KV, std::int64_t D) {
    const std::int64_t W = (H + 2 * KV) * D, group = H / KV;
    const float scale = 1.0f / std::sqrt(float(D));
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t k_off = H * D + (h / group) * D, v_off = (H + KV) * D + (h / group) * D;
            for (std::int64_t t = 0; t < T; ++t) {
                const float* q = qkv + (b * T + t) * W + h * D;
                float* p = probs + ((b * H + h) * T + t) * T;
                float max = -INFINITY;
                for (std::int64_t s = 0; s <= t; ++s) {
                    const float* k = qkv + (b * T + s) * W + k_off;
                    float dot = 0.0f;
                    for (std::int64_t i = 0; i < D; ++i) dot += q[i] * k[i];
                    p[s] = dot * scale;
                    max = std::fmax(max, p[s]);
                }
                float sum = 0.0f;
                for (std::int64_t s = 0; s <= t; ++s) {
                    p[s] = std::exp(p[s] - max);
                    sum += p[s];
                }
                for (std::int64_t s = 0; s <= t; ++s) p[s] /= sum;
                for (std::int64_t s = t + 1; s < T; ++s) p[s] = 0.0f;
                float* o = out + (b * T + t) * H * D + h * D;
                for (std::int64_t i = 0; i < D; ++i) o[i] = 0.0f;
                for (std::int64_t s = 0; s <= t; ++s) {
                    const float* v = qkv + (b * T + s) * W + v_off;
                    for (std::int64_t i = 0; i < D; ++i) o[i] += p[s] * v[i];
                }
            }
        }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t KV,
                        std::int64_t D) {
    const std::int64_t W = (H + 2 * KV) * D, group = H / KV;
    const float scale = 1.0f / std::sqrt(float(D));
    std::vector<float> dp(static_cast<std::size_t>(T));
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t k_off = H * D + (h / group) * D, v_off = (H + KV) * D + (h / group) * D;
            for (std::int64_t t = 0; t < T; ++t) {
                const float* p = probs + ((b * H + h) * T + t) * T;
                const float* dy = dout + (b * T + t) * H * D + h * D;
                // dP = dO·Vᵀ, dV += Pᵀ·dO
                float dot_pdp = 0.0f;
                for (std::int64_t s = 0; s <= t; ++s) {
                    const float* v = qkv + (b * T + s) * W + v_off;
                    float* dv = dqkv + (b * T + s) * W + v_off;
                    float d = 0.0f;
                    for (std::int64_t i = 0; i < D; ++i) {
                        d += dy[i] * v[i];
                        dv[i] += p[s] * dy[i];
                    }
                    dp[std::size_t(s)] = d;
                    dot_pdp += p[s] * d;
                }
                // Softmax backward: dS = P ⊙ (dP − Σ P·dP); then dQ, dK through S = QKᵀ/√D.
                const float* q = qkv + (b * T + t) * W + h * D;
                float* dq = dqkv + (b * T + t) * W + h * D;
                for (std::int64_t s = 0; s <= t; ++s) {
                    const float ds = p[s] * (dp[std::size_t(s)] - dot_pdp) * scale;
                    const float* k = qkv + (b * T + s) * W + k_off;
                    float* dk = dqkv + (b * T + s) * W + k_off;
                    for (std::int64_t i = 0; i < D; ++i) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
        }
}

} // namespace trident::kernels::cpu
