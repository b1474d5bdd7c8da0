// The kernels' own thread pool: parallel_for's blocks, and every kernel that uses it giving the
// one-thread results bit for bit at 2 and 3 threads (the layout tests compare runs with
// different --threads, and a changed last bit would be a changed result).
#include "kernel_test_support.h"
#include "trident/kernels/cpu.h"

#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

namespace trident::kernels::cpu {
namespace {

using test::random_vec;
using test::Vec;

// Restores one thread after each test, as every other test expects.
class ParallelKernels : public ::testing::Test {
protected:
    void TearDown() override { set_blas_threads(1); }
};

bool same_bits(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs `kernel` (which fills the vectors it returns) at 1, 2 and 3 threads and expects the
// same bits every time.
void expect_thread_count_invariant(const char* what,
                                   const std::function<std::vector<Vec>()>& kernel) {
    set_blas_threads(1);
    const std::vector<Vec> one = kernel();
    for (int threads : {2, 3}) {
        set_blas_threads(threads);
        const std::vector<Vec> many = kernel();
        ASSERT_EQ(one.size(), many.size());
        for (std::size_t i = 0; i < one.size(); ++i)
            EXPECT_TRUE(same_bits(one[i], many[i]))
                << what << ": output " << i << " differs at " << threads << " threads";
    }
}

TEST_F(ParallelKernels, BlocksCoverTheRangeOnceStartingAtMultiplesOfTheGrain) {
    for (int threads : {1, 2, 3}) {
        set_blas_threads(threads);
        EXPECT_EQ(kernel_threads(), threads);
        for (std::int64_t n : {0, 1, 5, 1000, 1024, 5003}) {
            std::vector<int> hits(std::size_t(n), 0);
            std::mutex m;
            std::vector<std::pair<std::int64_t, std::int64_t>> blocks;
            parallel_for(n, 64, [&](std::int64_t begin, std::int64_t end) {
                for (std::int64_t i = begin; i < end; ++i) ++hits[std::size_t(i)];
                std::lock_guard lock(m);
                blocks.emplace_back(begin, end);
            });
            for (int h : hits) EXPECT_EQ(h, 1) << "n " << n << ", " << threads << " threads";
            EXPECT_LE(blocks.size(), std::size_t(threads));
            for (const auto& [begin, end] : blocks) {
                EXPECT_EQ(begin % 64, 0) << "n " << n;
                EXPECT_LT(begin, end);
            }
            if (n > 128 && threads > 1) {
                EXPECT_GT(blocks.size(), 1u) << "n " << n;
            }
        }
    }
}

TEST_F(ParallelKernels, NormsMatchOneThread) {
    const std::int64_t N = 37, C = 200;
    const Vec x = random_vec(N * C, 1), w = random_vec(C, 2), bias = random_vec(C, 3),
              dy = random_vec(N * C, 4);
    expect_thread_count_invariant("layernorm", [&] {
        Vec out(N * C), mean(N), rstd(N), dx(N * C, 0.5f), dw(C, 0.25f), db(C, 0.125f);
        layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N,
                          C, 1e-5f);
        layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, C);
        return std::vector<Vec>{out, mean, rstd, dx, dw, db};
    });
    expect_thread_count_invariant("rmsnorm", [&] {
        Vec out(N * C), rstd(N), dx(N * C, 0.5f), dw(C, 0.25f);
        rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
        rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
        return std::vector<Vec>{out, rstd, dx, dw};
    });
}

TEST_F(ParallelKernels, ActivationsMatchOneThread) {
    const std::int64_t n = 5003, N = 29, F = 96; // n: blocks of 1024 and a ragged tail
    const Vec x = random_vec(n, 5), dy = random_vec(n, 6);
    expect_thread_count_invariant("gelu", [&] {
        Vec out(n), dx(n, 0.5f);
        gelu_forward(out.data(), x.data(), n);
        gelu_backward(dx.data(), x.data(), dy.data(), n);
        return std::vector<Vec>{out, dx};
    });
    const Vec in = random_vec(N * 2 * F, 7), dout = random_vec(N * F, 8);
    expect_thread_count_invariant("swiglu", [&] {
        Vec out(N * F), din(N * 2 * F, 0.5f);
        swiglu_forward(out.data(), in.data(), N, F);
        swiglu_backward(din.data(), in.data(), dout.data(), N, F);
        return std::vector<Vec>{out, din};
    });
}

TEST_F(ParallelKernels, CrossEntropyAndAdamWMatchOneThread) {
    const std::int64_t N = 23, V = 301;
    const Vec logits = random_vec(N * V, 9, 3.0f);
    std::vector<std::int32_t> targets(N);
    for (std::int64_t n = 0; n < N; ++n) targets[std::size_t(n)] = std::int32_t((n * 37) % V);
    expect_thread_count_invariant("cross-entropy", [&] {
        Vec work = logits, row_max(N), sum_exp(N), target(N);
        cross_entropy_row_max(row_max.data(), work.data(), N, V);
        cross_entropy_target_logit(target.data(), work.data(), targets.data(), N, V, 0);
        cross_entropy_exp(work.data(), sum_exp.data(), row_max.data(), N, V);
        cross_entropy_backward(work.data(), sum_exp.data(), targets.data(), 0.5f, N, V, 0);
        return std::vector<Vec>{row_max, sum_exp, target, work};
    });
    const std::int64_t n = 4099;
    const Vec p0 = random_vec(n, 10), g = random_vec(n, 11), m0 = random_vec(n, 12, 0.1f);
    Vec v0 = random_vec(n, 13, 0.1f);
    for (auto& e : v0) e = e * e;
    expect_thread_count_invariant("adamw", [&] {
        Vec p = p0, m = m0, v = v0;
        adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3,
                     0.7f);
        return std::vector<Vec>{p, m, v};
    });
}

TEST_F(ParallelKernels, UnfusedAttentionMatchesOneThreadWithGroupedHeadsAndDropout) {
    const std::int64_t B = 2, T = 37, H = 6, KV = 2, D = 8;
    const std::int64_t W = (H + 2 * KV) * D;
    const Vec qkv = random_vec(B * T * W, 16), dout = random_vec(B * T * H * D, 17);
    std::vector<std::uint64_t> keys(std::size_t(B * H * T));
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = dropout_key(43, i);
    for (const bool with_dropout : {false, true}) {
        const AttentionDropout drop{0.1f, keys.data()};
        const AttentionDropout* dropout = with_dropout ? &drop : nullptr;
        expect_thread_count_invariant(with_dropout ? "unfused, dropout" : "unfused", [&] {
            Vec out(B * T * H * D), probs(B * H * T * T), dqkv(B * T * W, 0.0f);
            attention_forward(out.data(), probs.data(), qkv.data(), B, T, H, KV, D, dropout);
            attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), B, T, H, KV, D,
                               dropout);
            return std::vector<Vec>{out, probs, dqkv};
        });
    }
}

TEST_F(ParallelKernels, FlashAttentionMatchesOneThreadWithGroupedHeadsAndDropout) {
    const std::int64_t B = 2, T = 130, H = 6, KV = 2, D = 16; // 3 query heads per kv head
    const std::int64_t W = (H + 2 * KV) * D;
    const Vec qkv = random_vec(B * T * W, 14), dout = random_vec(B * T * H * D, 15);
    std::vector<std::uint64_t> keys(std::size_t(B * H * T));
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = dropout_key(42, i);
    for (const bool with_dropout : {false, true}) {
        const AttentionDropout drop{0.1f, keys.data()};
        const AttentionDropout* dropout = with_dropout ? &drop : nullptr;
        expect_thread_count_invariant(with_dropout ? "flash, dropout" : "flash", [&] {
            Vec out(B * T * H * D), lse(B * H * T), dqkv(B * T * W, 0.0f);
            flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D, dropout);
            flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(),
                                     B, T, H, KV, D, dropout);
            return std::vector<Vec>{out, lse, dqkv};
        });
    }
}

// The linear layers' GEMMs, cut into row or column blocks of the output over the threads:
// each block is its own single-threaded sgemm, so the sums over k must run as in one call.
// A small GEMM (one call) and two cut into 2 and 3 blocks of rows or of columns, with sides that
// are no multiple of the 16-row grain.
TEST_F(ParallelKernels, MatmulsMatchOneThreadInRowAndColumnBlocks) {
    for (const auto [N, C, OC] :
         {std::array<std::int64_t, 3>{37, 19, 53}, std::array<std::int64_t, 3>{301, 160, 200},
          std::array<std::int64_t, 3>{67, 320, 640}}) {
        const Vec x = random_vec(std::size_t(N * C), 20), w = random_vec(std::size_t(OC * C), 21),
                  bias = random_vec(std::size_t(OC), 22),
                  dout = random_vec(std::size_t(N * OC), 23);
        const std::string what =
            "matmul " + std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(OC);
        expect_thread_count_invariant(what.c_str(), [&] {
            Vec out(std::size_t(N * OC)), dx = random_vec(std::size_t(N * C), 24),
                                          dw = random_vec(std::size_t(OC * C), 25),
                                          db = random_vec(std::size_t(OC), 26);
            matmul_forward(out.data(), x.data(), w.data(), bias.data(), N, C, OC);
            matmul_backward_input(dx.data(), dout.data(), w.data(), N, C, OC);
            matmul_backward_weight(dw.data(), db.data(), dout.data(), x.data(), N, C, OC);
            return std::vector<Vec>{out, dx, dw, db};
        });
        // And against the definition, so a block that skipped or repeated rows would show.
        Vec out(std::size_t(N * OC));
        set_blas_threads(3);
        matmul_forward(out.data(), x.data(), w.data(), bias.data(), N, C, OC);
        for (std::int64_t n = 0; n < N; n += 7)
            for (std::int64_t o = 0; o < OC; o += 5) {
                double want = bias[std::size_t(o)];
                for (std::int64_t c = 0; c < C; ++c)
                    want += double(x[std::size_t(n * C + c)]) * double(w[std::size_t(o * C + c)]);
                EXPECT_NEAR(out[std::size_t(n * OC + o)], want, 1e-4 * (1.0 + std::abs(want)));
            }
    }
}

// The gradient norm's sum of squares: the same bits at any thread count (fixed chunks summed in
// order), within double rounding of the exact sum, and zero for nothing; fill covers it all.
TEST_F(ParallelKernels, SumOfSquaresIsExactToDoubleRoundingAtAnyThreadCount) {
    const std::int64_t n = 3 * (1 << 14) + 1001; // three whole chunks and a ragged one
    const Vec x = random_vec(std::size_t(n), 27, 2.0f);
    long double exact = 0.0L;
    for (float v : x) exact += static_cast<long double>(v) * v;
    set_blas_threads(1);
    const double one = sum_of_squares(x.data(), n);
    EXPECT_NEAR(one, double(exact), 1e-12 * double(exact));
    for (int threads : {2, 3}) {
        set_blas_threads(threads);
        EXPECT_EQ(sum_of_squares(x.data(), n), one) << threads << " threads";
    }
    EXPECT_EQ(sum_of_squares(x.data(), 0), 0.0);
    Vec y = x;
    fill(y.data(), n, 0.25f);
    for (float v : y) EXPECT_EQ(v, 0.25f);
}

// A kernel called from inside another's block (or from a second thread while a region runs)
// runs its range on the calling thread: every item once, no deadlock.
TEST_F(ParallelKernels, NestedRegionsRunOnTheCallingThread) {
    set_blas_threads(2);
    std::vector<int> hits(1000, 0);
    parallel_for(10, 1, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t i = first; i < last; ++i)
            parallel_for(100, 8, [&](std::int64_t b, std::int64_t e) {
                for (std::int64_t j = b; j < e; ++j) ++hits[std::size_t(i * 100 + j)];
            });
    });
    for (int h : hits) EXPECT_EQ(h, 1);
}

} // namespace
} // namespace trident::kernels::cpu
