// Benchmark: the CPU executor's two attention paths, forward and backward, one thread — the
// unfused one that stores the b·h·s² probabilities (--no-flash-attention) and flash attention
// (tiled online softmax, saved log-sum-exp, recomputed probabilities; the default). Prints
// milliseconds (median of repetitions), causal GFLOP/s (FLOPs 4·b·h·s²·d halved for the mask,
// the backward 2.5× the forward, as the simulator counts them) and the bytes each keeps for
// the backward. Run: build/bench/cpu_attention_bench [repetitions].
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace k = trident::kernels::cpu;
using Clock = std::chrono::steady_clock;

namespace {

template <typename F>
double median_s(int repetitions, F&& run) {
    run(); // warm-up
    std::vector<double> times;
    for (int i = 0; i < repetitions; ++i) {
        const auto start = Clock::now();
        run();
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

std::vector<float> random_values(std::size_t n) {
    std::mt19937 g(3);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

} // namespace

int main(int argc, char** argv) {
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    k::set_blas_threads(1);
    struct Shape {
        int B, T, H, D;
    };
    std::printf("| b·heads × seq × head dim | path | forward ms | backward ms | forward GFLOP/s "
                "| backward GFLOP/s | kept for backward |\n|---|---|---|---|---|---|---|\n");
    for (const Shape s : {Shape{4, 128, 4, 32}, Shape{4, 256, 12, 64}, Shape{1, 1024, 12, 64},
                          Shape{1, 2048, 8, 64}}) {
        const int W = 3 * s.H * s.D;
        const auto qkv = random_values(std::size_t(s.B) * s.T * W);
        const auto dout = random_values(std::size_t(s.B) * s.T * s.H * s.D);
        std::vector<float> out(dout.size()), dqkv(qkv.size());
        std::vector<float> probs(std::size_t(s.B) * s.H * s.T * s.T),
            lse(std::size_t(s.B) * s.H * s.T);
        const double flops = 4.0 * s.B * s.H * double(s.T) * s.T * s.D / 2.0;
        const auto row = [&](const char* path, double f, double b, double kept_bytes) {
            std::printf("| %d × %d × %d | %s | %.2f | %.2f | %.1f | %.1f | %.1f MiB |\n", s.B * s.H,
                        s.T, s.D, path, f * 1e3, b * 1e3, flops / f / 1e9, 2.5 * flops / b / 1e9,
                        kept_bytes / 1048576.0);
        };
        const double stored_f = median_s(repetitions, [&] {
            k::attention_forward(out.data(), probs.data(), qkv.data(), s.B, s.T, s.H, s.H, s.D);
        });
        const double stored_b = median_s(repetitions, [&] {
            k::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), s.B, s.T, s.H,
                                  s.H, s.D);
        });
        row("stored scores", stored_f, stored_b, 4.0 * double(probs.size()));
        const double flash_f = median_s(repetitions, [&] {
            k::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.H, s.D);
        });
        const double flash_b = median_s(repetitions, [&] {
            k::flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(),
                                        lse.data(), s.B, s.T, s.H, s.H, s.D);
        });
        row("flash", flash_f, flash_b, 4.0 * double(lse.size()));
    }
    return 0;
}
