// The planner searches expert tensor parallelism (MoE parallel folding): where the data ranks
// are too few for the expert degree asked, whole experts spread over the tensor ranks too.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/planner/planner.h"

#include <gtest/gtest.h>

using namespace trident;

TEST(ExpertFolding, ThePlannerFoldsExpertsWhereDataRanksAreTooFew) {
    // tp 4 on 16 GPUs leaves dp·cp = 4: ep 16 exists only with the experts folded over the tp
    // ranks (etp 1), which the search tries on its own.
    core::JobInputs in;
    in.model = "qwen3-30b-a3b";
    in.cluster = "dgx-h100";
    in.nodes = 2;
    in.global_batch_size = 32;
    in.seq_length = 4096;
    const core::JobSpec specs = core::load_specs(in);
    planner::SearchSpace space;
    space.tp = {4};
    space.pp = {1};
    space.ep = {16};
    planner::PlanOptions options;
    options.memory_budget_bytes = 70.0 * (1ull << 30);
    const planner::PlanResult r =
        planner::plan(specs, test::preset_profile(specs.cluster.device), space, options);
    ASSERT_FALSE(r.best.empty());
    for (const planner::Candidate& c : r.best) {
        EXPECT_EQ(c.job.plan.expert_tp(), 1);
        EXPECT_TRUE(c.job.plan.sequence_parallel);
    }
    // Pinned to etp = tp, nothing fits the grid, and the rejection says so.
    space.etp = {4};
    const planner::PlanResult pinned =
        planner::plan(specs, test::preset_profile(specs.cluster.device), space, options);
    EXPECT_TRUE(pinned.best.empty());
    std::int64_t grid_rejections = 0;
    for (const auto& [kind, group] : pinned.rejections)
        if (group.field == "parallel.etp") grid_rejections += group.count;
    EXPECT_GT(grid_rejections, 0);
}
