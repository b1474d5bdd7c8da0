// The planner tries NVFP4 where the profile has an fp4 GEMM table (Blackwell), and
// --megatron-args writes Megatron-Core's FP4 flags for it.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/planner/planner.h"

#include <gtest/gtest.h>

using namespace trident;

TEST(Nvfp4Search, TriedOnBlackwellAndExportedWithMegatronsFlags) {
    core::JobInputs in;
    in.model = "gpt3-1.3b";
    in.cluster = "dgx-b200";
    in.nodes = 1;
    in.global_batch_size = 16;
    in.seq_length = 2048;
    const core::JobSpec job = core::load_specs(in);
    const core::Profile& b200 = test::preset_profile("b200-sxm-180gb");
    planner::PlanOptions options;
    options.memory_budget_bytes = 0.9 * b200.memory_bytes();
    options.top_k = 50;
    const planner::PlanResult r = planner::plan(job, b200, {}, options);
    const planner::Candidate* nvfp4 = nullptr;
    for (const planner::Candidate& c : r.best)
        if (!nvfp4 && c.job.plan.fp8.recipe == core::Fp8Recipe::nvfp4) nvfp4 = &c;
    ASSERT_NE(nvfp4, nullptr);
    const std::string args = planner::megatron_arguments(nvfp4->job);
    EXPECT_NE(args.find("--fp4-format e2m1"), std::string::npos) << args;
    EXPECT_NE(args.find("--fp4-recipe nvfp4"), std::string::npos) << args;
    EXPECT_EQ(args.find("--fp8-"), std::string::npos) << args;
}
