// The planner's search over data-parallel sharding: a layout whose ZeRO-1 form does not fit is
// tried with ZeRO-2, ZeRO-3 inside the node and ZeRO-3 over all ranks, and the best found is
// the best of those strategies pinned one by one; pinning ZeRO-1 turns the search off; the
// chosen strategy is exported in Megatron's flags.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/planner/planner.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

core::JobSpec llama70b() {
    core::JobInputs in;
    in.model = "llama3-70b";
    in.cluster = "dgx-h100";
    in.nodes = 8;
    in.global_batch_size = 64;
    in.seq_length = 4096;
    return core::load_specs(in);
}

// tp 8, pp 1, micro-batch 1, BF16: ZeRO-1 holds 61 GiB of state per rank, ZeRO-3 under 20.
planner::SearchSpace tp8_pp1() {
    planner::SearchSpace s;
    s.tp = {8};
    s.pp = {1};
    s.cp = {1};
    s.micro_batch = {1};
    s.sequence_parallel = {true};
    s.precisions = {core::Fp8{}};
    return s;
}

planner::PlanResult run(const planner::SearchSpace& space, double budget_gib) {
    const core::JobSpec specs = llama70b();
    planner::PlanOptions options;
    options.memory_budget_bytes = budget_gib * kGiB;
    options.top_k = 20;
    return planner::plan(specs, test::preset_profile("h100-sxm5-80gb"), space, options);
}

} // namespace

TEST(ShardingSearch, TightMemoryEscalatesToTheBestSharding) {
    const planner::PlanResult found = run(tp8_pp1(), 40);
    ASSERT_FALSE(found.best.empty());
    EXPECT_GE(found.best.front().job.plan.zero_stage(), 2);
    // The same as pinning each sharded strategy and keeping the fastest.
    double best_pinned = INFINITY;
    for (auto [strategy, instances] : {std::pair{core::DataSharding::optim_grads, 1},
                                       {core::DataSharding::optim_grads_params, 8},
                                       {core::DataSharding::optim_grads_params, 1}}) {
        planner::SearchSpace pinned = tp8_pp1();
        pinned.sharding = {strategy};
        if (instances > 1) pinned.optimizer_instances = instances;
        const planner::PlanResult r = run(pinned, 40);
        if (!r.best.empty()) best_pinned = std::min(best_pinned, r.best.front().step_time_s);
    }
    EXPECT_DOUBLE_EQ(found.best.front().step_time_s, best_pinned);
}

TEST(ShardingSearch, RoomyMemoryKeepsZeroOneAndPinningItStopsTheSearch) {
    // With room, ZeRO-1 fits without recomputation and nothing more sharded is tried.
    const planner::PlanResult roomy = run(tp8_pp1(), 79);
    ASSERT_FALSE(roomy.best.empty());
    for (const planner::Candidate& c : roomy.best) EXPECT_LE(c.job.plan.zero_stage(), 1);
    planner::SearchSpace zero1 = tp8_pp1();
    zero1.distributed_optimizer = {true};
    EXPECT_TRUE(run(zero1, 40).best.empty()); // 61 GiB of state: nothing fits, nothing tried
}

TEST(ShardingSearch, MegatronArgumentsNameTheStrategy) {
    core::JobInputs in;
    in.model = "llama3-70b";
    in.cluster = "dgx-h100";
    in.nodes = 8;
    in.tp = 8;
    in.micro_batch_size = 1;
    in.global_batch_size = 64;
    in.data_parallel_sharding_strategy = "optim_grads_params";
    in.optimizer_instances = 2;
    const std::string megatron = planner::megatron_arguments(core::load_job(in));
    EXPECT_NE(megatron.find("--use-distributed-optimizer"), std::string::npos);
    EXPECT_NE(megatron.find("--use-megatron-fsdp"), std::string::npos);
    EXPECT_NE(megatron.find("--data-parallel-sharding-strategy optim_grads_params"),
              std::string::npos);
    EXPECT_NE(megatron.find("--num-distributed-optimizer-instances 2"), std::string::npos);
    // Megatron-FSDP checks for its checkpoint format, FSDP2 for torch_dist.
    EXPECT_NE(megatron.find("--ckpt-format fsdp_dtensor"), std::string::npos);
    EXPECT_EQ(megatron.find("--keep-fp8-transpose-cache"), std::string::npos);
    in.precision = "fp8-tensorwise";
    in.keep_fp8_transpose_cache = true;
    EXPECT_NE(planner::megatron_arguments(core::load_job(in)).find("--keep-fp8-transpose-cache"),
              std::string::npos);
    in.precision.reset();
    in.keep_fp8_transpose_cache.reset();
    in.data_parallel_sharding_strategy.reset();
    in.optimizer_instances.reset();
    in.use_torch_fsdp2 = true;
    const std::string torch = planner::megatron_arguments(core::load_job(in));
    EXPECT_NE(torch.find("--use-torch-fsdp2"), std::string::npos);
    EXPECT_EQ(torch.find("--use-megatron-fsdp"), std::string::npos);
    EXPECT_NE(torch.find("--ckpt-format torch_dist"), std::string::npos);
}

TEST(ShardingSearch, TorchFsdp2KeepsMegatronsRules) {
    // Megatron-LM refuses FSDP2 with expert parallelism, tied output weights, fp16 or the FP8
    // parameter gather: so does the plan, naming the field.
    const auto refusal = [](core::JobInputs in) -> std::string {
        in.cluster = "dgx-h100";
        in.use_torch_fsdp2 = true;
        in.micro_batch_size = 1;
        try {
            (void)core::load_job(in);
        } catch (const core::SpecError& e) {
            return e.what();
        }
        return "accepted";
    };
    core::JobInputs moe;
    moe.model = "mixtral-8x7b";
    moe.nodes = 1;
    moe.ep = 8;
    moe.global_batch_size = 8;
    EXPECT_NE(refusal(moe).find("expert parallelism in Megatron (ep 8)"), std::string::npos)
        << refusal(moe);
    core::JobInputs tied;
    tied.model = "gpt3-1.3b";
    tied.nodes = 1;
    tied.global_batch_size = 8;
    EXPECT_NE(refusal(tied).find("ties them"), std::string::npos) << refusal(tied);
    core::JobInputs fp8 = tied;
    fp8.model = "llama3-8b";
    fp8.precision = "fp8-delayed";
    fp8.fp8_param_gather = true;
    EXPECT_NE(refusal(fp8).find("parallel.fp8.param_gather"), std::string::npos) << refusal(fp8);
    fp8.fp8_param_gather.reset();
    EXPECT_EQ(refusal(fp8), "accepted");
}

TEST(OverlapSearch, TpCommOverlapFollowsSequenceParallelismUnlessPinned) {
    planner::SearchSpace space = tp8_pp1();
    const planner::PlanResult on = run(space, 79);
    ASSERT_FALSE(on.best.empty());
    for (const planner::Candidate& c : on.best) EXPECT_TRUE(c.job.plan.tp_comm_overlap);
    space.tp_comm_overlap = false;
    const planner::PlanResult off = run(space, 79);
    ASSERT_FALSE(off.best.empty());
    for (const planner::Candidate& c : off.best) EXPECT_FALSE(c.job.plan.tp_comm_overlap);
    // Overlapping hides communication: the best layout is faster with it.
    EXPECT_LT(on.best.front().step_time_s, off.best.front().step_time_s);
}

TEST(MoeExport, MegatronArgumentsNameTheTokenDispatcher) {
    core::JobInputs in;
    in.model = "mixtral-8x7b";
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.ep = 8;
    in.micro_batch_size = 1;
    in.global_batch_size = 8;
    EXPECT_NE(planner::megatron_arguments(core::load_job(in))
                  .find("--moe-token-dispatcher-type alltoall"),
              std::string::npos);
    in.moe_token_dispatcher = "flex";
    const std::string flex = planner::megatron_arguments(core::load_job(in));
    EXPECT_NE(flex.find("--moe-token-dispatcher-type flex"), std::string::npos);
    EXPECT_NE(flex.find("--moe-enable-deepep"), std::string::npos);
    // Node-limited routing: Megatron's group-limited router flags.
    EXPECT_EQ(flex.find("--moe-router-num-groups"), std::string::npos);
    in.model = "deepseek-v3";
    in.cluster = "hgx-h800";
    in.nodes = 8;
    in.ep = 64;
    in.distributed_optimizer = true; // its BF16 moments need it, as in Megatron
    in.global_batch_size = 64;
    const std::string v3 = planner::megatron_arguments(core::load_job(in));
    EXPECT_NE(v3.find("--moe-router-num-groups 8 \\\n  --moe-router-group-topk 4"),
              std::string::npos)
        << v3;
    in.overlap_moe_expert_parallel_comm = true;
    EXPECT_NE(
        planner::megatron_arguments(core::load_job(in)).find("--overlap-moe-expert-parallel-comm"),
        std::string::npos);
    in.overlap_moe_expert_parallel_comm.reset();
    in.model = "llama3-8b"; // dense: no dispatcher
    in.ep.reset();
    EXPECT_EQ(planner::megatron_arguments(core::load_job(in)).find("--moe-token-dispatcher-type"),
              std::string::npos);
}

namespace {

// Qwen3-30B-A3B on two DGX H100 nodes, tp 1, pp 1, ep 8 (one node) or 16 (both), BF16.
core::JobSpec qwen_two_nodes() {
    core::JobInputs in;
    in.model = "qwen3-30b-a3b";
    in.cluster = "dgx-h100";
    in.nodes = 2;
    in.global_batch_size = 64;
    in.seq_length = 4096;
    return core::load_specs(in);
}

planner::SearchSpace qwen_ep_8_and_16() {
    planner::SearchSpace space;
    space.tp = {1};
    space.pp = {1};
    space.cp = {1};
    space.ep = {8, 16};
    space.micro_batch = {1};
    space.precisions = {core::Fp8{}};
    return space;
}

planner::PlanOptions qwen_options() {
    planner::PlanOptions options;
    options.memory_budget_bytes = 72 * kGiB;
    options.top_k = 40;
    return options;
}

} // namespace

TEST(MoeSearch, TheDispatcherSearchFindsTheBestOfThePinnedOnes) {
    // Qwen3-30B-A3B on two DGX H100 nodes at ep 8 and 16: the unpinned search gives each layout
    // the dispatcher that makes its MoE layers fastest (alltoall, flex, allgather inside a
    // node), and its best equals the best of pinning each.
    const core::JobSpec specs = qwen_two_nodes();
    const planner::SearchSpace space = qwen_ep_8_and_16();
    const planner::PlanOptions options = qwen_options();
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const planner::PlanResult found = planner::plan(specs, h100, space, options);
    ASSERT_FALSE(found.best.empty());
    // At ep 8 inside a node and ep 16 across two, sending each token once per rank (flex)
    // beats sending every routed copy (alltoall).
    for (const planner::Candidate& c : found.best)
        EXPECT_EQ(c.job.plan.token_dispatcher, core::TokenDispatcher::flex) << c.job.plan.ep;
    double best_pinned = INFINITY;
    for (const auto d : {core::TokenDispatcher::allgather, core::TokenDispatcher::alltoall,
                         core::TokenDispatcher::flex}) {
        planner::SearchSpace pinned = space;
        pinned.token_dispatcher = d;
        const planner::PlanResult r = planner::plan(specs, h100, pinned, options);
        if (!r.best.empty()) best_pinned = std::min(best_pinned, r.best.front().step_time_s);
        for (const planner::Candidate& c : r.best) EXPECT_EQ(c.job.plan.token_dispatcher, d);
    }
    EXPECT_DOUBLE_EQ(found.best.front().step_time_s, best_pinned);
}

// All else equal, the planner prefers expert parallelism inside a node: Qwen3-30B-A3B on two
// DGX H100 nodes, ep 8 (one node) against ep 16 (both), at one step time and memory.
TEST(MoeSearch, ATieGoesToTheLayoutWhoseExpertGroupStaysInANode) {
    core::JobInputs in;
    in.model = "qwen3-30b-a3b";
    in.cluster = "dgx-h100";
    in.nodes = 2;
    in.tp = 1;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 64;
    in.ep = 8;
    planner::Candidate inside, across;
    inside.job = core::load_job(in);
    in.ep = 16;
    across.job = core::load_job(in);
    inside.cross_node_groups = planner::cross_node_groups(inside.job);
    across.cross_node_groups = planner::cross_node_groups(across.job);
    EXPECT_EQ(across.cross_node_groups, inside.cross_node_groups + 1); // the expert group
    inside.step_time_s = across.step_time_s = 1.0;
    inside.peak_memory_bytes = across.peak_memory_bytes = 50e9;
    EXPECT_TRUE(planner::ranks_before(inside, across));
    EXPECT_FALSE(planner::ranks_before(across, inside));
    // Time first, then memory.
    across.step_time_s = 0.99;
    EXPECT_TRUE(planner::ranks_before(across, inside));
    across.step_time_s = 1.0;
    across.peak_memory_bytes = 49e9;
    EXPECT_TRUE(planner::ranks_before(across, inside));
}

// --explain's MoE line: the busiest stage's exchange, its span and what overlap left exposed.
TEST(MoeSearch, CandidatesCarryTheirExchangeSpanAndExposure) {
    const planner::PlanResult r =
        planner::plan(qwen_two_nodes(), test::preset_profile("h100-sxm5-80gb"), qwen_ep_8_and_16(),
                      qwen_options());
    ASSERT_FALSE(r.best.empty());
    bool saw_inside = false, saw_across = false;
    for (const planner::Candidate& c : r.best) {
        EXPECT_GT(c.moe_exchange_s, 0.0);
        EXPECT_LE(c.moe_exposed_s, c.moe_exchange_s);
        // Overlapped by default, except beside full recomputation (Megatron-Core's rule).
        if (c.job.plan.recompute.granularity == core::RecomputeGranularity::full)
            EXPECT_EQ(c.moe_exposed_s, c.moe_exchange_s);
        else
            EXPECT_LT(c.moe_exposed_s, c.moe_exchange_s);
        (c.job.plan.ep == 8 ? saw_inside : saw_across) = true;
        EXPECT_EQ(c.moe_domains, c.job.plan.ep == 8 ? 1 : 2);
    }
    EXPECT_TRUE(saw_inside && saw_across);
}
