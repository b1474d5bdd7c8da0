// The MoE models people train now, as the issue asks: DeepSeek-V3 in the layout it was trained
// in validates, fits and is found by the planner; Qwen3, GPT-OSS and Mixtral are planned on H100
// clusters.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/planner/planner.h"
#include "trident/simulator/device_memory.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

constexpr double kGiB = double(1ull << 30);

// DeepSeek-V3 §3.2–3.3: 2,048 H800, pp 16 DualPipe, ep 64, no tp, ZeRO-1, FP8 blockwise,
// 4,096-token sequences, batch 15,360; the preset brings the MTP module and BF16 moments.
core::JobInputs deepseek_as_trained() {
    core::JobInputs in;
    in.model = "deepseek-v3";
    in.cluster = "hgx-h800";
    in.nodes = 256;
    in.tp = 1;
    in.pp = 16;
    in.ep = 64;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 15360;
    in.seq_length = 4096;
    in.schedule = "dualpipe";
    in.first_stage_layers = 4;
    in.last_stage_layers = 1;
    in.precision = "fp8-blockwise";
    in.fp8_param_gather = true;
    in.distributed_optimizer = true;
    in.moe_token_dispatcher = "flex";
    in.overlap_moe_expert_parallel_comm = true;
    // DeepSeek recomputes every RMSNorm, the MLA up-projections and the SwiGLU output.
    in.recompute_modules = std::vector<std::string>{"layernorm", "mla_up_proj", "moe_act"};
    return in;
}

} // namespace

TEST(MoePresets, DeepSeekV3AsTrainedFitsAndThePlannerFindsIt) {
    const core::JobSpec job = core::load_job(deepseek_as_trained());
    EXPECT_EQ(job.model.mtp_num_layers, 1);
    EXPECT_EQ(job.model.precision.optimizer_state, core::Dtype::bf16);
    const core::Profile& h800 = test::preset_profile("h800-sxm5-80gb");
    const simulator::Report r = simulator::simulate(job, h800);
    ASSERT_EQ(r.stages.size(), 16u);
    // DeepSeek's own framework, not PyTorch's caching allocator: the tensors and the buffers
    // outside any allocator (context, NCCL, DeepEP) fit, without PyTorch's reserve.
    for (const auto& s : r.stages)
        EXPECT_LT(s.memory.allocated_bytes() + s.memory.runtime_bytes, h800.memory_bytes())
            << s.stage;
    // A step of 15,360 × 4,096 tokens over 2,048 GPUs at a believable rate: DeepSeek's
    // GPU-hours put the whole run at 1,543 tokens/s per GPU.
    const double per_gpu = r.tokens_per_s / 2048.0;
    EXPECT_GT(per_gpu, 1000.0);
    EXPECT_LT(per_gpu, 2500.0);
    // The planner, held to DeepSeek's degrees, schedule, sharding and recipe, finds a layout
    // that fits the device when the budget gives back the PyTorch allocator's reserve.
    core::JobInputs specs_in = deepseek_as_trained();
    const core::JobSpec specs = core::load_specs(specs_in);
    planner::SearchSpace space;
    space.tp = {1};
    space.pp = {16};
    space.ep = {64};
    space.micro_batch = {1};
    space.schedules = {core::ScheduleKind::dualpipe};
    space.distributed_optimizer = {true};
    space.token_dispatcher = core::TokenDispatcher::flex;
    space.precisions = {job.plan.fp8};
    planner::PlanOptions options;
    options.memory_budget_bytes =
        (1.0 + simulator::allocator_reserve_fraction(job)) * h800.memory_bytes();
    const planner::PlanResult found = planner::plan(specs, h800, space, options);
    ASSERT_FALSE(found.best.empty());
    const core::ParallelPlan& best = found.best.front().job.plan;
    EXPECT_EQ(best.schedule, core::ScheduleKind::dualpipe);
    EXPECT_EQ(best.ep, 64);
    EXPECT_EQ(best.zero_stage(), 1);
    EXPECT_EQ(best.recompute.granularity, core::RecomputeGranularity::selective);
    EXPECT_TRUE(best.overlap_moe_expert_parallel_comm); // DualPipe's paired chunks
}

TEST(MoePresets, QwenGptOssAndMixtralArePlannedOnH100Clusters) {
    const core::Profile& h100 = test::preset_profile("h100-sxm5-80gb");
    for (const auto& [model, nodes] :
         {std::pair{"qwen3-30b-a3b", 2}, std::pair{"qwen3-235b-a22b", 32},
          std::pair{"gpt-oss-120b", 8}, std::pair{"mixtral-8x7b", 2},
          std::pair{"mixtral-8x22b", 16}}) {
        core::JobInputs in;
        in.model = model;
        in.cluster = "dgx-h100";
        in.nodes = nodes;
        in.global_batch_size = 256;
        in.seq_length = 4096;
        const core::JobSpec specs = core::load_specs(in);
        planner::SearchSpace space;
        space.micro_batch = {1};
        space.precisions = {core::Fp8{}};
        planner::PlanOptions options;
        options.memory_budget_bytes = 0.9 * h100.memory_bytes();
        options.top_k = 3;
        const planner::PlanResult r = planner::plan(specs, h100, space, options);
        ASSERT_FALSE(r.best.empty()) << model;
        const planner::Candidate& best = r.best.front();
        EXPECT_GT(best.job.plan.ep, 1) << model; // experts spread over ranks
        EXPECT_LE(best.peak_memory_bytes, options.memory_budget_bytes) << model;
        EXPECT_GT(best.mfu, 0.2) << model;
        EXPECT_LT(best.mfu, 0.7) << model;
        // The plan it writes simulates to what it predicted.
        const simulator::Report again = simulator::simulate(best.job, h100);
        EXPECT_NEAR(again.step_time_s, best.step_time_s, 1e-9 * best.step_time_s) << model;
    }
}

TEST(MoePresets, ThePlannerSearchesCapacityFactors) {
    // Mixtral 8x7B trained with the auxiliary loss: its busiest expert-parallel rank takes 1.52
    // × the mean dropless; a capacity factor of 1.0 caps it (dropping the excess), so the
    // searched factors rank it first, and each candidate carries the factor it runs with.
    core::JobInputs in;
    in.model = "mixtral-8x7b";
    in.cluster = "dgx-h100";
    in.nodes = 2;
    in.global_batch_size = 256;
    in.seq_length = 4096;
    core::JobSpec specs = core::load_specs(in);
    specs.model.moe->load_balance = core::LoadBalance::aux_loss;
    planner::SearchSpace space;
    space.micro_batch = {1};
    space.precisions = {core::Fp8{}};
    space.capacity_factors = {std::nullopt, 1.0};
    planner::PlanOptions options;
    options.memory_budget_bytes = 64.0 * kGiB;
    options.top_k = 20;
    const core::Profile& h100 = test::preset_profile("h100-sxm5-80gb");
    const planner::PlanResult r = planner::plan(specs, h100, space, options);
    ASSERT_FALSE(r.best.empty());
    ASSERT_GT(r.best.front().job.plan.ep, 1);
    EXPECT_EQ(r.best.front().job.model.moe->capacity_factor, std::optional<double>(1.0));
    // The dropless search alone (the model's own) finds only slower layouts, and the joint
    // search looked at both factors' layouts.
    space.capacity_factors.clear();
    const planner::PlanResult own = planner::plan(specs, h100, space, options);
    ASSERT_FALSE(own.best.empty());
    EXPECT_FALSE(own.best.front().job.model.moe->capacity_factor);
    EXPECT_GT(own.best.front().step_time_s, r.best.front().step_time_s);
    EXPECT_GT(r.layouts, own.layouts);
}
