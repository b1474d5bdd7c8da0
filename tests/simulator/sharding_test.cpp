// Sharded data parallelism (ZeRO-1/2/3, FSDP, hybrid sharding) in the memory and cost model:
// the state per rank against the ZeRO paper's formulas, the stream overlap of the per-unit
// gathers and reduce-scatters against hand-worked timelines, and the step's time and tail.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/rank_grid.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/sharding_overlap.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec llama(const std::string& strategy, std::int64_t nodes = 1,
                    std::optional<std::int64_t> instances = std::nullopt,
                    std::int64_t prefetch = 1) {
    core::JobInputs in;
    in.model = "llama3-8b";
    in.cluster = "dgx-h100";
    in.nodes = nodes;
    in.tp = 1;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 16 * nodes;
    in.seq_length = 4096;
    in.data_parallel_sharding_strategy = strategy;
    in.optimizer_instances = instances;
    in.fsdp_prefetch_units = prefetch;
    return core::load_job(in);
}

} // namespace

TEST(StreamOverlap, GathersAheadHideBehindTheUnitBefore) {
    // Gathers of 1 s before units of 2 s, one unit ahead: gather 1 runs under unit 0, gather 2
    // waits for unit 0's buffer (t = 3) and still lands before unit 1 ends: only the first
    // gather shows.
    const auto r = simulator::stream_overlap({1, 1, 1}, {2, 2, 2}, {0, 0, 0}, 1);
    EXPECT_DOUBLE_EQ(r.exposed_s, 1.0);
    EXPECT_DOUBLE_EQ(r.stream_s, 3.0);
    // Nothing ahead: every gather waits for the unit before to finish.
    EXPECT_DOUBLE_EQ(simulator::stream_overlap({1, 1, 1}, {2, 2, 2}, {0, 0, 0}, 0).exposed_s, 3.0);
    // Communication-bound: gathers of 3 s before units of 1 s (0–3, 3–6): the pass ends at 7.
    EXPECT_DOUBLE_EQ(simulator::stream_overlap({3, 3}, {1, 1}, {0, 0}, 1).exposed_s, 5.0);
}

TEST(StreamOverlap, ScattersFollowTheirUnitAndTheLastOneIsExposed) {
    // Units 0–2, 2–4; scatters 2–3, 4–5.
    EXPECT_DOUBLE_EQ(simulator::stream_overlap({0, 0}, {2, 2}, {1, 1}, 1).exposed_s, 1.0);
    // Gathers and scatters share the stream in issue order. g0 0–1, unit 0 1–2, g1 1–2, unit 1
    // 2–3; g2 is issued when unit 0 frees its buffer (t = 2), after s0 (issued at 2): s0 2–4,
    // g2 4–5, unit 2 5–6; then s1 5–7 and s2 7–9. Compute 3 s of 9.
    const auto r = simulator::stream_overlap({1, 1, 1}, {1, 1, 1}, {2, 2, 2}, 1);
    EXPECT_DOUBLE_EQ(r.exposed_s, 6.0);
    EXPECT_DOUBLE_EQ(r.stream_s, 9.0);
}

TEST(Sharding, StatePerRankFollowsTheZeroPaper) {
    // Rajbhandari et al. 2020, §5.1: with 2-byte weights and gradients and K = 12 bytes of
    // optimizer state per parameter, over N_d ranks: 2Ψ + 2Ψ + KΨ/N_d (stage 1),
    // 2Ψ + (2 + K)Ψ/N_d (stage 2), (2 + 2 + K)Ψ/N_d (stage 3).
    for (const std::string strategy : {"zero-1", "zero-2", "zero-3"}) {
        core::JobSpec job = llama(strategy);
        job.model.precision.grads = core::Dtype::bf16;
        const auto params = simulator::stage_parameters(job, 0);
        const double psi = params.total(), n = 8.0;
        const simulator::StageMemory m =
            simulator::memory_per_stage(job, core::make_schedule(job.plan.schedule, 1, 1, 2))[0];
        const int stage = job.plan.zero_stage();
        EXPECT_DOUBLE_EQ(m.weights_bytes, stage >= 3 ? 2 * psi / n : 2 * psi) << strategy;
        EXPECT_DOUBLE_EQ(m.gradients_bytes, stage >= 2 ? 2 * psi / n : 2 * psi) << strategy;
        EXPECT_DOUBLE_EQ(m.optimizer_bytes, 12 * psi / n) << strategy;
        // On top: the largest unit (the untied 128,256 × 4,096 head with the final RMSNorm)
        // gathered twice — the one computing and the one prefetched — and its gradients twice.
        const double unit = 128256.0 * 4096.0 + 4096.0;
        EXPECT_DOUBLE_EQ(double(params.largest_unit().total()), unit);
        EXPECT_DOUBLE_EQ(m.gathered_bytes, stage == 3   ? 2 * 2 * unit + 2 * 2 * unit
                                           : stage == 2 ? 2 * 2 * unit
                                                        : 0.0)
            << strategy;
    }
}

TEST(Sharding, HybridShardingDividesByTheShardGroupOnly) {
    core::JobSpec job = llama("optim_grads_params", 4, 4); // 32 ranks: 4 replicas of 8
    EXPECT_EQ(job.plan.shard_ranks(), 8);
    const auto params = simulator::stage_parameters(job, 0);
    const simulator::StageMemory m =
        simulator::memory_per_stage(job, core::make_schedule(job.plan.schedule, 1, 1, 2))[0];
    EXPECT_DOUBLE_EQ(m.weights_bytes, 2 * params.total() / 8);
    EXPECT_DOUBLE_EQ(m.optimizer_bytes, 12 * params.total() / 8);
    // The shard groups are the 8 GPUs of a node; the replicas one GPU of each node.
    const core::RankGrid grid(job.plan);
    EXPECT_EQ(grid.group_of(core::GroupKind::data_shard, 9),
              (std::vector<std::int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
    EXPECT_EQ(grid.group_of(core::GroupKind::data_replica, 9),
              (std::vector<std::int64_t>{1, 9, 17, 25}));
    EXPECT_EQ(grid.nodes_spanned(core::GroupKind::data_shard, 9, 8), 1);
}

TEST(Sharding, Zero3GathersEveryMicroBatchAndHidesMostOfIt) {
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const simulator::Report z1 = simulator::simulate(llama("optim", 4), h100);
    const simulator::Report z3 = simulator::simulate(llama("optim_grads_params", 4), h100);
    const simulator::Report z3_blocking =
        simulator::simulate(llama("optim_grads_params", 4, std::nullopt, 0), h100);
    const simulator::StageReport& s = z3.stages[0];
    EXPECT_EQ(z1.stages[0].sharding_stream_s, 0.0);
    EXPECT_GT(s.sharding_stream_s, 0.0);
    EXPECT_LT(s.sharding_s, s.sharding_stream_s); // prefetching hides part of it
    // Without prefetch nothing overlaps: all of the stream is exposed.
    EXPECT_NEAR(z3_blocking.stages[0].sharding_s, z3_blocking.stages[0].sharding_stream_s,
                1e-9 * z3_blocking.stages[0].sharding_stream_s);
    EXPECT_GT(z3_blocking.step_time_s, z3.step_time_s);
    EXPECT_GE(z3.step_time_s, z1.step_time_s);
    // ZeRO-3 keeps its parameters sharded: no gather after the step.
    const simulator::CostModel cost(z3.job, h100);
    EXPECT_EQ(simulator::step_tail(z3.job, cost, 0).parameter_gather_s, 0.0);
    EXPECT_GT(
        simulator::step_tail(z1.job, simulator::CostModel(z1.job, h100), 0).parameter_gather_s,
        0.0);
}

TEST(Sharding, ShardingInsideTheNodeBeatsShardingAcrossNodes) {
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const simulator::Report full = simulator::simulate(llama("zero-3", 4), h100);
    const simulator::Report hybrid = simulator::simulate(llama("zero-3", 4, 4), h100);
    EXPECT_LT(hybrid.stages[0].sharding_stream_s, full.stages[0].sharding_stream_s);
    EXPECT_GT(hybrid.stages[0].memory.weights_bytes, full.stages[0].memory.weights_bytes);
    // The replicas all-reduce their gradient shards once a step, in the tail — overlapped
    // with the last backward (ZeRO-3 turns overlap_grad_reduce on, as Megatron-FSDP does), so
    // it shows as the SMs it takes; not overlapped, as its time.
    EXPECT_TRUE(hybrid.job.plan.overlap_grad_reduce);
    const simulator::CostModel cost(hybrid.job, h100);
    EXPECT_GT(simulator::step_tail(hybrid.job, cost, 0).contention_s, 0.0);
    core::JobSpec blocking = hybrid.job;
    blocking.plan.overlap_grad_reduce = false;
    const simulator::CostModel blocking_cost(blocking, h100);
    EXPECT_GT(simulator::step_tail(blocking, blocking_cost, 0).gradient_reduce_s, 0.0);
}

TEST(Sharding, PlanFieldsReadAsMegatronNamesThem) {
    const auto plan = [](core::Json j) {
        j["dp"] = 8;
        j["micro_batch_size"] = 1;
        return core::plan_from_json(j);
    };
    EXPECT_EQ(plan({{"data_parallel_sharding_strategy", "optim_grads"}}).zero_stage(), 2);
    EXPECT_TRUE(plan({{"data_parallel_sharding_strategy", "zero-3"}}).distributed_optimizer);
    EXPECT_EQ(plan({{"use_torch_fsdp2", true}}).zero_stage(), 3);
    EXPECT_EQ(plan({{"distributed_optimizer", true}}).zero_stage(), 1);
    const core::ParallelPlan hsdp = plan({{"data_parallel_sharding_strategy", "optim_grads_params"},
                                          {"num_distributed_optimizer_instances", 2}});
    EXPECT_EQ(hsdp.shard_ranks(), 4);
    const core::ParallelPlan again = core::plan_from_json(core::to_json(hsdp));
    EXPECT_EQ(again.zero_stage(), 3);
    EXPECT_EQ(again.sharding.instances, 2);
    EXPECT_EQ(core::sharding_cell(again), "3h2");
    EXPECT_THROW(plan({{"data_parallel_sharding_strategy", "optim_grads"},
                       {"distributed_optimizer", false}}),
                 core::SpecError);
    EXPECT_THROW(plan({{"num_distributed_optimizer_instances", 2}}), core::SpecError);
    EXPECT_THROW(plan({{"data_parallel_sharding_strategy", "optim"},
                       {"num_distributed_optimizer_instances", 3}}),
                 core::SpecError);
    EXPECT_THROW(plan({{"use_torch_fsdp2", true}, {"data_parallel_sharding_strategy", "optim"}}),
                 core::SpecError);
}

TEST(Sharding, Fp8ParameterGatherHalvesTheExpertGathersToo) {
    // Mixtral 8x7B (experts ~95 % of the parameters) under ZeRO-3 with FP8: per parameter the
    // stream carries two 2-byte gathers and one 4-byte reduce-scatter, 8 bytes; gathering the
    // FP8 weights at one byte leaves 6 — a quarter less wherever the weights are FP8 linears.
    const auto mixtral = [](bool param_gather) {
        core::JobInputs in;
        in.model = "mixtral-8x7b";
        in.cluster = "dgx-h100";
        in.nodes = 4;
        in.tp = 2;
        in.ep = 4;
        in.dp = "auto";
        in.micro_batch_size = 1;
        in.global_batch_size = 32;
        in.seq_length = 4096;
        in.data_parallel_sharding_strategy = "optim_grads_params";
        in.precision = "fp8-tensorwise";
        if (param_gather) in.fp8_param_gather = true;
        return simulator::simulate(core::load_job(in), test::preset_profile("h100-sxm5-80gb"));
    };
    const double bf16_gather = mixtral(false).stages[0].sharding_stream_s;
    const double fp8_gather = mixtral(true).stages[0].sharding_stream_s;
    EXPECT_LT(fp8_gather, 0.85 * bf16_gather);
    EXPECT_GT(fp8_gather, 0.7 * bf16_gather);
}

TEST(Sharding, KeptFp8TransposesOutliveTheirUnitsGather) {
    // Megatron-FSDP drops each FP8 weight's transpose after the forward unless
    // --keep-fp8-transpose-cache: then every FP8 weight of the stage keeps its 1-byte transpose
    // until the backward, beyond the two gathered units (one computing, one prefetched) whose
    // copies are counted already.
    const auto stage = [](bool keep) {
        core::JobInputs in;
        in.model = "llama3-8b";
        in.cluster = "dgx-h100";
        in.nodes = 1;
        in.tp = 1;
        in.pp = 1;
        in.dp = "auto";
        in.micro_batch_size = 1;
        in.global_batch_size = 16;
        in.seq_length = 4096;
        in.data_parallel_sharding_strategy = "optim_grads_params";
        in.use_megatron_fsdp = true;
        in.precision = "fp8-tensorwise";
        if (keep) in.keep_fp8_transpose_cache = true;
        const core::JobSpec job = core::load_job(in);
        return std::pair{simulator::memory_per_stage(
                             job, core::make_schedule(core::ScheduleKind::one_f_one_b, 1, 1, 2))[0],
                         simulator::stage_parameters(job, 0)};
    };
    const auto [dropped, params] = stage(false);
    const auto [kept, same] = stage(true);
    const double expected = params.fp8 - 2.0 * double(params.largest_unit().fp8);
    EXPECT_GT(expected, 0.5 * params.fp8);
    EXPECT_DOUBLE_EQ(kept.gathered_bytes - dropped.gathered_bytes, expected);
    EXPECT_DOUBLE_EQ(kept.activations_bytes, dropped.activations_bytes);
}

TEST(Sharding, KeepingFp8TransposesNeedsMegatronFsdpAndFp8) {
    core::JobInputs in;
    in.model = "llama3-8b";
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 16;
    in.distributed_optimizer = true;
    in.precision = "fp8-tensorwise";
    in.keep_fp8_transpose_cache = true;
    try {
        core::load_job(in);
        FAIL() << "kept transposes without Megatron-FSDP";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "parallel.keep_fp8_transpose_cache");
        EXPECT_NE(std::string(e.what()).find("ZeRO-1"), std::string::npos) << e.what();
    }
    in.data_parallel_sharding_strategy = "optim_grads_params";
    const core::JobSpec job = core::load_job(in);
    EXPECT_TRUE(core::plan_from_json(core::to_json(job.plan)).sharding.keep_fp8_transpose_cache);
}
