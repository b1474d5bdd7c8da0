// Multi-token prediction (DeepSeek-V3 §2.2; Megatron-Core --mtp-num-layers): its parameters,
// where they live, the FLOPs Megatron counts for it, what it adds to the last stage and how the
// Megatron export writes it (here, where the planner library links the simulator).
#include "../support/moe_jobs.h"
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/model_layout.h"
#include "trident/core/parameter_count.h"
#include "trident/core/pipeline_split.h"
#include "trident/core/presets.h"
#include "trident/planner/planner.h"
#include "trident/simulator/flops.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

// DeepSeek-V3 on 64 HGX H800 nodes: pp 8 (7 + 6×8 + 6 layers), ep 64, flex dispatcher.
core::JobInputs deepseek(std::int64_t mtp) {
    core::JobInputs in = test::deepseek_v3_on_512_h800();
    in.mtp_num_layers = mtp;
    return in;
}

} // namespace

TEST(MultiTokenPrediction, ModuleParametersAreItsNormsProjectionAndLayer) {
    core::ModelSpec m =
        core::model_from_json(core::resolve_reference("deepseek-v3", core::PresetKind::model, "m"));
    m.mtp_num_layers = 1;
    const core::ParameterCounts c = core::count_parameters(m);
    // enorm, hnorm and its final norm (RMSNorm: h each), eh_proj 2h × h, one MoE layer like
    // the decoder's last.
    const std::int64_t h = 7168;
    EXPECT_EQ(c.mtp, 3 * h + 2 * h * h + core::layer_parameters(m, 60).total());
    // 11.7 B: with the separate copies of the embedding and head DeepSeek's checkpoint keeps
    // for it (2 × 129,280 × 7,168), the 14 B of the released 685 B.
    EXPECT_NEAR(double(c.mtp + 2 * 129280 * h) / 1e9, 13.5, 0.1);
    EXPECT_EQ(c.total(), 671026404352); // the main model, as the report counts it
}

TEST(MultiTokenPrediction, LastStageHoldsTheModulesAndAnEmbeddingCopy) {
    const core::JobSpec plain = core::load_job(deepseek(0));
    const core::JobSpec mtp = core::load_job(deepseek(1));
    const core::ChunkLayout before(plain, 7, 0, 0, 0, 1, core::LayoutDetail::counts);
    const core::ChunkLayout after(mtp, 7, 0, 0, 0, 1, core::LayoutDetail::counts);
    // The MTP layer's routed experts: 256 / 64 = 4 of them, 3 · 7168 · 2048 each.
    EXPECT_EQ(after.expert_parameters() - before.expert_parameters(), 4 * 3 * 7168 * 2048);
    const core::LayerParameters layer = core::layer_parameters(mtp.model, 61);
    const std::int64_t dense_layer = layer.total() - layer.routed_experts;
    const std::int64_t embedding_copy = mtp.model.padded_vocab_size(1) * 7168;
    EXPECT_EQ((after.parameters() - after.expert_parameters()) -
                  (before.parameters() - before.expert_parameters()),
              3 * 7168 + 2 * 7168 * 7168 + dense_layer + embedding_copy);
    // One more FSDP unit; the first stage is unchanged.
    EXPECT_EQ(after.units().size(), before.units().size() + 1);
    EXPECT_EQ(core::ChunkLayout(mtp, 0, 0, 0, 0, 1, core::LayoutDetail::counts).parameters(),
              core::ChunkLayout(plain, 0, 0, 0, 0, 1, core::LayoutDetail::counts).parameters());
    // Placed tensors: the copy is named as such and its gradient summed with the first stage's.
    const core::ChunkLayout placed(mtp, 7, 0, 0, 0);
    const std::int64_t copy = placed.find(core::TensorRole::word_embedding);
    ASSERT_GE(copy, 0);
    EXPECT_EQ(placed.tensors()[std::size_t(copy)].name(), "embedding.word.mtp_copy");
    EXPECT_TRUE(placed.tensors()[std::size_t(copy)].flags.tied_embedding);
    EXPECT_GE(placed.find(core::TensorRole::mtp_eh_proj, 61), 0);
}

TEST(MultiTokenPrediction, ModelFlopsAddALayerTheProjectionAndTheLogitsAsMegatronCounts) {
    // Megatron-LM's num_floating_point_operations: the MTP layer as one more layer, plus
    // 6 · 2h² per token for eh_proj and 6 · h · V for the second logits (norms: not GEMMs).
    core::JobInputs with = deepseek(1), longer = deepseek(0);
    const double base = simulator::step_flops(core::load_job(deepseek(0))).model;
    const double mtp = simulator::step_flops(core::load_job(with)).model;
    core::JobSpec one_more = core::load_job(longer);
    one_more.model.num_layers += 1; // the decoder's last layer is MoE: so is the added one
    one_more.plan.last_stage_layers = 7;
    const double layer = simulator::step_flops(one_more).model - base;
    const double tokens = 1024.0 * 4096.0, h = 7168.0;
    const double V = double(one_more.model.padded_vocab_size(1));
    EXPECT_NEAR(mtp - base, layer + 6.0 * tokens * 2.0 * h * h + 6.0 * tokens * h * V, 1e-9 * mtp);
}

TEST(MultiTokenPrediction, SlowsAndFillsOnlyTheLastStage) {
    const core::Profile& profile = test::preset_profile("h800-sxm5-80gb");
    const simulator::Report plain = simulator::simulate(core::load_job(deepseek(0)), profile, {});
    const simulator::Report mtp = simulator::simulate(core::load_job(deepseek(1)), profile, {});
    for (std::size_t s = 0; s + 1 < plain.stages.size(); ++s) {
        EXPECT_DOUBLE_EQ(mtp.stages[s].compute_s, plain.stages[s].compute_s);
        EXPECT_DOUBLE_EQ(mtp.stages[s].memory.weights_bytes, plain.stages[s].memory.weights_bytes);
    }
    const auto& before = plain.stages.back();
    const auto& after = mtp.stages.back();
    EXPECT_GT(after.compute_s, before.compute_s);
    EXPECT_GT(after.memory.activations_bytes, before.memory.activations_bytes);
    EXPECT_GT(after.memory.weights_bytes, before.memory.weights_bytes);
    EXPECT_GT(mtp.step_time_s, plain.step_time_s);
    EXPECT_GT(mtp.model_flops, plain.model_flops);
}

TEST(MultiTokenPrediction, LayoutAndExportCarryTheModule) {
    // Megatron's layout string puts 'm' before the loss; Trident reads and writes it there.
    core::JobInputs in = deepseek(1);
    in.first_stage_layers.reset();
    in.last_stage_layers.reset();
    in.pipeline_layout = "Et*3|(t*8|)*5t*9|t*9mL"; // no first/last-rank form: exported as is
    const core::JobSpec job = core::load_job(in);
    EXPECT_EQ(job.pipeline_split().layers_of(7), 9);
    EXPECT_EQ(core::megatron_layout_string(job.pipeline_split(), 1),
              "Et*3|t*8|t*8|t*8|t*8|t*8|t*9|t*9mL");
    const std::string args = planner::megatron_arguments(job);
    EXPECT_NE(args.find("--mtp-num-layers 1"), std::string::npos) << args;
    EXPECT_NE(args.find("--mtp-loss-scaling-factor 0.1"), std::string::npos) << args;
    EXPECT_NE(args.find("t*9mL"), std::string::npos) << args;
}
