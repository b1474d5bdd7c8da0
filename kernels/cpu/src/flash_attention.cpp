// Flash attention on the CPU (Dao et al. 2022; FlashAttention-2, Dao 2023, Algorithms 1 and 2):
// the attention of attention_forward_rows, computed over tiles of kTile query rows × kTile key
// rows with an online softmax, so the Tq×Tk scores are never stored. The forward saves one
// log-sum-exp per query row; the backward recomputes each tile's probabilities from it,
// P = exp(S − lse), and uses D = rowsum(dO ∘ O) in place of rowsum(P ∘ dP) (FlashAttention-2
// §3.1) — with dropout too, since O = dropout(P)·V makes the two equal. Tiles go through the
// BLAS, as the unfused path's GEMMs do.
#include "causal.h"
#include "simd_clones.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <limits>
#include <vector>

namespace trident::kernels::cpu {
namespace {

// Rows and columns of a score tile: 64×64 fp32 is 16 KiB, well inside L1 + L2 with its Q, K
// and V rows at the head dims the CPU backend runs (32–128).
constexpr std::int64_t kTile = 64;
// Below every score. Finite: this file builds with -ffast-math, under which comparisons with
// infinities may be folded away.
constexpr float kNoScore = -std::numeric_limits<float>::max();

// The keys the rows [t0, t1) see at most.
std::int64_t keys_seen(const std::int32_t* visible, std::int64_t t0, std::int64_t t1) {
    std::int64_t seen = 0;
    for (std::int64_t t = t0; t < t1; ++t) seen = std::max<std::int64_t>(seen, visible[t]);
    return seen;
}

struct HeadView { // one (sequence, head): its rows of q, k, v, out and the strides
    const float *q, *k, *v;
    std::int64_t q_stride, kv_stride;
};

HeadView head_view(const float* q, std::int64_t q_stride, const float* k, const float* v,
                   std::int64_t kv_stride, std::int64_t b, std::int64_t h, std::int64_t Tq,
                   std::int64_t Tk, std::int64_t H, std::int64_t KV, std::int64_t D) {
    const std::int64_t kv_off = (h / (H / KV)) * D;
    return {q + b * Tq * q_stride + h * D, k + b * Tk * kv_stride + kv_off,
            v + b * Tk * kv_stride + kv_off, q_stride, kv_stride};
}

// S[rows × cols] = scale · Q[t0 …]·K[s0 …]ᵀ.
void score_tile(float* S, const HeadView& hv, std::int64_t t0, std::int64_t rows, std::int64_t s0,
                std::int64_t cols, std::int64_t D, float scale) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(cols), int(D), scale,
                hv.q + t0 * hv.q_stride, int(hv.q_stride), hv.k + s0 * hv.kv_stride,
                int(hv.kv_stride), 0.0f, S, int(cols));
}

// One score tile's online softmax (FlashAttention-2 Algorithm 1, the inner loop's row work):
// S[r, c] becomes exp(S − m_r) where row r sees key s0 + c (visible[r] keys), else 0; the
// running max m, sum l and the accumulator rows are rescaled to the new max; with dropout the
// sum takes the undropped probabilities and V sees the dropped ones.
TRIDENT_SIMD_CLONES
void online_softmax_tile(float* S, std::int64_t rows, std::int64_t cols,
                         const std::int32_t* visible, std::int64_t s0, float* row_max,
                         float* row_sum, float* acc, std::int64_t D, const std::uint64_t* keys,
                         float dropout_probability) {
    for (std::int64_t r = 0; r < rows; ++r) {
        float* row = S + r * cols;
        const std::int64_t last = std::min<std::int64_t>(cols, visible[r] - s0);
        float tile_max = kNoScore;
        for (std::int64_t c = 0; c < last; ++c) tile_max = std::fmax(tile_max, row[c]);
        const float m = std::fmax(row_max[r], tile_max);
        const float rescale = std::exp(row_max[r] - m);
        // Separate loops without branches, so they vectorise (libmvec's exp).
        float sum = 0.0f;
        for (std::int64_t c = 0; c < last; ++c) {
            row[c] = std::exp(row[c] - m);
            sum += row[c];
        }
        for (std::int64_t c = std::max<std::int64_t>(last, 0); c < cols; ++c) row[c] = 0.0f;
        row_sum[r] = row_sum[r] * rescale + sum;
        row_max[r] = m;
        for (std::int64_t d = 0; d < D; ++d) acc[r * D + d] *= rescale;
        if (keys)
            for (std::int64_t c = 0; c < last; ++c)
                row[c] *= dropout_factor(keys[r], s0 + c, dropout_probability);
    }
}

// One tile of the backward's elementwise work (FlashAttention-2 Algorithm 2): P = exp(S − lse)
// where the row sees the key, else 0; with dropout P̃ = P ∘ F into Pv and dP = dP̃ ∘ F; then
// dS = P ∘ (dP − D_r), scaled like S, in place of dP.
TRIDENT_SIMD_CLONES
void score_gradient_tile(float* P, float* dP, float* Pv, std::int64_t rows, std::int64_t cols,
                         const std::int32_t* visible, std::int64_t s0, const float* lse,
                         const float* row_dot, float scale, const std::uint64_t* keys,
                         float dropout_probability) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t last = std::clamp<std::int64_t>(visible[r] - s0, 0, cols);
        float* p = P + r * cols;
        float* dp = dP + r * cols;
        const float l = lse[r], d = row_dot[r];
        for (std::int64_t c = 0; c < last; ++c) p[c] = std::exp(p[c] - l);
        for (std::int64_t c = last; c < cols; ++c) p[c] = 0.0f;
        if (keys) {
            float* pv = Pv + r * cols;
            for (std::int64_t c = 0; c < cols; ++c) {
                const float f =
                    c < last ? dropout_factor(keys[r], s0 + c, dropout_probability) : 0.0f;
                pv[c] = p[c] * f;
                dp[c] *= f;
            }
        }
        for (std::int64_t c = 0; c < cols; ++c) dp[c] = p[c] * (dp[c] - d) * scale;
    }
}

} // namespace

void flash_attention_forward_rows(float* out, std::int64_t out_stride, float* lse, const float* q,
                                  std::int64_t q_stride, const float* k, const float* v,
                                  std::int64_t kv_stride, const std::int32_t* visible,
                                  std::int64_t B, std::int64_t Tq, std::int64_t Tk, std::int64_t H,
                                  std::int64_t KV, std::int64_t D,
                                  const AttentionDropout* dropout) {
    const float scale = 1.0f / std::sqrt(float(D));
    // Heads are independent (each writes its own columns of out and its own lse rows): the
    // kernel threads take blocks of (sequence, head) pairs.
    parallel_for(B * H, 1, [=](std::int64_t first, std::int64_t last_pair) {
        std::vector<float> S(static_cast<std::size_t>(kTile * kTile)),
            acc(static_cast<std::size_t>(kTile * D));
        std::vector<float> row_max(static_cast<std::size_t>(kTile)), row_sum(row_max.size());
        for (std::int64_t pair = first; pair < last_pair; ++pair) {
            const std::int64_t b = pair / H, h = pair % H;
            const HeadView hv = head_view(q, q_stride, k, v, kv_stride, b, h, Tq, Tk, H, KV, D);
            const std::uint64_t* keys = dropout ? dropout->row_keys + (b * H + h) * Tq : nullptr;
            for (std::int64_t t0 = 0; t0 < Tq; t0 += kTile) {
                const std::int64_t rows = std::min(kTile, Tq - t0);
                std::fill(row_max.begin(), row_max.end(), kNoScore);
                std::fill(row_sum.begin(), row_sum.end(), 0.0f);
                std::fill(acc.begin(), acc.end(), 0.0f);
                const std::int64_t seen = keys_seen(visible, t0, t0 + rows);
                for (std::int64_t s0 = 0; s0 < seen; s0 += kTile) {
                    const std::int64_t cols = std::min(kTile, seen - s0);
                    score_tile(S.data(), hv, t0, rows, s0, cols, D, scale);
                    online_softmax_tile(S.data(), rows, cols, visible + t0, s0, row_max.data(),
                                        row_sum.data(), acc.data(), D, keys ? keys + t0 : nullptr,
                                        dropout ? dropout->probability : 0.0f);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(D),
                                int(cols), 1.0f, S.data(), int(cols), hv.v + s0 * kv_stride,
                                int(kv_stride), 1.0f, acc.data(), int(D));
                }
                for (std::int64_t r = 0; r < rows; ++r) {
                    const float l = row_sum[std::size_t(r)];
                    float* o = out + (b * Tq + t0 + r) * out_stride + h * D;
                    for (std::int64_t d = 0; d < D; ++d)
                        o[d] = l > 0.0f ? acc[std::size_t(r * D + d)] / l : 0.0f;
                    lse[(b * H + h) * Tq + t0 + r] =
                        l > 0.0f ? row_max[std::size_t(r)] + std::log(l) : kNoScore;
                }
            }
        }
    });
}

void flash_attention_backward_rows(float* dq, float* dk, float* dv, const float* dout,
                                   const float* out, std::int64_t out_stride, const float* q,
                                   std::int64_t q_stride, const float* k, const float* v,
                                   std::int64_t kv_stride, const float* lse,
                                   const std::int32_t* visible, std::int64_t B, std::int64_t Tq,
                                   std::int64_t Tk, std::int64_t H, std::int64_t KV, std::int64_t D,
                                   const AttentionDropout* dropout) {
    const float scale = 1.0f / std::sqrt(float(D));
    // The query heads of one key/value head add into the same dK and dV: the kernel threads
    // take blocks of (sequence, key/value head) groups and run each group's heads in order.
    const std::int64_t group = H / KV;
    parallel_for(B * KV, 1, [=](std::int64_t first, std::int64_t last_group) {
        std::vector<float> P(static_cast<std::size_t>(kTile * kTile)), dP(P.size()),
            Pv(dropout ? P.size() : 0u);
        std::vector<float> row_dot(static_cast<std::size_t>(Tq));
        for (std::int64_t g = first; g < last_group; ++g)
            for (std::int64_t h = (g % KV) * group; h < (g % KV + 1) * group; ++h) {
                const std::int64_t b = g / KV;
                const HeadView hv = head_view(q, q_stride, k, v, kv_stride, b, h, Tq, Tk, H, KV, D);
                const std::int64_t kv_off = (h / (H / KV)) * D;
                float* dqh = dq + b * Tq * q_stride + h * D;
                float* dkh = dk + b * Tk * kv_stride + kv_off;
                float* dvh = dv + b * Tk * kv_stride + kv_off;
                const float* dy = dout + b * Tq * out_stride + h * D;
                const float* y = out + b * Tq * out_stride + h * D;
                const float* row_lse = lse + (b * H + h) * Tq;
                const std::uint64_t* keys =
                    dropout ? dropout->row_keys + (b * H + h) * Tq : nullptr;
                for (std::int64_t t = 0; t < Tq; ++t) { // D_t = Σ_d dO·O
                    float s = 0.0f;
                    for (std::int64_t d = 0; d < D; ++d)
                        s += dy[t * out_stride + d] * y[t * out_stride + d];
                    row_dot[std::size_t(t)] = s;
                }
                for (std::int64_t t0 = 0; t0 < Tq; t0 += kTile) {
                    const std::int64_t rows = std::min(kTile, Tq - t0);
                    const std::int64_t seen = keys_seen(visible, t0, t0 + rows);
                    for (std::int64_t s0 = 0; s0 < seen; s0 += kTile) {
                        const std::int64_t cols = std::min(kTile, seen - s0);
                        score_tile(P.data(), hv, t0, rows, s0, cols, D, scale);
                        // dP̃ = dO·Vᵀ
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(cols),
                                    int(D), 1.0f, dy + t0 * out_stride, int(out_stride),
                                    hv.v + s0 * kv_stride, int(kv_stride), 0.0f, dP.data(),
                                    int(cols));
                        score_gradient_tile(P.data(), dP.data(), keys ? Pv.data() : nullptr, rows,
                                            cols, visible + t0, s0, row_lse + t0,
                                            row_dot.data() + t0, scale, keys ? keys + t0 : nullptr,
                                            dropout ? dropout->probability : 0.0f);
                        // dV += P̃ᵀ·dO; dQ += dS·K; dK += dSᵀ·Q.
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(cols), int(D),
                                    int(rows), 1.0f, keys ? Pv.data() : P.data(), int(cols),
                                    dy + t0 * out_stride, int(out_stride), 1.0f,
                                    dvh + s0 * kv_stride, int(kv_stride));
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(D),
                                    int(cols), 1.0f, dP.data(), int(cols), hv.k + s0 * kv_stride,
                                    int(kv_stride), 1.0f, dqh + t0 * q_stride, int(q_stride));
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(cols), int(D),
                                    int(rows), 1.0f, dP.data(), int(cols), hv.q + t0 * q_stride,
                                    int(q_stride), 1.0f, dkh + s0 * kv_stride, int(kv_stride));
                    }
                }
            }
    });
}

void flash_attention_forward(float* out, float* lse, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t H, std::int64_t KV, std::int64_t D,
                             const AttentionDropout* dropout) {
    const std::int64_t W = (H + 2 * KV) * D;
    flash_attention_forward_rows(out, H * D, lse, qkv, W, qkv + H * D, qkv + (H + KV) * D, W,
                                 causal_visible(T).data(), B, T, T, H, KV, D, dropout);
}

void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv,
                              const float* lse, std::int64_t B, std::int64_t T, std::int64_t H,
                              std::int64_t KV, std::int64_t D, const AttentionDropout* dropout) {
    const std::int64_t W = (H + 2 * KV) * D;
    flash_attention_backward_rows(dqkv, dqkv + H * D, dqkv + (H + KV) * D, dout, out, H * D, qkv, W,
                                  qkv + H * D, qkv + (H + KV) * D, W, lse, causal_visible(T).data(),
                                  B, T, T, H, KV, D, dropout);
}

} // namespace trident::kernels::cpu
