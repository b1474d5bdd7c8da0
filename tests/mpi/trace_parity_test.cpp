// The simulator times the Schedule the executor runs: `trident run --trace` and `trident simulate
// --trace` of the same job must record, on every pipeline stage, the same sequence of compute
// actions (kind, micro-batch, chunk), for every schedule kind. Both traces name each event's
// stage and carry the job they are of.
#include "../support/trident_process.h"
#include "trident/core/json_io.h"
#include "trident/core/trace.h"

#include <gtest/gtest.h>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace {

using ComputeAction = std::tuple<trident::core::EventKind, std::int32_t, std::int32_t>;
using PerStage = std::map<std::int32_t, std::vector<ComputeAction>>;

// F, B and W events of each stage in the order the trace holds them (each rank's events are
// written in the order they ran); recomputation blocks and data-parallel events aside.
PerStage compute_actions(const trident::core::Trace& trace) {
    PerStage out;
    for (const trident::core::TraceEvent& e : trace.events) {
        if (e.kind != trident::core::EventKind::forward &&
            e.kind != trident::core::EventKind::backward_input &&
            e.kind != trident::core::EventKind::backward_weight)
            continue;
        EXPECT_GE(e.stage, 0) << "an event without its stage";
        out[e.stage].emplace_back(e.kind, e.microbatch, e.chunk);
    }
    return out;
}

trident::core::Trace read_trace(const std::string& path) {
    return trident::core::read_chrome_trace(trident::core::read_json_file(path, "trace"), path);
}

void expect_same_actions(const std::string& schedule_flags) {
    const std::string job = "--model gpt-tiny --cluster localhost --devices-per-node 2 --pp 2 "
                            "--mbs 1 --gbs 4 --seq-length 32 " +
                            schedule_flags;
    const std::string measured = testing::TempDir() + "trident-parity-measured.json";
    const std::string simulated = testing::TempDir() + "trident-parity-simulated.json";
    const auto run =
        trident::test::run_shell(std::string("mpirun --allow-run-as-root --oversubscribe -np 2 ") +
                                 TRIDENT_BINARY + " run " + job + " --steps 1 --trace " + measured);
    ASSERT_EQ(run.exit_code, 0) << job << "\n" << run.err;
    const auto sim = trident::test::run_trident(
        trident::test::split_words("simulate " + job + " --profile " + TRIDENT_FIXTURES +
                                   "/profiles/cpu-host-2-ranks.json --trace " + simulated));
    ASSERT_EQ(sim.exit_code, 0) << job << "\n" << sim.err;
    const trident::core::Trace a = read_trace(measured), b = read_trace(simulated);
    EXPECT_EQ(a.source, "measured");
    EXPECT_EQ(b.source, "simulated");
    ASSERT_TRUE(a.plan.is_object()) << "the measured trace does not carry its job";
    ASSERT_TRUE(b.plan.is_object()) << "the simulated trace does not carry its job";
    EXPECT_EQ(a.plan.at("parallel"), b.plan.at("parallel")) << job;
    const PerStage ma = compute_actions(a), mb = compute_actions(b);
    ASSERT_EQ(ma.size(), 2u) << job;
    ASSERT_EQ(mb.size(), 2u) << job;
    for (const auto& [stage, actions] : ma) {
        ASSERT_TRUE(mb.count(stage)) << job << " stage " << stage;
        EXPECT_EQ(actions, mb.at(stage)) << job << " stage " << stage;
        EXPECT_FALSE(actions.empty());
    }
}

} // namespace

TEST(TraceParity, GPipe) {
    expect_same_actions("--schedule gpipe");
}
TEST(TraceParity, OneForwardOneBackward) {
    expect_same_actions("--schedule 1f1b");
}
TEST(TraceParity, Interleaved) {
    expect_same_actions("--schedule interleaved-1f1b --vpp 2");
}
TEST(TraceParity, ZeroBubbleH1) {
    expect_same_actions("--schedule zero-bubble-h1");
}
