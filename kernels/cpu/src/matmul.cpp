// Linear layers through the BLAS (sgemm). OpenBLAS reaches about 150 GFLOP/s on one core of
// this machine (`trident profile --backend cpu`); hand-blocked loops on this class of CPU reach
// a small fraction of that, so the executor uses the BLAS.
//
// OpenBLAS runs single-threaded here (set_blas_threads): the kernels' own pool cuts each GEMM's
// output into blocks instead. OpenBLAS's idle workers spin on sched_yield for about 2^28 cycles
// after each threaded call (its THREAD_TIMEOUT, read once at load), so on 2 cores they took a
// core's share from every norm, activation and attention tile run between two GEMMs: a GPT-2
// step at sequence 1024 ran 12 % faster with one pool for all the work (bench/executor_bench).
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cblas.h>

namespace trident::kernels::cpu {
namespace {

// Row-major C[M×N] = op(A)·op(B) + beta·C, each op a transpose or not as flagged.
struct Gemm {
    bool trans_a, trans_b;
    std::int64_t M, N, K;
    const float* A;
    std::int64_t lda;
    const float* B;
    std::int64_t ldb;
    float beta;
    float* C;
    std::int64_t ldc;

    void run_rows(std::int64_t begin, std::int64_t end) const { // rows [begin, end) of C
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, int(end - begin), int(N), int(K), 1.0f,
                    trans_a ? A + begin : A + begin * lda, int(lda), B, int(ldb), beta,
                    C + begin * ldc, int(ldc));
    }
    void run_columns(std::int64_t begin, std::int64_t end) const { // columns [begin, end) of C
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, int(M), int(end - begin), int(K), 1.0f, A,
                    int(lda), trans_b ? B + begin * ldb : B + begin, int(ldb), beta, C + begin,
                    int(ldc));
    }
};

// Blocks of the longer side of C, cut at multiples of 16 rows or columns (whole tiles of the
// BLAS kernels). OpenBLAS sums over k the same way in every block of its packed path, but its
// small-matrix kernels (Skylake-X: M·N·K ≤ 100³) sum differently, so a GEMM is cut only when it
// has 2 × 4·2^20 multiply-adds or more, each block then above about 2·2^20 even where the
// 16-wide edges make it the smaller: its bits do not depend on the thread count
// (tests/kernels/parallel_kernels_test.cpp). (OpenBLAS's AVX-512 "direct" sgemm, taken
// single-threaded for row-major NN products with beta 0 below 7·2^20, would break this; the
// three callers here are NT, and NN and TN with beta 1.)
constexpr std::int64_t kGrain = 16;
constexpr double kMinBlockMultiplyAdds = 4.0 * (1 << 20);

void pooled_sgemm(const Gemm& g) {
    const bool by_rows = g.M >= g.N;
    const std::int64_t side = by_rows ? g.M : g.N;
    const double multiply_adds = double(g.M) * double(g.N) * double(g.K);
    const std::int64_t blocks = std::min({std::int64_t(kernel_threads()), side / kGrain,
                                          std::int64_t(multiply_adds / kMinBlockMultiplyAdds)});
    if (blocks <= 1) {
        g.run_rows(0, g.M);
        return;
    }
    const auto edge = [&](std::int64_t b) {
        return b == blocks ? side : side * b / blocks / kGrain * kGrain;
    };
    parallel_for(blocks, 1, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t b = first; b < last; ++b)
            by_rows ? g.run_rows(edge(b), edge(b + 1)) : g.run_columns(edge(b), edge(b + 1));
    });
}

} // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC) {
    if (bias)
        parallel_for(N, 1, [=](std::int64_t first, std::int64_t last) {
            for (std::int64_t n = first; n < last; ++n)
                for (std::int64_t o = 0; o < OC; ++o) out[n * OC + o] = bias[o];
        });
    pooled_sgemm({false, true, N, OC, C, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC});
}

void matmul_backward_input(float* dinp, const float* dout, const float* weight, std::int64_t N,
                           std::int64_t C, std::int64_t OC) {
    pooled_sgemm({false, false, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C});
}

void matmul_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp,
                            std::int64_t N, std::int64_t C, std::int64_t OC) {
    pooled_sgemm({true, false, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C});
    if (dbias) // each output's sum runs over n in order, whichever thread takes it
        parallel_for(OC, 16, [=](std::int64_t first, std::int64_t last) {
            for (std::int64_t n = 0; n < N; ++n)
                for (std::int64_t o = first; o < last; ++o) dbias[o] += dout[n * OC + o];
        });
}

} // namespace trident::kernels::cpu
