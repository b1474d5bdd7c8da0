// The planner tries the FP8 parameter gather and BF16 Adam moments before it recomputes or
// shards more, names what it took, and exports the Megatron flags that run it.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/planner/planner.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

// Llama 3 70B on `nodes` DGX H100s: tight enough that without the savers its fastest layouts
// recompute or leave the distributed optimizer's savings unused.
planner::PlanResult plan_llama70b(std::int64_t nodes, bool savers, bool pin_moments = false) {
    core::JobInputs in;
    in.model = "llama3-70b";
    in.cluster = "dgx-h100";
    in.nodes = nodes;
    in.global_batch_size = 64;
    in.seq_length = 4096;
    const core::JobSpec job = core::load_specs(in);
    const core::Profile& h100 = test::preset_profile("h100-sxm5-80gb");
    planner::SearchSpace space;
    space.memory_savers = savers;
    space.optimizer_dtype_pinned = pin_moments;
    planner::PlanOptions options;
    options.memory_budget_bytes = 0.9 * h100.memory_bytes();
    options.top_k = 20;
    return planner::plan(job, h100, space, options);
}

bool takes_a_saver(const planner::Candidate& c) {
    return c.job.plan.fp8.param_gather ||
           c.job.model.precision.optimizer_state != core::Dtype::fp32;
}

} // namespace

TEST(MemorySavers, TakenWhereTheyBeatRecomputationAndNamed) {
    const planner::PlanResult with = plan_llama70b(4, true);
    const planner::PlanResult without = plan_llama70b(4, false);
    ASSERT_FALSE(with.best.empty());
    ASSERT_FALSE(without.best.empty());
    for (const planner::Candidate& c : without.best) {
        EXPECT_FALSE(takes_a_saver(c)) << core::describe_features(c.job.plan, 1);
        EXPECT_TRUE(c.memory_savers.empty());
    }
    const planner::Candidate& best = with.best.front();
    // The savers open a faster layout than the search without them finds.
    EXPECT_LT(best.step_time_s, without.best.front().step_time_s);
    ASSERT_TRUE(takes_a_saver(best));
    EXPECT_NE(best.memory_savers.find("parameter gather"), std::string::npos) << best.memory_savers;
    for (const planner::Candidate& c : with.best) {
        if (!takes_a_saver(c)) continue;
        EXPECT_TRUE(c.job.plan.distributed_optimizer) << core::describe_features(c.job.plan, 1);
        EXPECT_FALSE(c.memory_savers.empty());
        const std::string args = planner::megatron_arguments(c.job);
        if (c.job.plan.fp8.param_gather) {
            EXPECT_NE(args.find("--fp8-param-gather"), std::string::npos) << args;
        }
        if (c.job.model.precision.optimizer_state == core::Dtype::bf16) {
            EXPECT_NE(args.find("--use-precision-aware-optimizer"), std::string::npos) << args;
            EXPECT_NE(args.find("--exp-avg-dtype bf16"), std::string::npos) << args;
        }
    }
}

TEST(MemorySavers, LetALayoutFitThatOtherwiseCannot) {
    // Two nodes: no layout fits 90 % of an H100 without the savers.
    EXPECT_TRUE(plan_llama70b(2, false).best.empty());
    const planner::PlanResult with = plan_llama70b(2, true);
    ASSERT_FALSE(with.best.empty());
    EXPECT_TRUE(takes_a_saver(with.best.front()));
    EXPECT_LE(with.best.front().peak_memory_bytes,
              0.9 * test::preset_profile("h100-sxm5-80gb").memory_bytes());
}

TEST(MemorySavers, APinnedMomentDtypeIsKept) {
    for (const planner::Candidate& c : plan_llama70b(2, true, true).best)
        EXPECT_EQ(c.job.model.precision.optimizer_state, core::Dtype::fp32);
}
