// The CUDA backend's bookkeeping that needs no GPU: which backend a run gets, what the CUDA
// backend refuses, and the data-parallel gradient buckets.
#include "../support/tiny_job.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/executor/backend.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/gradient_buckets.h"
#include "trident/executor/trainer.h"

#include <gtest/gtest.h>
#include <stdexcept>

using namespace trident;
using executor::Backend;
using executor::GradientBuckets;
using executor::ParameterStore;

namespace {

std::string field_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const core::SpecError& e) {
        return e.field() + ": " + e.reason();
    }
    return "(no error)";
}

TEST(Backend, AutoPicksCudaOnlyWithABuildAndAGpu) {
    EXPECT_EQ(executor::choose_backend("auto", true, 1), Backend::cuda);
    EXPECT_EQ(executor::choose_backend("auto", true, 0), Backend::cpu);
    EXPECT_EQ(executor::choose_backend("auto", false, 8), Backend::cpu);
    EXPECT_EQ(executor::choose_backend("cpu", true, 8), Backend::cpu);
    EXPECT_EQ(executor::choose_backend("cuda", true, 2), Backend::cuda);
}

TEST(Backend, CudaWithoutBuildOrDeviceAndUnknownNamesAreRefused) {
    EXPECT_EQ(field_of([] { executor::choose_backend("cuda", false, 1); }).rfind("--backend: ", 0),
              0u);
    EXPECT_NE(field_of([] { executor::choose_backend("cuda", true, 0); }).find("no CUDA device"),
              std::string::npos);
    EXPECT_NE(field_of([] { executor::choose_backend("gpu", true, 1); }).find("'gpu'"),
              std::string::npos);
}

core::JobSpec job_with(core::JobInputs in) {
    in.cluster = "localhost";
    in.devices_per_node = in.devices_per_node.value_or(1);
    in.tp = in.tp.value_or(1);
    in.pp = in.pp.value_or(1);
    in.dp = in.dp.value_or("1");
    in.micro_batch_size = 1;
    in.global_batch_size = in.global_batch_size.value_or(2);
    in.seq_length = in.seq_length.value_or(64);
    return core::load_job(in);
}

TEST(Backend, CudaRefusesWhatItDoesNotRunNamingTheField) {
    core::JobInputs dense;
    dense.model = std::string(TRIDENT_FIXTURES) + "/models/gpt-cuda-test.json";
    EXPECT_NO_THROW(executor::require_supported_on_cuda(job_with(dense)));
    core::JobInputs moe;
    moe.model = "moe-tiny";
    moe.seq_length = 16; // within its position table
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(moe)); }).substr(0, 10),
              "model.moe:");
    core::JobInputs small_heads; // gpt-demo: 128 hidden over 4 heads = head dim 32
    small_heads.model = "gpt-demo";
    EXPECT_EQ(
        field_of([&] { executor::require_supported_on_cuda(job_with(small_heads)); }).substr(0, 15),
        "model.head_dim:");
    core::JobInputs odd_seq = dense;
    odd_seq.seq_length = 96;
    EXPECT_EQ(
        field_of([&] { executor::require_supported_on_cuda(job_with(odd_seq)); }).substr(0, 20),
        "training.seq_length:");
    core::JobInputs cp = dense;
    cp.cp = 2;
    cp.devices_per_node = 2;
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(cp)); }).substr(0, 12),
              "parallel.cp:");
    core::JobInputs sp = dense; // sequence parallelism runs on both backends
    sp.tp = 2;
    sp.devices_per_node = 2;
    sp.sequence_parallel = true;
    EXPECT_NO_THROW(executor::require_supported_on_cuda(job_with(sp)));
    core::JobInputs mla; // the CPU backend runs MLA, CUDA not yet
    mla.model = std::string(TRIDENT_FIXTURES) + "/models/mla-tiny.json";
    mla.seq_length = 64;
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(mla)); }).substr(0, 10),
              "model.mla:");
    core::JobInputs v = dense; // the CPU backend runs the two-chunk schedules, CUDA not yet
    v.schedule = "zero-bubble-v";
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(v)); }).substr(0, 18),
              "parallel.schedule:");
    core::JobInputs fp8 = dense; // the CPU backend runs FP8 numerics, CUDA not yet
    fp8.fp8_recipe = "tensorwise";
    EXPECT_NO_THROW(executor::require_supported(job_with(fp8)));
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(fp8)); }).substr(0, 13),
              "parallel.fp8:");
    core::JobInputs zero3 = dense; // the CPU backend runs ZeRO-2/3, CUDA not yet
    zero3.dp = "2";
    zero3.devices_per_node = 2;
    zero3.data_parallel_sharding_strategy = "optim_grads_params";
    EXPECT_NO_THROW(executor::require_supported(job_with(zero3)));
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(zero3)); }).substr(0, 40),
              "parallel.data_parallel_sharding_strategy");
    core::JobInputs hybrid = dense; // hybrid sharding: the CPU backend's, not yet CUDA's
    hybrid.dp = "4";
    hybrid.global_batch_size = 4;
    hybrid.devices_per_node = 4;
    hybrid.distributed_optimizer = true;
    hybrid.optimizer_instances = 2;
    EXPECT_NO_THROW(executor::require_supported(job_with(hybrid)));
    EXPECT_EQ(
        field_of([&] { executor::require_supported_on_cuda(job_with(hybrid)); }).substr(0, 44),
        "parallel.num_distributed_optimizer_instances");
}

// ZeRO-2/3 run beside every schedule, DualPipe's twin copies included (their slices line up).
TEST(CpuExecutor, ShardedGradientsRunUnderEverySchedule) {
    core::JobInputs in;
    in.model = "gpt-tiny";
    in.seq_length = 32;
    in.pp = 2;
    in.devices_per_node = 2;
    in.global_batch_size = 4;
    in.data_parallel_sharding_strategy = "optim_grads";
    for (const char* schedule : {"1f1b", "zero-bubble-v", "dualpipev", "dualpipe"}) {
        in.schedule = schedule;
        EXPECT_NO_THROW(executor::require_supported(job_with(in))) << schedule;
    }
}

// Multi-token prediction runs on RoPE models in every pipeline layout; it is refused with
// context parallelism (the shifted tokens cross context ranks) and with learned positions
// (Megatron shifts those too), and on the CUDA backend.
TEST(CpuExecutor, MultiTokenPredictionRefusals) {
    core::JobInputs in;
    in.model = "deepseek-tiny";
    in.seq_length = 32;
    in.mtp_num_layers = 1;
    in.pp = 2;
    in.devices_per_node = 2;
    in.global_batch_size = 4;
    in.first_stage_layers = 3;
    EXPECT_NO_THROW(executor::require_supported(job_with(in)));
    EXPECT_EQ(field_of([&] { executor::require_supported_on_cuda(job_with(in)); }).substr(0, 9),
              "model.moe");
    in.pp = 1;
    in.first_stage_layers.reset();
    in.cp = 2;
    EXPECT_EQ(field_of([&] { executor::require_supported(job_with(in)); }).substr(0, 12),
              "parallel.cp:");
    core::JobInputs learned;
    learned.model = "gpt-tiny";
    learned.seq_length = 32;
    learned.mtp_num_layers = 1;
    EXPECT_EQ(field_of([&] { executor::require_supported(job_with(learned)); }).substr(0, 25),
              "model.position_embedding:");
    learned.model = std::string(TRIDENT_FIXTURES) + "/models/llama-tiny-mtp.json";
    EXPECT_NO_THROW(executor::require_supported(job_with(learned)));
    EXPECT_EQ(
        field_of([&] { executor::require_supported_on_cuda(job_with(learned)); }).substr(0, 21),
        "model.mtp_num_layers:");
}

// What the CPU executor refuses of MoE layouts, on any machine (the run checks this before
// it needs its ranks): tensor parallelism without sequence parallelism (Megatron-Core's rule).
// Expert biases run under expert tensor parallelism (the layouts test checks them).
TEST(CpuExecutor, MoeRefusals) {
    core::JobInputs tp;
    tp.model = "moe-tiny";
    tp.seq_length = 16;
    tp.tp = 2;
    tp.devices_per_node = 2;
    EXPECT_EQ(field_of([&] { executor::require_supported(job_with(tp)); }).substr(0, 27),
              "parallel.sequence_parallel:");
    tp.sequence_parallel = true; // runs (the layouts test checks it against one process)
    EXPECT_NO_THROW(executor::require_supported(job_with(tp)));
    core::JobInputs bias;
    bias.model = std::string(TRIDENT_FIXTURES) + "/models/moe-tiny-bias.json";
    bias.seq_length = 16;
    bias.dp = "2";
    bias.etp = 2;
    bias.devices_per_node = 2;
    EXPECT_NO_THROW(executor::require_supported(job_with(bias)));
}

// What the executors accept but do not do says so, once per field.
TEST(CpuExecutor, WarnsOfWhatItRunsOtherwise) {
    core::JobInputs moe;
    moe.model = "moe-tiny";
    moe.seq_length = 16;
    EXPECT_TRUE(executor::ignored_by_executor(job_with(moe), false).empty());
    moe.moe_token_dispatcher = "flex"; // runs as DeepEP's dispatcher exchanges tokens
    EXPECT_TRUE(executor::ignored_by_executor(job_with(moe), false).empty());
    moe.ep = 2;
    moe.dp = "2";
    moe.devices_per_node = 2;
    moe.overlap_moe_expert_parallel_comm = true;
    const auto ignored = executor::ignored_by_executor(job_with(moe), false);
    ASSERT_EQ(ignored.size(), 1u);
    EXPECT_EQ(ignored[0].rfind("parallel.overlap_moe_expert_parallel_comm", 0), 0u) << ignored[0];
    core::JobInputs fp8; // FP8 numerics run; the FP8 parameter gather is the simulator's
    fp8.model = "gpt-tiny";
    fp8.seq_length = 16;
    fp8.fp8_recipe = "tensorwise";
    EXPECT_TRUE(executor::ignored_by_executor(job_with(fp8), false).empty());
    fp8.fp8_param_gather = true;
    fp8.distributed_optimizer = true; // Megatron gathers FP8 weights only with it
    const auto gathered = executor::ignored_by_executor(job_with(fp8), false);
    ASSERT_EQ(gathered.size(), 1u);
    EXPECT_EQ(gathered[0].rfind("parallel.fp8.param_gather: ", 0), 0u) << gathered[0];
}

ParameterStore store_of(const std::vector<std::int64_t>& sizes) {
    ParameterStore s;
    for (std::size_t i = 0; i < sizes.size(); ++i)
        s.add("t" + std::to_string(i), sizes[i], {.decay = true});
    return s;
}

TEST(GradientBuckets, GroupTensorsFromTheEndOfTheBuffer) {
    // Offsets 0, 10, 30, 60, 100; buckets close once they reach 35 elements.
    const ParameterStore store = store_of({10, 20, 30, 40, 5});
    const GradientBuckets b(store, 35);
    ASSERT_EQ(b.buckets().size(), 3u);
    EXPECT_EQ(b.buckets()[0].begin, 60); // t4 (5) + t3 (40) = 45 ≥ 35
    EXPECT_EQ(b.buckets()[0].end, 105);
    EXPECT_EQ(b.buckets()[0].tensors, 2);
    EXPECT_EQ(b.buckets()[1].begin, 10); // t2 (30) + t1 (20)
    EXPECT_EQ(b.buckets()[1].end, 60);
    EXPECT_EQ(b.buckets()[2].begin, 0); // t0 alone, the remainder
    EXPECT_EQ(b.buckets()[2].end, 10);
    EXPECT_EQ(b.bucket_of(4), 0);
    EXPECT_EQ(b.bucket_of(3), 0);
    EXPECT_EQ(b.bucket_of(0), 2);
    // Every element of the buffer in exactly one bucket.
    std::int64_t covered = 0;
    for (const auto& bucket : b.buckets()) covered += bucket.end - bucket.begin;
    EXPECT_EQ(covered, 105);
}

TEST(GradientBuckets, ABucketIsReadyWhenItsLastTensorIsFinal) {
    const ParameterStore store = store_of({10, 20, 30, 40, 5});
    GradientBuckets b(store, 35);
    EXPECT_EQ(b.mark_final(4), -1);
    EXPECT_EQ(b.mark_final(3), 0);
    EXPECT_EQ(b.mark_final(1), -1); // out of order within a bucket is fine
    EXPECT_EQ(b.mark_final(2), 1);
    EXPECT_EQ(b.incomplete(), std::vector<std::int32_t>{2});
    EXPECT_THROW(b.mark_final(2), std::logic_error); // twice in one step
    EXPECT_EQ(b.mark_final(0), 2);
    EXPECT_TRUE(b.incomplete().empty());
    b.reset(); // the next step waits for everything again
    EXPECT_EQ(b.incomplete().size(), 3u);
    EXPECT_EQ(b.mark_final(0), 2);
}

TEST(GradientBuckets, ExcludedTensorsSplitRunsAndAreNotBucketed) {
    const ParameterStore store = store_of({10, 20, 30, 40, 5});
    GradientBuckets b(store, 1000, [](const ParameterStore::Tensor& t) { return t.name != "t2"; });
    ASSERT_EQ(b.buckets().size(), 2u); // [t3 t4] and [t0 t1]: t2 interrupts the run
    EXPECT_EQ(b.buckets()[0].begin, 60);
    EXPECT_EQ(b.buckets()[1].end, 30);
    EXPECT_EQ(b.bucket_of(2), -1);
    EXPECT_THROW(b.mark_final(2), std::logic_error);
    EXPECT_THROW(GradientBuckets(store, 0), std::invalid_argument);
}

TEST(GradientBuckets, ABucketLargerThanTheLimitHoldsOneTensor) {
    const ParameterStore store = store_of({100, 3, 100});
    const GradientBuckets b(store, 50);
    ASSERT_EQ(b.buckets().size(), 2u);
    EXPECT_EQ(b.buckets()[0].tensors, 1); // t2 alone reaches the limit
    EXPECT_EQ(b.buckets()[1].tensors, 2); // t1 + t0
}

TEST(OptimizerShard, ShardsCoverTheBufferAndRunsFollowTheTensors) {
    ParameterStore store;
    store.add("w", 10, {.decay = true});
    store.add("norm", 3, {.tp_replicated = true});
    store.add("w2", 8, {.decay = true});
    const auto whole = executor::optimizer_shard(store, false, 4, 1, 1);
    EXPECT_EQ(whole.begin, 0);
    EXPECT_EQ(whole.size, 21);
    ASSERT_EQ(whole.decay_runs.size(), 3u);
    // Tensor rank 1 does not count the replicated norm in the global norm.
    ASSERT_EQ(whole.norm_runs.size(), 2u);
    std::int64_t covered = 0;
    for (std::int64_t r = 0; r < 4; ++r) {
        const auto shard = executor::optimizer_shard(store, true, 4, r, 0);
        EXPECT_EQ(shard.padded_size, 24); // 21 rounded up to a multiple of dp
        EXPECT_EQ(shard.begin, r * 6);
        for (const auto& run : shard.decay_runs) covered += run.end - run.begin;
    }
    EXPECT_EQ(covered, 21); // the padding is in no run
}

TEST(LearningRate, WarmupThenCosineToMin) {
    core::LrSchedule s;
    s.lr = 1.0;
    s.min_lr = 0.1;
    s.warmup_iters = 10;
    s.decay_iters = 110;
    s.decay_style = core::LrDecayStyle::cosine;
    EXPECT_DOUBLE_EQ(executor::learning_rate(s, 0), 0.1);
    EXPECT_DOUBLE_EQ(executor::learning_rate(s, 9), 1.0);
    EXPECT_NEAR(executor::learning_rate(s, 60), 0.55, 1e-12); // half way: (1 + 0.1) / 2
    EXPECT_DOUBLE_EQ(executor::learning_rate(s, 500), 0.1);
}

} // namespace

// The two bugs the copies caused, each now one rule: the executor pads the vocabulary as the
// simulator does (Megatron's multiple of 128·tp), and shards Adam's moments over the data and
// context ranks, as the optimizer does.
TEST(OneRule, TheExecutorsVocabularyShardIsMegatronsPaddedOne) {
    test::TinyJob tiny;
    tiny.model = std::string(TRIDENT_FIXTURES) + "/models/gpt-cuda-test.json"; // 1000 words
    tiny.tp = 2;
    const core::JobSpec job = tiny.load();
    ASSERT_NE(job.model.vocab_size % 256, 0);
    executor::ParameterStore store;
    const executor::GptChunk chunk(job, 0, 0, 1, 0, 0, store, 1);
    const auto& wte = store.tensors.front();
    ASSERT_EQ(wte.name, "embedding.word");
    const std::int64_t padded = job.model.padded_vocab_size(2);
    EXPECT_EQ(padded % 256, 0);
    EXPECT_EQ(wte.size, padded / 2 * job.model.hidden_size);
    // Tensor rank 1's rows start at padded/2 and stop at the real vocabulary.
    ASSERT_EQ(wte.placement.size(), 1u);
    EXPECT_EQ(wte.placement[0].first, padded / 2 * job.model.hidden_size);
    EXPECT_EQ(wte.placement[0].second, (job.model.vocab_size - padded / 2) * job.model.hidden_size);
}

TEST(OneRule, AdamMomentsAreShardedOverDataAndContextRanks) {
    core::ParallelPlan plan;
    plan.dp = 4;
    plan.cp = 2;
    EXPECT_EQ(executor::optimizer_shards(plan), 1);
    plan.distributed_optimizer = true;
    EXPECT_EQ(executor::optimizer_shards(plan), 8);
}
