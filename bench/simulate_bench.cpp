// Benchmark: simulate one plan of GPT-3 175B on 1024 A100s (the speed target: under
// 2 ms on one core) — profile parsing excluded, everything else (cost model, schedule, event
// timing, memory model, report) included. Prints min / median / max over repetitions.
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/profile.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace trident;

int main(int argc, char** argv) {
    const int repetitions = argc > 1 ? std::atoi(argv[1]) : 200;
    const bool trace = argc > 2 && std::string(argv[2]) == "--trace";
    const core::Profile profile = core::Profile::from_json(
        core::resolve_reference("a100-sxm4-80gb", core::PresetKind::profile, "profile"));
    struct Case {
        const char* label;
        std::int64_t pp, vpp, mbs;
        const char* schedule;
    };
    const Case cases[] = {{"pp 8, 1f1b", 8, 1, 1, "1f1b"},
                          {"pp 16, interleaved v=2", 16, 2, 1, "interleaved-1f1b"},
                          {"pp 16, zero-bubble-h1", 16, 1, 1, "zero-bubble-h1"}};
    for (const Case& c : cases) {
        core::JobInputs in;
        in.model = "gpt3-175b";
        in.cluster = "dgx-a100-80gb";
        in.nodes = 128;
        in.tp = 8;
        in.pp = c.pp;
        in.vpp = c.vpp;
        in.dp = "auto";
        in.micro_batch_size = c.mbs;
        in.global_batch_size = 1536;
        in.schedule = c.schedule;
        in.recompute = "selective";
        in.sequence_parallel = true;
        const core::JobSpec job = core::load_job(in);
        std::vector<double> ms;
        std::size_t events = 0;
        for (int i = 0; i < repetitions; ++i) {
            const auto start = std::chrono::steady_clock::now();
            const simulator::Report r = simulator::simulate(job, profile, {.trace = trace});
            ms.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
            events = r.trace.events.size();
        }
        std::sort(ms.begin(), ms.end());
        std::printf("gpt3-175b, 1024 GPUs, %-24s %4lld micro-batches, %6zu events: ms min %.3f "
                    "median %.3f max %.3f\n",
                    c.label, static_cast<long long>(job.micro_batches_per_step()), events,
                    ms.front(), ms[ms.size() / 2], ms.back());
    }
    return 0;
}
