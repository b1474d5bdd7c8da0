// Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size, "MoE parallel
// folding"): experts split over etp ranks, spread over ep ranks carved out of a stage's whole
// tp·cp·dp, and what that changes in the expert GEMMs, the token exchange and the parameters.
// The planner's side: tests/planner/expert_folding_test.cpp.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/layer_ops.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/report.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>
#include <sstream>

using namespace trident;
using simulator::OpKind;
using simulator::Phase;

namespace {

core::ModelSpec qwen3_30b() {
    return core::model_from_json(
        core::resolve_reference("qwen3-30b-a3b", core::PresetKind::model, "m"));
}

// One MoE layer's view: tp 4 with sequence parallelism, 4,096 tokens a micro-batch.
simulator::LayerView view(std::int64_t ep, std::int64_t etp) {
    simulator::LayerView v;
    v.tp = 4;
    v.ep = ep;
    v.etp = etp;
    v.sequence_parallel = true;
    v.micro_batch = 1;
    v.seq = 4096;
    v.dispatcher = core::TokenDispatcher::alltoall;
    return v;
}

std::vector<simulator::Op> forward_ops(const simulator::LayerView& v, std::string_view name) {
    std::vector<simulator::Op> out;
    for (const simulator::Op& op : simulator::layer_ops(qwen3_30b(), v, 0))
        if (op.name == name && op.phase == Phase::forward) out.push_back(op);
    return out;
}

// Qwen3-30B-A3B on 2 DGX H100 nodes: tp 4 · pp 1 · dp 4, sequence parallel, ZeRO-1.
core::JobInputs folded_inputs(std::int64_t ep, std::optional<std::int64_t> etp) {
    core::JobInputs in;
    in.model = "qwen3-30b-a3b";
    in.cluster = "dgx-h100";
    in.nodes = 2;
    in.tp = 4;
    in.pp = 1;
    in.dp = "auto";
    in.ep = ep;
    in.etp = etp;
    in.sequence_parallel = true;
    in.distributed_optimizer = true;
    in.micro_batch_size = 1;
    in.global_batch_size = 32;
    in.seq_length = 4096;
    return in;
}

} // namespace

TEST(ExpertTensorParallel, FoldedExpertsRunWholeAtTheSameTokensPerExpert) {
    // Qwen3-30B-A3B: 128 experts, top-8, hidden 2,048, expert FFN 768 (SwiGLU: fc1 1,536).
    // etp = tp = 4, ep 2: each tp group routes its 4,096 tokens (8 copies each) to 64 local
    // experts, 512 tokens an expert, each expert a quarter wide (fc1 384 columns).
    // etp 1, ep 8: each rank routes its own 1,024 sequence-parallel tokens to 16 local experts
    // of 128 / 8: again 512 tokens an expert, but whole experts (1,536 columns).
    const auto sliced = forward_ops(view(2, 4), "expert fc1");
    const auto whole = forward_ops(view(8, 1), "expert fc1");
    ASSERT_EQ(sliced.size(), 1u);
    ASSERT_EQ(whole.size(), 1u);
    EXPECT_EQ(sliced[0].count, 64);
    EXPECT_EQ(whole[0].count, 16);
    EXPECT_EQ(sliced[0].m, 512);
    EXPECT_EQ(whole[0].m, 512);
    EXPECT_EQ(sliced[0].n, 384);
    EXPECT_EQ(whole[0].n, 1536);
    // The same FLOPs a rank either way; the wider groups run faster on the grouped table.
    EXPECT_DOUBLE_EQ(sliced[0].flops * double(sliced[0].count),
                     whole[0].flops * double(whole[0].count));
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const auto seconds = [&](const simulator::Op& op) {
        return h100.grouped_gemm(core::Dtype::bf16, op.count, op.m, op.n, op.k).seconds;
    };
    EXPECT_LT(seconds(whole[0]), seconds(sliced[0]));
}

TEST(ExpertTensorParallel, WholeExpertsNeedNoExpertTensorGather) {
    const double row = 2048 * 2.0; // one token's hidden state in BF16
    // etp 4: after the all-to-all the expert-tp ranks all-gather the 4,096·8 copies received.
    double gathered = 0;
    for (const auto& op : forward_ops(view(2, 4), "dispatch"))
        if (op.group == core::GroupKind::expert_tensor) gathered += op.bytes * double(op.count);
    EXPECT_DOUBLE_EQ(gathered, 4096 * 8 * row);
    // etp 1: the all-to-all alone, each rank sending its 1,024 tokens' 8 copies.
    double exchanged = 0;
    for (const auto& op : forward_ops(view(8, 1), "dispatch")) {
        EXPECT_NE(op.group, core::GroupKind::expert_tensor);
        if (op.kind == OpKind::collective) exchanged += op.bytes * double(op.count);
    }
    EXPECT_DOUBLE_EQ(exchanged, 1024 * 8 * row);
}

TEST(ExpertTensorParallel, StagesHoldTheirExpertShardAndReduceOverExpertData) {
    // ep 4 · etp 4 and ep 16 · etp 1 both split every expert layer 16 ways: the same expert
    // parameters on a rank, one expert-dp rank; ep 4 · etp 1 holds 4× more experts whole and
    // reduces them over 4 expert-dp ranks.
    const core::JobSpec sliced = core::load_job(folded_inputs(4, std::nullopt));
    const core::JobSpec whole = core::load_job(folded_inputs(16, 1));
    const core::JobSpec wide = core::load_job(folded_inputs(4, 1));
    const double sliced_b = simulator::parameters_per_stage(sliced)[0].expert;
    EXPECT_DOUBLE_EQ(simulator::parameters_per_stage(whole)[0].expert, sliced_b);
    EXPECT_DOUBLE_EQ(simulator::parameters_per_stage(wide)[0].expert, 4 * sliced_b);
    EXPECT_EQ(sliced.plan.expert_dp(), 1);
    EXPECT_EQ(whole.plan.expert_dp(), 1);
    EXPECT_EQ(wide.plan.expert_dp(), 4);
    // The report names the folding.
    std::ostringstream text;
    simulator::print_report(simulator::simulate(whole, test::preset_profile(whole.cluster.device)),
                            text);
    EXPECT_NE(text.str().find("ep 16 · etp 1"), std::string::npos) << text.str();
}
