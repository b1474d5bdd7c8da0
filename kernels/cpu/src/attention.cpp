// Causal (grouped-query) attention: softmax(QKᵀ/√D)·V per head, masked to t' ≤ t, as two
// GEMMs per (batch, head) around a row softmax — the unfused path Megatron ran before flash
// attention, which the simulator times the same way. The probabilities are kept for the
// backward (fine at the sizes the CPU backend runs).
#include "trident/kernels/cpu.h"

#include <cblas.h>
#include <cmath>
#include <vector>

namespace trident::kernels::cpu {

void attention_forward(float* out, float* probs, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t H, std::int64_t KV, std::int64_t D) {
    const std::int64_t W = (H + 2 * KV) * D, group = H / KV, HD = H * D;
    const float scale = 1.0f / std::sqrt(float(D));
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
            const float* q = qkv + b * T * W + h * D;
            const float* k = qkv + b * T * W + H * D + (h / group) * D;
            const float* v = qkv + b * T * W + (H + KV) * D + (h / group) * D;
            float* p = probs + (b * H + h) * T * T;
            // S = QKᵀ/√D, then a causal softmax per row, in place.
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(T), int(D), scale, q, int(W), k,
                        int(W), 0.0f, p, int(T));
            for (std::int64_t t = 0; t < T; ++t) {
                float* row = p + t * T;
                float max = -INFINITY;
                for (std::int64_t s = 0; s <= t; ++s) max = std::fmax(max, row[s]);
                float sum = 0.0f;
                for (std::int64_t s = 0; s <= t; ++s) {
                    row[s] = std::exp(row[s] - max);
                    sum += row[s];
                }
                for (std::int64_t s = 0; s <= t; ++s) row[s] /= sum;
                for (std::int64_t s = t + 1; s < T; ++s) row[s] = 0.0f;
            }
            // O = P·V
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(D), int(T), 1.0f, p, int(T), v,
                        int(W), 0.0f, out + b * T * HD + h * D, int(HD));
        }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t KV,
                        std::int64_t D) {
    const std::int64_t W = (H + 2 * KV) * D, group = H / KV, HD = H * D;
    const float scale = 1.0f / std::sqrt(float(D));
    std::vector<float> ds(static_cast<std::size_t>(T * T));
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t k_off = H * D + (h / group) * D, v_off = (H + KV) * D + (h / group) * D;
            const float* q = qkv + b * T * W + h * D;
            const float* k = qkv + b * T * W + k_off;
            const float* v = qkv + b * T * W + v_off;
            const float* p = probs + (b * H + h) * T * T;
            const float* dy = dout + b * T * HD + h * D;
            // dV += Pᵀ·dO; dP = dO·Vᵀ
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(T), int(D), int(T), 1.0f, p, int(T), dy,
                        int(HD), 1.0f, dqkv + b * T * W + v_off, int(W));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(T), int(D), 1.0f, dy, int(HD), v,
                        int(W), 0.0f, ds.data(), int(T));
            // Softmax backward: dS = P ⊙ (dP − Σ P·dP), scaled like S.
            for (std::int64_t t = 0; t < T; ++t) {
                const float* pr = p + t * T;
                float* row = ds.data() + t * T;
                float dot = 0.0f;
                for (std::int64_t s = 0; s <= t; ++s) dot += pr[s] * row[s];
                for (std::int64_t s = 0; s <= t; ++s) row[s] = pr[s] * (row[s] - dot) * scale;
                for (std::int64_t s = t + 1; s < T; ++s) row[s] = 0.0f;
            }
            // dQ += dS·K; dK += dSᵀ·Q
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(D), int(T), 1.0f, ds.data(), int(T),
                        k, int(W), 1.0f, dqkv + b * T * W + h * D, int(W));
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(T), int(D), int(T), 1.0f, ds.data(), int(T), q,
                        int(W), 1.0f, dqkv + b * T * W + k_off, int(W));
        }
}

} // namespace trident::kernels::cpu
