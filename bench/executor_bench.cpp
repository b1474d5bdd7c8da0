// Benchmark: the CPU executor on GPT-2 124M (one rank, T kernel threads; default 2, sequence 256,
// micro-batch 4). Reports tokens/s and model GFLOP/s, and the share of the step the same
// model's GEMMs take when run alone through sgemm at the same shapes (target: ≥ 70 % at
// sequence 64, 256 and 1024). Run: build/bench/executor_bench [threads] [steps] [seq] [mbs].
#include "trident/core/job_loader.h"
#include "trident/executor/process_groups.h"
#include "trident/executor/trainer.h"
#include "trident/kernels/cpu.h"
#include "trident/simulator/flops.h"
#include "trident/simulator/layer_ops.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <vector>

using namespace trident;

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const int steps = argc > 2 ? std::atoi(argv[2]) : 4;
    const int seq_length = argc > 3 ? std::atoi(argv[3]) : 256;
    const int micro_batch = argc > 4 ? std::atoi(argv[4]) : 4;
    if (threads < 1 || steps < 2 || seq_length < 1 || micro_batch < 1) {
        std::fprintf(stderr, "usage: executor_bench [threads>=1] [steps>=2] [seq>=1] [mbs>=1]\n");
        return 2;
    }
    executor::MpiSession mpi(&argc, &argv);
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    kernels::cpu::set_blas_threads(threads);
    core::JobInputs in;
    in.model = "gpt2-124m";
    in.cluster = "localhost";
    in.devices_per_node = 1;
    in.tp = 1;
    in.pp = 1;
    in.dp = "1";
    in.micro_batch_size = micro_batch;
    in.global_batch_size = micro_batch;
    in.seq_length = seq_length;
    core::JobSpec job = core::load_job(in);
    job.model.dropout = false; // the PyTorch comparison in the issue runs without dropout
    executor::ProcessGroups groups(job.plan, 0);
    executor::CpuTrainer trainer(job, groups, 1);

    // The same step's GEMMs alone, at the same shapes, through the same sgemm.
    const simulator::LayerView view = simulator::LayerView::of(job.plan, job.training.seq_length);
    std::vector<simulator::Op> ops;
    for (std::int64_t l = 0; l < job.model.num_layers; ++l) {
        auto layer = simulator::layer_ops(job.model, view, l);
        ops.insert(ops.end(), layer.begin(), layer.end());
    }
    const auto head = simulator::head_ops(job.model, view, job.model.padded_vocab_size(1));
    ops.insert(ops.end(), head.begin(), head.end());
    std::vector<float> a(1 << 26, 0.5f), b(1 << 26, 0.25f), c(1 << 26);
    // Each GEMM goes through the call the step makes for its phase, so transposes and
    // accumulation (the gradients add into their buffers) match too. layer_ops gives a linear
    // layer of N tokens, C inputs and OC outputs as forward (m N, n OC, k C), input gradient
    // (m N, n C, k OC) and weight gradient (m C, n OC, k N).
    const auto run_gemm = [&](const simulator::Op& op) {
        switch (op.phase) {
        case simulator::Phase::forward:
            kernels::cpu::matmul_forward(c.data(), a.data(), b.data(), nullptr, op.m, op.k, op.n);
            break;
        case simulator::Phase::backward_input:
            kernels::cpu::matmul_backward_input(c.data(), a.data(), b.data(), op.m, op.n, op.k);
            break;
        case simulator::Phase::backward_weight:
            kernels::cpu::matmul_backward_weight(c.data(), nullptr, a.data(), b.data(), op.k, op.m,
                                                 op.n);
            break;
        }
    };
    const auto gemm_pass_s = [&] {
        const auto start = std::chrono::steady_clock::now();
        for (const auto& op : ops)
            if (op.kind == simulator::OpKind::gemm) run_gemm(op);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // A step, then the GEMM pass, in turns: this machine's speed drifts over a run (other
    // tenants), and a ratio of neighbouring measurements cancels most of the drift. The first
    // round warms up and is dropped; the medians are reported.
    std::vector<double> step_s, gemm_s, share;
    for (int s = 0; s < steps; ++s) {
        const double step = trainer.step(s).seconds;
        const double gemm = gemm_pass_s();
        if (s == 0) continue;
        step_s.push_back(step);
        gemm_s.push_back(gemm);
        share.push_back(gemm / step);
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    const double step = median(step_s), gemm = median(gemm_s);
    const double flops = simulator::step_flops(job).model;
    const double tokens = double(job.training.tokens_per_step());
    std::printf(
        "gpt2-124m, seq %d, micro-batch %d, 1 rank, %d kernel threads: step %.3f s, %.0f tokens/s, "
        "%.1f model GFLOP/s; its GEMMs alone take %.3f s (%.1f GFLOP/s): the step runs at %.0f %% "
        "of the pure-GEMM rate (median of %zu rounds, %.0f–%.0f %%)\n",
        seq_length, micro_batch, threads, step, tokens / step, flops / step / 1e9, gemm,
        flops / gemm / 1e9, 100.0 * median(share), share.size(),
        100.0 * *std::min_element(share.begin(), share.end()),
        100.0 * *std::max_element(share.begin(), share.end()));
    return 0;
}
