// Benchmark: full-space planner searches (issue targets on this 2-core machine: GPT-3 175B on
// 1024 A100s under 1 s; a 1T model on 3072 and a Mixtral-class MoE on 512 under 5 s each;
// Llama 3 405B on 2,048 DGX H100 nodes and DeepSeek-V3 on 256, over uneven splits × FP8
// recipes × the other dimensions, and Qwen3-235B-A22B on 32, under 1 s each).
// Usage: plan_bench [REPETITIONS [MODEL]] — MODEL keeps that case alone.
// Profile loading excluded; prints seconds (min / median / max) and layouts per second.
#include "trident/core/job_loader.h"
#include "trident/planner/memory_budget.h"
#include "trident/planner/planner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace trident;

int main(int argc, char** argv) {
    const int repetitions = argc > 1 ? std::atoi(argv[1]) : 5;
    struct Case {
        const char* model;
        const char* cluster;
        std::int64_t nodes, gbs, seq;
    };
    const Case cases[] = {{"gpt3-175b", "dgx-a100-80gb", 128, 1536, 2048},
                          {"megatron-gpt-1t", "dgx-a100-80gb", 384, 3072, 2048},
                          {"mixtral-8x7b", "dgx-h100", 64, 1024, 4096},
                          {"llama3-405b", "dgx-h100", 2048, 2048, 8192},
                          {"deepseek-v3", "dgx-h100", 256, 8192, 4096},
                          {"qwen3-235b-a22b", "dgx-h100", 32, 1024, 4096}};
    const std::string only = argc > 2 ? argv[2] : "";
    for (const Case& c : cases) {
        if (!only.empty() && only != c.model) continue;
        core::JobInputs in;
        in.model = c.model;
        in.cluster = c.cluster;
        in.nodes = c.nodes;
        in.global_batch_size = c.gbs;
        in.seq_length = c.seq;
        const core::JobSpec specs = core::load_specs(in);
        const core::Profile profile = core::load_profile("", specs.cluster);
        planner::PlanOptions options;
        options.memory_budget_bytes = planner::parse_memory_budget(
            planner::kDefaultMemoryBudget, profile.memory_bytes(), "--memory-budget");
        std::vector<double> seconds;
        planner::PlanResult last;
        for (int i = 0; i < repetitions; ++i) {
            const auto start = std::chrono::steady_clock::now();
            last = planner::plan(specs, profile, {}, options);
            seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(seconds.begin(), seconds.end());
        std::printf("%-16s on %5lld devices: %6lld layouts, %5lld fit, %4lld simulated; s min %.3f "
                    "median %.3f max %.3f; %.0f layouts/s\n",
                    c.model, (long long)specs.cluster.devices(), (long long)last.layouts,
                    (long long)last.feasible, (long long)last.simulated, seconds.front(),
                    seconds[seconds.size() / 2], seconds.back(),
                    double(last.layouts) / seconds[seconds.size() / 2]);
    }
    return 0;
}
