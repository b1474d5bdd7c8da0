// Uneven pipeline stages in the simulator and the planner: each stage's weights, compute,
// activation memory and idle time follow its own layers, and the planner picks the split that
// balances the stages' cost when the loss head is heavy.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/planner/planner.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec gpt3_uneven(const std::string& layout) {
    core::JobInputs in;
    in.model = "gpt3-175b";
    in.cluster = "dgx-a100-80gb";
    in.nodes = 16;
    in.tp = 8;
    in.pp = 8;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 64;
    in.pipeline_layout = layout;
    return core::load_job(in);
}

simulator::Report simulate(const core::JobSpec& job) {
    return simulator::simulate(job, test::preset_profile(job.cluster.device));
}

} // namespace

TEST(UnevenStages, EachStageFollowsItsOwnLayers) {
    const auto r = simulate(gpt3_uneven("6,14,12,12,12,12,14,14"));
    ASSERT_EQ(r.stages.size(), 8u);
    const auto& s1 = r.stages[1];
    const auto& s2 = r.stages[2];
    EXPECT_EQ(s1.layers, 14);
    EXPECT_EQ(s2.layers, 12);
    // Middle stages hold layers only: weights, gradients and compute scale with the count.
    EXPECT_NEAR(s1.memory.weights_bytes / s2.memory.weights_bytes, 14.0 / 12.0, 1e-9);
    EXPECT_NEAR(s1.memory.gradients_bytes / s2.memory.gradients_bytes, 14.0 / 12.0, 1e-9);
    EXPECT_NEAR(s1.compute_s / s2.compute_s, 14.0 / 12.0, 1e-6);
    // 1F1B: stage r holds pp - r micro-batches, each storing its own layers' activations.
    ASSERT_EQ(s1.memory.in_flight, 7);
    ASSERT_EQ(s2.memory.in_flight, 6);
    EXPECT_NEAR(s1.memory.activations_bytes / s2.memory.activations_bytes,
                (7.0 * 14.0) / (6.0 * 12.0), 1e-9);
    // The six-layer first stage waits the most; the 14-layer stages set the pace.
    for (std::size_t st = 1; st < r.stages.size(); ++st)
        EXPECT_GT(r.stages[0].bubble_s, r.stages[st].bubble_s) << st;
    // The same layers evenly split are faster than this unbalanced split.
    EXPECT_LT(simulate(gpt3_uneven("12,12,12,12,12,12,12,12")).step_time_s, r.step_time_s);
}

TEST(UnevenStages, PlannerBalancesAHeavyLossHead) {
    // GPT-2 124M: the 50k-word output layer costs about as much as five of its twelve layers,
    // so four even stages leave the last one far the slowest.
    core::JobInputs in;
    in.model = "gpt2-124m";
    in.cluster = "dgx-a100-80gb";
    in.nodes = 1;
    in.global_batch_size = 64;
    in.seq_length = 1024;
    const core::JobSpec specs = core::load_specs(in);
    planner::SearchSpace space;
    space.tp = {1};
    space.pp = {4};
    space.cp = {1};
    space.vpp = {1};
    space.micro_batch = {4};
    space.schedules = {core::ScheduleKind::one_f_one_b};
    space.distributed_optimizer = {false};
    planner::PlanOptions options;
    options.memory_budget_bytes = 60e9;
    options.top_k = 5;
    const auto& profile = test::preset_profile(specs.cluster.device);
    const planner::PlanResult r = planner::plan(specs, profile, space, options);
    ASSERT_FALSE(r.best.empty());
    const planner::Candidate& best = r.best.front();
    const core::PipelineSplit split = best.job.pipeline_split();
    EXPECT_FALSE(split.even());
    EXPECT_LT(split.layers.back(), 3); // the loss stage gives layers away
    EXPECT_NE(best.split_reason.find("balanced by cost"), std::string::npos) << best.split_reason;
    // Every split the planner tried is ranked: the even one is slower.
    bool even_seen = false;
    for (const planner::Candidate& c : r.best)
        if (c.job.pipeline_split().even()) {
            even_seen = true;
            EXPECT_GT(c.step_time_s, best.step_time_s);
        }
    EXPECT_TRUE(even_seen);
}

TEST(UnevenStages, PinnedSplitIsHonoured) {
    core::JobInputs in;
    in.model = "llama3-405b";
    in.cluster = "dgx-h100";
    in.nodes = 128;
    in.global_batch_size = 256;
    in.seq_length = 8192;
    const core::JobSpec specs = core::load_specs(in);
    planner::SearchSpace space;
    space.tp = {8};
    space.pp = {16};
    space.cp = {1};
    space.vpp = {1};
    space.first_stage_layers = 7;
    space.last_stage_layers = 7;
    planner::PlanOptions options;
    options.memory_budget_bytes = 72e9;
    options.top_k = 3;
    const planner::PlanResult r =
        planner::plan(specs, test::preset_profile(specs.cluster.device), space, options);
    ASSERT_FALSE(r.best.empty());
    std::vector<std::int64_t> expected(16, 8);
    expected.front() = expected.back() = 7;
    for (const planner::Candidate& c : r.best) {
        EXPECT_EQ(c.job.pipeline_split().layers, expected);
        EXPECT_EQ(c.split_reason, "pinned (7,8×14,7)");
    }
    const std::string args = planner::megatron_arguments(r.best.front().job);
    EXPECT_NE(args.find("--decoder-first-pipeline-num-layers 7"), std::string::npos) << args;
    EXPECT_NE(args.find("--decoder-last-pipeline-num-layers 7"), std::string::npos) << args;
}
