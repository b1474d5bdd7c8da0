// Finite-difference gradient tests of every CPU kernel: the loss L = Σ out ⊙ R for a fixed
// random R; each backward's gradient must match (L(x + ε) − L(x − ε)) / 2ε.
#include "kernel_test_support.h"
#include "trident/kernels/cpu.h"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <random>
#include <vector>

using namespace trident::kernels::cpu;
using namespace trident::kernels::test;

TEST(CpuKernels, Matmul) {
    const int N = 6, C = 5, OC = 7;
    Vec inp = random_vec(N * C, 1), w = random_vec(OC * C, 2), b = random_vec(OC, 3),
        r = random_vec(N * OC, 4);
    Vec out(N * OC);
    const auto loss = [&] {
        matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
        return dot(out, r);
    };
    loss();
    // Against a plain loop.
    for (int n = 0; n < N; ++n)
        for (int o = 0; o < OC; ++o) {
            float s = b[o];
            for (int c = 0; c < C; ++c) s += inp[n * C + c] * w[o * C + c];
            EXPECT_NEAR(out[n * OC + o], s, 1e-5);
        }
    Vec dinp(N * C, 0), dw(OC * C, 0), db(OC, 0);
    matmul_backward_input(dinp.data(), r.data(), w.data(), N, C, OC);
    matmul_backward_weight(dw.data(), db.data(), r.data(), inp.data(), N, C, OC);
    check_gradient(inp, dinp, loss, "dinp");
    check_gradient(w, dw, loss, "dweight");
    check_gradient(b, db, loss, "dbias");
}

TEST(CpuKernels, LayerNormAndRmsNorm) {
    const int N = 4, C = 8;
    Vec inp = random_vec(N * C, 5), w = random_vec(C, 6), b = random_vec(C, 7),
        r = random_vec(N * C, 8);
    Vec out(N * C), mean(N), rstd(N);
    const auto ln = [&] {
        layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                          C, 1e-5f);
        return dot(out, r);
    };
    ln();
    Vec dinp(N * C, 0), dw(C, 0), db(C, 0);
    layernorm_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
    check_gradient(inp, dinp, ln, "layernorm dinp");
    check_gradient(w, dw, ln, "layernorm dweight");
    check_gradient(b, db, ln, "layernorm dbias");

    const auto rms = [&] {
        rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, 1e-5f);
        return dot(out, r);
    };
    rms();
    Vec rdinp(N * C, 0), rdw(C, 0);
    rmsnorm_backward(rdinp.data(), rdw.data(), r.data(), inp.data(), w.data(), rstd.data(), N, C);
    check_gradient(inp, rdinp, rms, "rmsnorm dinp");
    check_gradient(w, rdw, rms, "rmsnorm dweight");
}

TEST(CpuKernels, GeluAndSwiglu) {
    const int N = 3, F = 5;
    Vec x = random_vec(N * F, 9), r = random_vec(N * F, 10), out(N * F);
    const auto g = [&] {
        gelu_forward(out.data(), x.data(), N * F);
        return dot(out, r);
    };
    g();
    EXPECT_NEAR(out[0], 0.5f * x[0] * (1 + std::erf(x[0] / std::sqrt(2.0f))), 2e-3); // ≈ exact GeLU
    Vec dx(N * F, 0);
    gelu_backward(dx.data(), x.data(), r.data(), N * F);
    check_gradient(x, dx, g, "gelu");

    Vec in2 = random_vec(N * 2 * F, 11), out2(N * F), d2(N * 2 * F, 0);
    const auto s = [&] {
        swiglu_forward(out2.data(), in2.data(), N, F);
        return dot(out2, r);
    };
    s();
    swiglu_backward(d2.data(), in2.data(), r.data(), N, F);
    check_gradient(in2, d2, s, "swiglu");
}

TEST(CpuKernels, GatedRowsBackward) {
    // y[n, f] = gate[n] · act[n, f]; L = Σ y ⊙ R: ∂L/∂gate[n] = Σ_f R · act, ∂L/∂act = gate · R.
    const int N = 4, F = 21;
    Vec act = random_vec(N * F, 31), gate = random_vec(N, 32), r = random_vec(N * F, 33);
    const auto loss = [&] {
        double l = 0.0;
        for (int n = 0; n < N; ++n)
            for (int f = 0; f < F; ++f) l += double(gate[n]) * act[n * F + f] * r[n * F + f];
        return l;
    };
    Vec d_gate(N), d_act = r;
    gated_rows_backward(d_gate.data(), d_act.data(), act.data(), gate.data(), N, F);
    check_gradient(gate, d_gate, loss, "gate");
    check_gradient(act, d_act, loss, "gated activation");
}

TEST(CpuKernels, CausalAttentionWithAndWithoutGqa) {
    for (auto [H, KV] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{4, 1}}) {
        const int B = 2, T = 5, D = 3, W = (H + 2 * KV) * D;
        Vec qkv = random_vec(B * T * W, 12), r = random_vec(B * T * H * D, 13);
        Vec out(B * T * H * D), probs(B * H * T * T);
        const auto loss = [&] {
            attention_forward(out.data(), probs.data(), qkv.data(), B, T, H, KV, D);
            return dot(out, r);
        };
        loss();
        // Causality: the first token attends only to itself.
        EXPECT_FLOAT_EQ(probs[0], 1.0f);
        EXPECT_FLOAT_EQ(probs[1], 0.0f);
        Vec dqkv(B * T * W, 0);
        attention_backward(dqkv.data(), r.data(), qkv.data(), probs.data(), B, T, H, KV, D);
        check_gradient(qkv, dqkv, loss, "attention dqkv");
    }
}

TEST(CpuKernels, AttentionOverSomeQueriesEqualsThoseRowsOfTheWhole) {
    // Context parallelism: a rank's queries (here positions 1, 4, 6) against the whole
    // sequence's keys and values give the same rows as full causal attention.
    const int B = 2, T = 8, H = 2, KV = 1, D = 4, W = (H + 2 * KV) * D;
    Vec qkv = random_vec(B * T * W, 21);
    Vec full(B * T * H * D), full_probs(B * H * T * T);
    attention_forward(full.data(), full_probs.data(), qkv.data(), B, T, H, KV, D);
    const std::vector<int> rows = {1, 4, 6};
    const int Tq = int(rows.size());
    Vec q(B * Tq * H * D);
    std::vector<std::int32_t> visible;
    for (int r : rows) visible.push_back(r + 1);
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < Tq; ++i)
            for (int j = 0; j < H * D; ++j)
                q[(b * Tq + i) * H * D + j] = qkv[(b * T + rows[i]) * W + j];
    Vec out(B * Tq * H * D), probs(B * H * Tq * T);
    attention_forward_rows(out.data(), H * D, probs.data(), q.data(), H * D, qkv.data() + H * D,
                           qkv.data() + (H + KV) * D, W, visible.data(), B, Tq, T, H, KV, D);
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < Tq; ++i)
            for (int j = 0; j < H * D; ++j)
                EXPECT_NEAR(out[(b * Tq + i) * H * D + j], full[(b * T + rows[i]) * H * D + j],
                            1e-5);
}

TEST(CpuKernels, EmbeddingShardsSumToTheWhole) {
    const int N = 6, C = 4, V = 10;
    Vec table = random_vec(V * C, 14), r = random_vec(N * C, 15);
    std::vector<std::int32_t> tokens = {0, 3, 9, 5, 3, 7};
    Vec whole(N * C), a(N * C), b(N * C);
    embedding_forward(whole.data(), tokens.data(), table.data(), N, C, 0, V);
    embedding_forward(a.data(), tokens.data(), table.data(), N, C, 0, 5);
    embedding_forward(b.data(), tokens.data(), table.data() + 5 * C, N, C, 5, 5);
    for (int i = 0; i < N * C; ++i) EXPECT_FLOAT_EQ(a[i] + b[i], whole[i]);
    Vec dtable(V * C, 0);
    embedding_backward(dtable.data(), tokens.data(), r.data(), N, C, 0, V);
    const auto loss = [&] {
        embedding_forward(whole.data(), tokens.data(), table.data(), N, C, 0, V);
        return dot(whole, r);
    };
    check_gradient(table, dtable, loss, "embedding", 1e-2f, 1e-3);
}

TEST(CpuKernels, VocabParallelCrossEntropyEqualsTheWholeVocabulary) {
    const int N = 5, V = 12;
    Vec logits = random_vec(N * V, 16, 2.0f);
    std::vector<std::int32_t> targets = {0, 11, 5, 6, 2};
    // Whole vocabulary on one shard.
    const auto whole_loss = [&](const Vec& x) {
        Vec mx(N), se(N), tl(N), e = x;
        cross_entropy_row_max(mx.data(), x.data(), N, V);
        cross_entropy_target_logit(tl.data(), x.data(), targets.data(), N, V, 0);
        cross_entropy_exp(e.data(), se.data(), mx.data(), N, V);
        double l = 0;
        for (int n = 0; n < N; ++n) l += std::log(se[n]) + mx[n] - tl[n];
        return l / N;
    };
    // Two shards of 6, reduced as the tensor group would.
    Vec s0(N * 6), s1(N * 6);
    for (int n = 0; n < N; ++n)
        for (int v = 0; v < 6; ++v) {
            s0[n * 6 + v] = logits[n * V + v];
            s1[n * 6 + v] = logits[n * V + 6 + v];
        }
    Vec m0(N), m1(N), mx(N), e0(N), e1(N), t0(N), t1(N);
    cross_entropy_row_max(m0.data(), s0.data(), N, 6);
    cross_entropy_row_max(m1.data(), s1.data(), N, 6);
    for (int n = 0; n < N; ++n) mx[n] = std::max(m0[n], m1[n]);
    cross_entropy_target_logit(t0.data(), s0.data(), targets.data(), N, 6, 0);
    cross_entropy_target_logit(t1.data(), s1.data(), targets.data(), N, 6, 6);
    cross_entropy_exp(s0.data(), e0.data(), mx.data(), N, 6);
    cross_entropy_exp(s1.data(), e1.data(), mx.data(), N, 6);
    double sharded = 0;
    for (int n = 0; n < N; ++n) sharded += std::log(e0[n] + e1[n]) + mx[n] - (t0[n] + t1[n]);
    EXPECT_NEAR(sharded / N, whole_loss(logits), 1e-5);
    // Gradient of the mean loss: the exponentials turned into dlogits in place.
    Vec mxw(N), sew(N), d = logits;
    cross_entropy_row_max(mxw.data(), logits.data(), N, V);
    cross_entropy_exp(d.data(), sew.data(), mxw.data(), N, V);
    cross_entropy_backward(d.data(), sew.data(), targets.data(), 1.0f / N, N, V, 0);
    check_gradient(
        logits, d, [&] { return whole_loss(logits); }, "cross entropy", 1e-2f, 1e-2);
}

TEST(CpuKernels, AdamWMatchesTheFormula) {
    Vec p = {1.0f, -2.0f}, g = {0.5f, -0.25f}, m = {0, 0}, v = {0, 0};
    adamw_update(p.data(), g.data(), m.data(), v.data(), 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1,
                 1.0f);
    // Step 1: m̂ = g, v̂ = g², update = g/|g| = sign(g).
    EXPECT_NEAR(p[0], 1.0f - 0.1f * (1.0f + 0.01f * 1.0f), 1e-6);
    EXPECT_NEAR(p[1], -2.0f - 0.1f * (-1.0f + 0.01f * -2.0f), 1e-6);
}

// The clipping factor taken inside AdamW gives what scaling the gradients first gave, bit for
// bit, at a step where the moments are not trivial.
TEST(CpuKernels, AdamWGradientScaleEqualsScalingTheGradientsFirst) {
    const std::int64_t n = 2051;
    const Vec p0 = random_vec(std::size_t(n), 50), g = random_vec(std::size_t(n), 51),
              m0 = random_vec(std::size_t(n), 52, 0.1f);
    Vec v0 = random_vec(std::size_t(n), 53, 0.1f);
    for (auto& e : v0) e = e * e;
    const float clip = 0.37f;
    Vec scaled = g;
    for (auto& e : scaled) e *= clip;
    Vec p1 = p0, m1 = m0, v1 = v0, p2 = p0, m2 = m0, v2 = v0;
    adamw_update(p1.data(), g.data(), m1.data(), v1.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4,
                 clip);
    adamw_update(p2.data(), scaled.data(), m2.data(), v2.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                 4, 1.0f);
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(m1, m2);
    EXPECT_EQ(v1, v2);
    EXPECT_NE(p1, p0);
}

TEST(CpuKernels, RopeRotatesPairsAndItsBackwardIsTheTranspose) {
    const std::int64_t rows = 5, heads = 3, D = 8, stride = heads * D + 4; // padded rows
    const std::vector<std::int32_t> positions = {0, 1, 7, 100, 3};
    const Vec x0 = random_vec(std::size_t(rows * stride), 40);
    Vec x = x0;
    rope_forward(x.data(), rows, stride, heads, D, positions.data(), 10000.0);
    // Position 0 does not move; pair (0, D/2) of position p turns by p radians; each pair keeps
    // its length; padding is untouched.
    for (std::int64_t i = 0; i < heads * D; ++i)
        EXPECT_FLOAT_EQ(x[std::size_t(i)], x0[std::size_t(i)]);
    const std::int64_t r = 3, h = 2, at = r * stride + h * D;
    const double a = x0[std::size_t(at)], b = x0[std::size_t(at + D / 2)];
    EXPECT_NEAR(x[std::size_t(at)], a * std::cos(100.0) - b * std::sin(100.0), 1e-5);
    EXPECT_NEAR(x[std::size_t(at + D / 2)], b * std::cos(100.0) + a * std::sin(100.0), 1e-5);
    const std::size_t i3 = std::size_t(at + 3), j3 = std::size_t(at + 3 + D / 2);
    EXPECT_NEAR(std::hypot(x[i3], x[j3]), std::hypot(x0[i3], x0[j3]), 1e-5);
    EXPECT_EQ(x[std::size_t(stride - 1)], x0[std::size_t(stride - 1)]);
    // ⟨rope(x), y⟩ = ⟨x, rope_backward(y)⟩, and backward undoes forward.
    const Vec y0 = random_vec(x.size(), 41);
    Vec y = y0;
    rope_backward(y.data(), rows, stride, heads, D, positions.data(), 10000.0);
    EXPECT_NEAR(dot(x, y0), dot(x0, y), 1e-4 * (1.0 + std::fabs(dot(x, y0))));
    rope_backward(x.data(), rows, stride, heads, D, positions.data(), 10000.0);
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], x0[i], 1e-5) << i;
}

TEST(CpuKernels, RopeScoresDependOnlyOnRelativePosition) {
    // q at position p and k at position p − 3 score the same for every p.
    const std::int64_t D = 16;
    const Vec q0 = random_vec(D, 42), k0 = random_vec(D, 43);
    std::vector<double> scores;
    for (std::int32_t p : {3, 10, 57, 1000}) {
        Vec q = q0, k = k0;
        const std::int32_t pq = p, pk = p - 3;
        rope_forward(q.data(), 1, D, 1, D, &pq, 500000.0);
        rope_forward(k.data(), 1, D, 1, D, &pk, 500000.0);
        scores.push_back(dot(q, k));
    }
    for (double s : scores) EXPECT_NEAR(s, scores.front(), 1e-4 * (1.0 + std::fabs(s)));
}

TEST(CpuKernels, DropoutKeepsAboutOneMinusPScaledAndDependsOnlyOnTheKey) {
    const std::int64_t rows = 200, cols = 500;
    std::vector<std::uint64_t> keys(rows);
    for (std::int64_t r = 0; r < rows; ++r)
        keys[std::size_t(r)] = dropout_key(99, std::uint64_t(r));
    Vec x(rows * cols, 1.0f);
    dropout_rows(x.data(), rows, cols, keys.data(), 0.1f);
    std::size_t kept = 0;
    for (float v : x) {
        ASSERT_TRUE(v == 0.0f || std::fabs(v - 1.0f / 0.9f) < 1e-6f) << v;
        kept += v != 0.0f;
    }
    EXPECT_NEAR(double(kept) / double(x.size()), 0.9, 0.005); // 100 000 draws: σ ≈ 0.001
    // The same key drops the same columns wherever the row is; another key others.
    Vec one(cols, 1.0f), again(cols, 1.0f), other(cols, 1.0f);
    dropout_rows(one.data(), 1, cols, &keys[7], 0.1f);
    dropout_rows(again.data(), 1, cols, &keys[7], 0.1f);
    dropout_rows(other.data(), 1, cols, &keys[8], 0.1f);
    EXPECT_EQ(one, Vec(x.begin() + 7 * cols, x.begin() + 8 * cols));
    EXPECT_EQ(one, again);
    EXPECT_NE(one, other);
}

TEST(CpuKernels, AttentionWithDropoutHasTheGradientOfItsMaskedFunction) {
    // The mask is a fixed function of the keys, so the dropped attention is a smooth function of
    // qkv and its backward must match finite differences; at p = 0.3 every row loses some.
    const int B = 2, T = 6, H = 4, KV = 2, D = 3, W = (H + 2 * KV) * D;
    std::vector<std::uint64_t> keys(B * H * T);
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = dropout_key(5, i);
    const AttentionDropout dropout{0.3f, keys.data()};
    Vec qkv = random_vec(B * T * W, 50), r = random_vec(B * T * H * D, 51);
    Vec out(B * T * H * D), plain(out.size()), probs(B * H * T * T);
    const auto loss = [&] {
        attention_forward(out.data(), probs.data(), qkv.data(), B, T, H, KV, D, &dropout);
        return dot(out, r);
    };
    loss();
    attention_forward(plain.data(), probs.data(), qkv.data(), B, T, H, KV, D);
    EXPECT_NE(out, plain); // something was dropped
    loss();
    Vec dqkv(B * T * W, 0);
    attention_backward(dqkv.data(), r.data(), qkv.data(), probs.data(), B, T, H, KV, D, &dropout);
    check_gradient(qkv, dqkv, loss, "attention with dropout dqkv");
}
