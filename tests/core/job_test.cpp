// Cross-spec rules: every impossible combination names its field.
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <fstream>
#include <gtest/gtest.h>

using namespace trident::core;

namespace {

// GPT-3 175B on 16 DGX A100 nodes: tp 8 · pp 8 · dp 2 = 128 devices.
JobInputs base() {
    JobInputs in;
    in.model = "gpt3-175b";
    in.cluster = "dgx-a100-80gb";
    in.nodes = 16;
    in.global_batch_size = 64;
    in.tp = 8;
    in.pp = 8;
    in.dp = "2";
    in.micro_batch_size = 1;
    return in;
}

std::string error_field(const JobInputs& in) {
    try {
        load_job(in);
    } catch (const SpecError& e) {
        return e.field();
    }
    return "(no error)";
}

} // namespace

TEST(Job, ValidBaseAndDerivedValues) {
    const JobSpec job = load_job(base());
    EXPECT_EQ(job.micro_batches_per_step(), 32);
    EXPECT_EQ(job.pipeline_split().layers, std::vector<std::int64_t>(8, 12)); // pp 8
    EXPECT_EQ(job.training.seq_length, 2048); // the model's max_position_embeddings
    EXPECT_EQ(job.cluster.devices(), 128);
}

TEST(Job, EachRuleNamesItsField) {
    auto in = base();
    in.tp = 5; // 96 heads % 5
    EXPECT_EQ(error_field(in), "parallel.tp");
    in = base();
    in.pp = 5; // 96 layers % 5
    in.dp = "auto";
    in.nodes = 5;
    EXPECT_EQ(error_field(in), "parallel.pp");
    in = base();
    in.dp = "4"; // 8·8·4 = 256 != 128
    EXPECT_EQ(error_field(in), "parallel.dp");
    in = base();
    in.ep = 2; // dense model
    EXPECT_EQ(error_field(in), "parallel.ep");
    in = base();
    in.global_batch_size = 63;
    EXPECT_EQ(error_field(in), "training.global_batch_size");
    in = base();
    in.seq_length = 4096; // > 2048 positions
    EXPECT_EQ(error_field(in), "training.seq_length");
    in = base();
    in.cp = 3; // 2048 % 6
    in.dp = "auto";
    in.nodes = 48;
    EXPECT_EQ(error_field(in), "training.seq_length");
    in = base();
    in.nodes = 32;
    in.tp = 16; // crosses nodes
    EXPECT_EQ(error_field(in), "parallel.tp");
    in.allow_cross_node_tp = true;
    EXPECT_EQ(error_field(in), "(no error)");
    in = base();
    in.vpp = 2; // implies interleaved; 32 micro-batches % 8 == 0 fine
    EXPECT_EQ(error_field(in), "(no error)");
    in.global_batch_size = 20; // 10 micro-batches % 8
    EXPECT_EQ(error_field(in), "training.global_batch_size");
    in = base();
    in.vpp = 5; // 96 % 40
    EXPECT_EQ(error_field(in), "parallel.vpp");
    in = base();
    in.vpp = 2;
    in.schedule = "1f1b";
    EXPECT_EQ(error_field(in), "parallel.vpp");
    in = base();
    in.recompute = "full"; // alone: every layer of the chunk (block over all 12)
    EXPECT_EQ(error_field(in), "(no error)");
    EXPECT_EQ(load_job(in).plan.recompute.num_layers, 12);
    in.recompute_num_layers = 13; // 12 layers per stage
    EXPECT_EQ(error_field(in), "parallel.recompute.num_layers");
    in.recompute_num_layers = 12;
    EXPECT_EQ(error_field(in), "(no error)");
    in = base();
    in.schedule = "zero-bubble";
    EXPECT_EQ(error_field(in), "parallel.schedule");
    in = base();
    in.dp = "two";
    EXPECT_EQ(error_field(in), "parallel.dp");
    in = base();
    in.nodes = 0;
    EXPECT_EQ(error_field(in), "cluster.nodes");
    in = base();
    in.model = "gpt-3";
    EXPECT_EQ(error_field(in), "model");
    in = base();
    in.tp = std::nullopt; // Megatron's default: 1, so 8 · 1 · 1 devices leave dp 8
    EXPECT_EQ(error_field(in), "parallel.dp");
    in.dp = "auto";
    EXPECT_EQ(load_job(in).plan.tp, 1);
}

TEST(Job, ExpertParallelRules) {
    JobInputs in;
    in.model = "mixtral-8x7b";
    in.cluster = "dgx-h100";
    in.nodes = 4;
    in.global_batch_size = 64;
    in.seq_length = 4096;
    in.tp = 2;
    in.pp = 4;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.ep = 4;
    const JobSpec job = load_job(in);
    EXPECT_EQ(job.plan.dp, 4);
    EXPECT_EQ(job.plan.expert_dp(), 1);
    in.ep = 3;
    EXPECT_EQ(error_field(in), "parallel.ep"); // does not divide dp·cp = 4 (nor 8 experts)
    in.ep = 8;
    EXPECT_EQ(error_field(in), "parallel.ep"); // exceeds dp·cp
}

TEST(Job, FoldedExpertRules) {
    // Mixtral 8x7B on 4 DGX H100: tp 2 · pp 4 · dp 4; with etp 1 the 8 experts may spread over
    // all 8 tp·dp ranks of a stage (MoE parallel folding).
    JobInputs in;
    in.model = "mixtral-8x7b";
    in.cluster = "dgx-h100";
    in.nodes = 4;
    in.global_batch_size = 64;
    in.seq_length = 4096;
    in.tp = 2;
    in.pp = 4;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.sequence_parallel = true;
    in.ep = 8;
    in.etp = 1;
    const JobSpec job = load_job(in);
    EXPECT_EQ(job.plan.expert_tp(), 1);
    EXPECT_EQ(job.plan.expert_dp(), 1);
    EXPECT_EQ(plan_from_json(to_json(job.plan)).etp, 1); // written and read back
    in.etp = 4;
    EXPECT_EQ(error_field(in), "parallel.etp"); // etp·ep = 32 > 8 ranks a stage
    in.etp = 1;
    in.sequence_parallel = false;
    EXPECT_EQ(error_field(in), "parallel.etp"); // each tp rank must route its own tokens
    in.sequence_parallel = true;
    in.ep = 3;
    EXPECT_EQ(error_field(in), "parallel.etp"); // 3 does not tile 8 ranks
    // Megatron's name in a plan file; not both spellings.
    Json plan = to_json(job.plan);
    plan.erase("etp");
    plan["ep"] = 4;
    plan["expert_tensor_parallel_size"] = 2;
    EXPECT_EQ(plan_from_json(plan).expert_tp(), 2);
    plan["etp"] = 2;
    EXPECT_THROW(plan_from_json(plan), SpecError);
    // A dense model has no experts to split.
    JobInputs dense = base();
    dense.etp = 1;
    EXPECT_EQ(error_field(dense), "parallel.etp");
}

TEST(Job, MegatronVirtualStageSpelling) {
    auto in = base();
    in.num_layers_per_virtual_stage = 3; // 12 layers per rank -> 4 chunks
    const JobSpec job = load_job(in);
    EXPECT_EQ(job.plan.vpp, 4);
    EXPECT_EQ(job.plan.schedule, ScheduleKind::interleaved_1f1b);
    in.num_layers_per_virtual_stage = 5;
    EXPECT_EQ(error_field(in), "parallel.vpp");
}

TEST(Job, PlanPresetsLoadAndRoundTrip) {
    JobInputs in;
    in.plan = "megatron-sc21-530b";
    const JobSpec job = load_job(in);
    EXPECT_EQ(job.cluster.devices(), 2520);
    EXPECT_EQ(job.plan.dp, 9);
    EXPECT_EQ(job.micro_batches_per_step(), 280);
    EXPECT_EQ(job.max_layers_per_chunk(), 1);
    // Flags override the plan file.
    in.pp = 35;
    in.micro_batch_size = 2;
    in.global_batch_size = 2520 * 2;
    EXPECT_EQ(load_job(in).micro_batches_per_step(), 280);
}

// Megatron gathers quantized weights and keeps moments below fp32 only beside a sharded
// optimizer (arguments.py, optimizer/__init__.py).
TEST(Job, MemorySaversNeedTheDistributedOptimizer) {
    auto in = base();
    in.precision = "fp8-delayed";
    in.fp8_param_gather = true;
    EXPECT_EQ(error_field(in), "parallel.fp8.param_gather");
    in.distributed_optimizer = true;
    EXPECT_EQ(error_field(in), "(no error)");
    in = base();
    in.use_precision_aware_optimizer = true;
    in.exp_avg_dtype = "bf16";
    in.exp_avg_sq_dtype = "bf16";
    EXPECT_EQ(error_field(in), "model.precision.optimizer_state");
    in.distributed_optimizer = true;
    EXPECT_EQ(error_field(in), "(no error)");
}

TEST(Job, Fp16GradientsOfFp16ParametersAreMegatronsDefault) {
    // --fp16 keeps gradients in fp16 without the precision-aware optimizer (Megatron forces
    // fp32 accumulation for bf16 only); bf16 gradients still need it.
    Json model = resolve_reference("gpt3-175b", PresetKind::model, "model");
    const std::string path = testing::TempDir() + "trident-fp16-model.json";
    const auto write = [&](const char* params, const char* grads) {
        model["precision"]["params"] = params;
        model["precision"]["grads"] = grads;
        std::ofstream(path) << model.dump();
    };
    auto in = base();
    in.model = path;
    write("fp16", "fp16");
    EXPECT_EQ(error_field(in), "(no error)");
    write("bf16", "bf16");
    EXPECT_EQ(error_field(in), "model.precision.grads");
}
