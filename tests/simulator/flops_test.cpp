// FLOPs against the closed forms of Narayanan et al. 2021 and Megatron-LM's generalisation.
#include "trident/core/job_loader.h"
#include "trident/simulator/flops.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec job(const std::string& model, const std::string& extra_recompute = "none",
                  std::int64_t layers_recomputed = 0) {
    core::JobInputs in;
    in.model = model;
    in.cluster = "dgx-a100-80gb";
    in.nodes = 8;
    in.tp = 8;
    in.pp = 4;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 32;
    in.seq_length = 2048;
    in.recompute = extra_recompute;
    if (layers_recomputed) {
        in.recompute_num_layers = layers_recomputed;
        in.recompute_method = "uniform";
    }
    return core::load_job(in);
}

} // namespace

TEST(Flops, DenseGptMatchesNarayanan) {
    const auto j = job("gpt3-175b");
    const double B = 32, s = 2048, l = 96, h = 12288, V = 51200; // V padded to 128·tp
    const double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    const auto f = simulator::step_flops(j);
    EXPECT_NEAR(f.model / model, 1.0, 1e-12);
    EXPECT_DOUBLE_EQ(f.hardware, f.model); // no recomputation
}

TEST(Flops, FullRecomputationMatchesNarayananHardwareFormula) {
    const auto j = job("gpt3-175b", "full", 1);
    const double B = 32, s = 2048, l = 96, h = 12288, V = 51200;
    const double hardware = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    const auto f = simulator::step_flops(j);
    EXPECT_NEAR(f.hardware / hardware, 1.0, 1e-12);
    EXPECT_NEAR(f.model / (72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))), 1.0,
                1e-12);
}

TEST(Flops, SelectiveRecomputationAddsOneAttentionCoreForward) {
    const auto none = simulator::step_flops(job("gpt3-175b"));
    const auto selective = simulator::step_flops(job("gpt3-175b", "selective"));
    const double B = 32, s = 2048, l = 96, h = 12288;
    EXPECT_DOUBLE_EQ(selective.model, none.model);
    EXPECT_NEAR(selective.hardware - none.hardware, 4 * B * s * s * h * l, 1e3); // QKᵀ + AV
}

TEST(Flops, BlockRecomputationCountsOnlyTheChosenLayers) {
    // 24 layers per stage; block method, 6 of them recomputed: a quarter of full's extra.
    core::JobInputs in;
    const auto full = simulator::step_flops(job("gpt3-175b", "full", 1));
    auto j = job("gpt3-175b");
    j.plan.recompute = {core::RecomputeGranularity::full, core::RecomputeMethod::block, 6};
    const auto block = simulator::step_flops(j);
    EXPECT_NEAR((block.hardware - block.model) / (full.hardware - full.model), 0.25, 1e-12);
}

TEST(Flops, GqaSwigluMoeMatchMegatronGeneralForm) {
    // Megatron-LM num_floating_point_operations: 12·B·s·l·h²·[(1 + g/a + s/h)·(q/h)
    //   + (f/h)·k·3/2 + V/(2·l·h)] for SwiGLU; the router GEMM (6·B·s·h·E per layer) on top.
    for (const char* name : {"llama3-8b", "mixtral-8x7b"}) {
        const auto j = job(name);
        const auto& m = j.model;
        const double B = 32, s = 2048, l = double(m.num_layers), h = double(m.hidden_size);
        const double a = double(m.num_attention_heads), g = double(m.num_query_groups);
        const double q = a * double(m.head_dim), V = double(m.padded_vocab_size(8));
        const double f = m.moe ? double(m.moe->expert_ffn_hidden_size) : double(m.ffn_hidden_size);
        const double k = m.moe ? double(m.moe->top_k) : 1.0;
        double expected = 12 * B * s * l * h * h *
                          ((1 + g / a + s / h) * (q / h) + (f / h) * k * 1.5 + V / (2 * l * h));
        if (m.moe) expected += 6 * B * s * h * double(m.moe->num_experts) * l;
        EXPECT_NEAR(simulator::step_flops(j).model / expected, 1.0, 1e-12) << name;
    }
}

TEST(Flops, DeepSeekV3MlaSharedExpertsAndMtpMatchMegatron) {
    // Megatron-LM's num_floating_point_operations for MLA (its q_term, kv_lora_rank term,
    // rotary key and output projection), dense first layers, shared experts, the router, and
    // one MTP module (a layer like the last, 2h² for its projection, a second set of logits).
    // Its attention core term is halved for the causal mask; Trident counts the full s², so
    // the term is doubled back here; and Megatron's "+1" per latent (its norms) is left out,
    // as norms are not FLOPs in either count's GEMM terms.
    core::JobInputs in;
    in.model = "deepseek-v3";
    in.cluster = "dgx-h100";
    in.nodes = 8;
    in.tp = 8;
    in.pp = 1;
    in.ep = 8;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 32;
    in.seq_length = 2048;
    in.distributed_optimizer = true; // its BF16 moments need it, as in Megatron
    const core::JobSpec j = core::load_job(in);
    const auto& m = j.model;
    ASSERT_TRUE(m.mla && m.moe);
    ASSERT_EQ(m.mtp_num_layers, 1);
    const auto& a = *m.mla;
    const auto& e = *m.moe;
    const double B = 32, s = 2048, h = double(m.hidden_size), H = double(m.num_attention_heads);
    const double qk = double(a.qk_head_dim), pos = double(a.qk_pos_emb_head_dim);
    const double v = double(a.v_head_dim), V = double(m.padded_vocab_size(8));
    const double attention =
        6 * (double(a.q_lora_rank) * (h + H * (qk + pos)) +
             double(a.kv_lora_rank) * (h + H * (qk + v)) + h * pos + H * v * h) +
        6 * s * (H * (qk + pos) + H * v);
    const double dense_mlp = 6 * h * double(m.ffn_hidden_size) * 3;
    const double moe_mlp = 6 * h *
                               (double(e.expert_ffn_hidden_size) * double(e.top_k) * 3 +
                                double(e.shared_expert_ffn_hidden_size) * 3) +
                           6 * h * double(e.num_experts);
    const double dense = double(e.first_dense_layers);
    const double moe = double(m.num_layers) - dense + 1; // the MTP module's layer is MoE
    const double per_token = (dense + moe) * attention + dense * dense_mlp + moe * moe_mlp +
                             6 * 2 * h * h + 2 * 6 * h * V;
    EXPECT_NEAR(simulator::step_flops(j).model / (B * s * per_token), 1.0, 1e-12);
}
