// Causal (grouped-query) attention: softmax(QKᵀ/√D)·V per head, each query seeing the keys up
// to its own position, as two GEMMs per (batch, head) around a row softmax — the unfused path
// Megatron ran before flash attention, which the simulator times the same way. The
// probabilities are kept for the backward: the path plans with flash_attention false run
// (flash_attention.cpp is the default).
#include "causal.h"
#include "trident/kernels/cpu.h"

#include <cblas.h>
#include <cmath>
#include <vector>

namespace trident::kernels::cpu {

void attention_forward_rows(float* out, std::int64_t out_stride, float* probs, const float* q,
                            std::int64_t q_stride, const float* k, const float* v,
                            std::int64_t kv_stride, const std::int32_t* visible, std::int64_t B,
                            std::int64_t Tq, std::int64_t Tk, std::int64_t H, std::int64_t KV,
                            std::int64_t D, const AttentionDropout* dropout) {
    const std::int64_t group = H / KV;
    const float scale = 1.0f / std::sqrt(float(D));
    // Heads are independent (each writes its own probabilities and columns of out): the kernel
    // threads take blocks of (sequence, head) pairs, each sgemm single-threaded.
    parallel_for(B * H, 1, [=](std::int64_t first, std::int64_t last_pair) {
        std::vector<float> dropped(dropout ? static_cast<std::size_t>(Tq * Tk) : 0u);
        for (std::int64_t pair = first; pair < last_pair; ++pair) {
            const std::int64_t b = pair / H, h = pair % H;
            const float* qh = q + b * Tq * q_stride + h * D;
            const float* kh = k + b * Tk * kv_stride + (h / group) * D;
            const float* vh = v + b * Tk * kv_stride + (h / group) * D;
            float* p = probs + (b * H + h) * Tq * Tk;
            // S = QKᵀ/√D, then a masked softmax per row, in place.
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(Tq), int(Tk), int(D), scale,
                        qh, int(q_stride), kh, int(kv_stride), 0.0f, p, int(Tk));
            for (std::int64_t t = 0; t < Tq; ++t) {
                float* row = p + t * Tk;
                const std::int64_t seen = visible[t];
                float max = -INFINITY;
                for (std::int64_t s = 0; s < seen; ++s) max = std::fmax(max, row[s]);
                float sum = 0.0f;
                for (std::int64_t s = 0; s < seen; ++s) {
                    row[s] = std::exp(row[s] - max);
                    sum += row[s];
                }
                for (std::int64_t s = 0; s < seen; ++s) row[s] /= sum;
                for (std::int64_t s = seen; s < Tk; ++s) row[s] = 0.0f;
            }
            // O = P·V, or dropout(P)·V.
            const float* pv = p;
            if (dropout) {
                const std::uint64_t* keys = dropout->row_keys + (b * H + h) * Tq;
                for (std::int64_t t = 0; t < Tq; ++t)
                    for (std::int64_t s = 0; s < Tk; ++s)
                        dropped[std::size_t(t * Tk + s)] =
                            p[t * Tk + s] * dropout_factor(keys[t], s, dropout->probability);
                pv = dropped.data();
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(Tq), int(D), int(Tk), 1.0f,
                        pv, int(Tk), vh, int(kv_stride), 0.0f, out + b * Tq * out_stride + h * D,
                        int(out_stride));
        }
    });
}

void attention_backward_rows(float* dq, float* dk, float* dv, const float* dout,
                             std::int64_t out_stride, const float* q, std::int64_t q_stride,
                             const float* k, const float* v, std::int64_t kv_stride,
                             const float* probs, const std::int32_t* visible, std::int64_t B,
                             std::int64_t Tq, std::int64_t Tk, std::int64_t H, std::int64_t KV,
                             std::int64_t D, const AttentionDropout* dropout) {
    const std::int64_t group = H / KV;
    const float scale = 1.0f / std::sqrt(float(D));
    // The query heads of one key/value head add into the same dK and dV: the kernel threads
    // take blocks of (sequence, key/value head) groups and run each group's heads in order.
    parallel_for(B * KV, 1, [=](std::int64_t first, std::int64_t last_group) {
        std::vector<float> ds(static_cast<std::size_t>(Tq * Tk));
        std::vector<float> factors(dropout ? ds.size() : 0u), dropped(factors.size());
        for (std::int64_t g = first; g < last_group; ++g)
            for (std::int64_t h = (g % KV) * group; h < (g % KV + 1) * group; ++h) {
                const std::int64_t b = g / KV;
                const std::int64_t kv_off = (h / group) * D;
                const float* qh = q + b * Tq * q_stride + h * D;
                const float* kh = k + b * Tk * kv_stride + kv_off;
                const float* vh = v + b * Tk * kv_stride + kv_off;
                const float* p = probs + (b * H + h) * Tq * Tk;
                const float* dy = dout + b * Tq * out_stride + h * D;
                // With dropout the forward used P̃ = P ∘ F (F: the mask's 0 or 1/(1 − p)), again.
                const float* pv = p;
                if (dropout) {
                    const std::uint64_t* keys = dropout->row_keys + (b * H + h) * Tq;
                    for (std::int64_t t = 0; t < Tq; ++t)
                        for (std::int64_t s = 0; s < Tk; ++s) {
                            const std::size_t at = std::size_t(t * Tk + s);
                            factors[at] = dropout_factor(keys[t], s, dropout->probability);
                            dropped[at] = p[at] * factors[at];
                        }
                    pv = dropped.data();
                }
                // dV += P̃ᵀ·dO; dP̃ = dO·Vᵀ, and dP = dP̃ ∘ F.
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(Tk), int(D), int(Tq), 1.0f,
                            pv, int(Tk), dy, int(out_stride), 1.0f,
                            dv + b * Tk * kv_stride + kv_off, int(kv_stride));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(Tq), int(Tk), int(D), 1.0f,
                            dy, int(out_stride), vh, int(kv_stride), 0.0f, ds.data(), int(Tk));
                if (dropout)
                    for (std::size_t i = 0; i < ds.size(); ++i) ds[i] *= factors[i];
                // Softmax backward: dS = P ⊙ (dP − Σ P·dP), scaled like S.
                for (std::int64_t t = 0; t < Tq; ++t) {
                    const float* pr = p + t * Tk;
                    float* row = ds.data() + t * Tk;
                    const std::int64_t seen = visible[t];
                    float dot = 0.0f;
                    for (std::int64_t s = 0; s < seen; ++s) dot += pr[s] * row[s];
                    for (std::int64_t s = 0; s < seen; ++s) row[s] = pr[s] * (row[s] - dot) * scale;
                    for (std::int64_t s = seen; s < Tk; ++s) row[s] = 0.0f;
                }
                // dQ += dS·K; dK += dSᵀ·Q
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(Tq), int(D), int(Tk),
                            1.0f, ds.data(), int(Tk), kh, int(kv_stride), 1.0f,
                            dq + b * Tq * q_stride + h * D, int(q_stride));
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(Tk), int(D), int(Tq), 1.0f,
                            ds.data(), int(Tk), qh, int(q_stride), 1.0f,
                            dk + b * Tk * kv_stride + kv_off, int(kv_stride));
            }
    });
}

void attention_forward(float* out, float* probs, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t H, std::int64_t KV, std::int64_t D,
                       const AttentionDropout* dropout) {
    const std::int64_t W = (H + 2 * KV) * D;
    attention_forward_rows(out, H * D, probs, qkv, W, qkv + H * D, qkv + (H + KV) * D, W,
                           causal_visible(T).data(), B, T, T, H, KV, D, dropout);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t KV,
                        std::int64_t D, const AttentionDropout* dropout) {
    const std::int64_t W = (H + 2 * KV) * D;
    attention_backward_rows(dqkv, dqkv + H * D, dqkv + (H + KV) * D, dout, H * D, qkv, W,
                            qkv + H * D, qkv + (H + KV) * D, W, probs, causal_visible(T).data(), B,
                            T, T, H, KV, D, dropout);
}

} // namespace trident::kernels::cpu
