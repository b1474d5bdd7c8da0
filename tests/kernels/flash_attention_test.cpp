// The CPU flash attention (tiled, online softmax, saved log-sum-exp) against the unfused
// reference that stores the scores: the same outputs and gradients, with grouped-query heads,
// with dropout, over several tiles with a ragged last one, and for the rows of a context rank;
// and its own backward against finite differences.
#include "kernel_test_support.h"
#include "trident/kernels/cpu.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <vector>

using namespace trident::kernels::cpu;
using namespace trident::kernels::test;

namespace {

void expect_close(const Vec& a, const Vec& b, double tol, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / (1.0 + std::fabs(b[i])));
    EXPECT_LT(worst, tol) << what;
}

struct Shape {
    int B, T, H, KV, D;
};

// Flash and reference forward and backward of one shape; `p` > 0 adds attention dropout.
void compare_with_reference(const Shape& s, float p) {
    const int W = (s.H + 2 * s.KV) * s.D;
    std::vector<std::uint64_t> keys(std::size_t(s.B * s.H * s.T));
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = dropout_key(11, i);
    const AttentionDropout dropout{p, keys.data()};
    const AttentionDropout* drop = p > 0 ? &dropout : nullptr;
    const Vec qkv = random_vec(std::size_t(s.B * s.T * W), 3, 2.0f);
    const Vec dout = random_vec(std::size_t(s.B * s.T * s.H * s.D), 4);
    Vec ref(dout.size()), probs(std::size_t(s.B * s.H * s.T * s.T)), out(dout.size());
    Vec lse(std::size_t(s.B * s.H * s.T));
    attention_forward(ref.data(), probs.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.D, drop);
    flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.D, drop);
    expect_close(out, ref, 2e-5, "forward");
    // The saved log-sum-exp gives the reference's probabilities back.
    const float scale = 1.0f / std::sqrt(float(s.D));
    for (int t : {0, s.T / 2, s.T - 1}) {
        const float* q = qkv.data() + t * W;                   // sequence 0, head 0
        const float* k = qkv.data() + (t / 2) * W + s.H * s.D; // a key it sees
        float score = 0.0f;
        for (int d = 0; d < s.D; ++d) score += q[d] * k[d];
        EXPECT_NEAR(std::exp(score * scale - lse[std::size_t(t)]),
                    probs[std::size_t(t * s.T + t / 2)], 1e-5);
    }
    Vec dref(qkv.size(), 0.0f), dflash(qkv.size(), 0.0f);
    attention_backward(dref.data(), dout.data(), qkv.data(), probs.data(), s.B, s.T, s.H, s.KV, s.D,
                       drop);
    flash_attention_backward(dflash.data(), dout.data(), out.data(), qkv.data(), lse.data(), s.B,
                             s.T, s.H, s.KV, s.D, drop);
    expect_close(dflash, dref, 5e-5, "backward");
}

} // namespace

TEST(FlashAttention, EqualsTheStoredScoresPath) {
    compare_with_reference({2, 5, 4, 4, 3}, 0.0f);    // one ragged tile
    compare_with_reference({1, 150, 4, 2, 16}, 0.0f); // three tiles, the last ragged; GQA
    compare_with_reference({2, 128, 2, 1, 32}, 0.0f); // exact tiles, one KV head
}

TEST(FlashAttention, EqualsTheStoredScoresPathWithDropout) {
    compare_with_reference({2, 70, 4, 2, 8}, 0.1f);
    compare_with_reference({1, 9, 2, 2, 4}, 0.3f);
}

TEST(FlashAttention, RowsOfAContextRankEqualThoseRowsOfTheWhole) {
    // Context parallelism: positions 1, 4, 6 and 70 … 99 of a 100-token sequence against all its
    // keys and values (two key tiles) give the rows of whole causal attention.
    const int B = 2, T = 100, H = 2, KV = 1, D = 4, W = (H + 2 * KV) * D;
    const Vec qkv = random_vec(std::size_t(B * T * W), 21);
    Vec full(std::size_t(B * T * H * D)), full_lse(std::size_t(B * H * T));
    flash_attention_forward(full.data(), full_lse.data(), qkv.data(), B, T, H, KV, D);
    std::vector<int> rows = {1, 4, 6};
    for (int t = 70; t < T; ++t) rows.push_back(t);
    const int Tq = int(rows.size());
    Vec q(std::size_t(B * Tq * H * D));
    std::vector<std::int32_t> visible;
    for (int r : rows) visible.push_back(r + 1);
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < Tq; ++i)
            for (int j = 0; j < H * D; ++j)
                q[std::size_t((b * Tq + i) * H * D + j)] =
                    qkv[std::size_t((b * T + rows[i]) * W + j)];
    Vec out(std::size_t(B * Tq * H * D)), lse(std::size_t(B * H * Tq));
    flash_attention_forward_rows(out.data(), H * D, lse.data(), q.data(), H * D, qkv.data() + H * D,
                                 qkv.data() + (H + KV) * D, W, visible.data(), B, Tq, T, H, KV, D);
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < Tq; ++i)
            for (int j = 0; j < H * D; ++j)
                EXPECT_NEAR(out[std::size_t((b * Tq + i) * H * D + j)],
                            full[std::size_t((b * T + rows[i]) * H * D + j)], 1e-5);
}

TEST(FlashAttention, BackwardMatchesFiniteDifferences) {
    const int B = 1, T = 70, H = 2, KV = 1, D = 4, W = (H + 2 * KV) * D;
    Vec qkv = random_vec(std::size_t(B * T * W), 31);
    const Vec r = random_vec(std::size_t(B * T * H * D), 32);
    Vec out(r.size()), lse(std::size_t(B * H * T));
    const auto loss = [&] {
        flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
        return dot(out, r);
    };
    loss();
    Vec dqkv(qkv.size(), 0.0f);
    flash_attention_backward(dqkv.data(), r.data(), out.data(), qkv.data(), lse.data(), B, T, H, KV,
                             D);
    check_gradient(qkv, dqkv, loss, "flash attention dqkv");
}
