// Parameter counts against figures computed by hand from the published architectures, written
// out term by term so that a mistake in the library cannot be copied into the expectation.
#include "trident/core/parameter_count.h"
#include "trident/core/presets.h"

#include <gtest/gtest.h>

using namespace trident::core;

static ModelSpec preset(const std::string& name) {
    return model_from_json(resolve_reference(name, PresetKind::model, "model"));
}

TEST(ParameterCount, Gpt3_175bByHand) {
    // Per layer: QKV 3h² + 3h, output h² + h, MLP 4h² + 4h and 4h² + h, two LayerNorms 4h
    // => 12h² + 13h. Plus word embedding V·h, learned positions s·h, final LayerNorm 2h;
    // the output layer is tied.
    const std::int64_t h = 12288, l = 96, V = 50257, s = 2048;
    const std::int64_t per_layer = 12 * h * h + 13 * h;
    EXPECT_EQ(per_layer, 1'812'099'072);
    const std::int64_t expected = l * per_layer + V * h + s * h + 2 * h;
    EXPECT_EQ(expected, 174'604'259'328);
    const ParameterCounts c = count_parameters(preset("gpt3-175b"));
    EXPECT_EQ(c.total(), 174'604'259'328);
    EXPECT_EQ(c.active(), c.total());
    EXPECT_EQ(c.output_layer, 0);
    EXPECT_EQ(c.position_embedding, s * h);
}

TEST(ParameterCount, Gpt3FormulaOfNarayanan) {
    // Narayanan et al. 2021 eq. (2): P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)); it leaves
    // out the final LayerNorm (2h).
    const double h = 12288, l = 96, V = 50257, s = 2048;
    const double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
    EXPECT_NEAR(double(count_parameters(preset("gpt3-175b")).total()), formula + 2 * h, 1.0);
}

TEST(ParameterCount, Llama3_8bByHand) {
    // Per layer: q 4096², k and v 4096·(8·128) each, o 4096², SwiGLU 3·4096·14336, two RMSNorms
    // 2·4096; no biases. Untied embedding and output 128256·4096 each; final RMSNorm 4096.
    const std::int64_t per_layer =
        4096LL * 4096 + 2 * 4096LL * 1024 + 4096LL * 4096 + 3 * 4096LL * 14336 + 2 * 4096;
    EXPECT_EQ(per_layer, 218'112'000);
    const std::int64_t expected = 32 * per_layer + 2 * 128256LL * 4096 + 4096;
    EXPECT_EQ(expected, 8'030'261'248);
    EXPECT_EQ(count_parameters(preset("llama3-8b")).total(), 8'030'261'248);
}

TEST(ParameterCount, PublishedTotals) {
    EXPECT_EQ(count_parameters(preset("gpt2-124m")).total(), 124'439'808);   // HF gpt2
    EXPECT_EQ(count_parameters(preset("gpt2-1.5b")).total(), 1'557'611'200); // HF gpt2-xl
    EXPECT_EQ(count_parameters(preset("llama3-70b")).total(), 70'553'706'496);
    EXPECT_EQ(count_parameters(preset("llama3-405b")).total(), 405'853'388'800);
}

TEST(ParameterCount, MixtralTotalAndActive) {
    // Per layer: attention 41,943,040; 8 experts × 3·4096·14336; router 4096·8; 2 norms.
    const std::int64_t attention = 2 * 4096LL * 4096 + 2 * 4096LL * 1024;
    const std::int64_t expert = 3 * 4096LL * 14336;
    const std::int64_t shared = attention + 4096 * 8 + 2 * 4096;
    const std::int64_t embeddings = 2 * 32000LL * 4096 + 4096;
    const ParameterCounts c = count_parameters(preset("mixtral-8x7b"));
    EXPECT_EQ(c.total(), 32 * (shared + 8 * expert) + embeddings);
    EXPECT_EQ(c.total(), 46'702'792'704);
    EXPECT_EQ(c.active(), 32 * (shared + 2 * expert) + embeddings);
    EXPECT_EQ(c.routed_experts, 32 * 8 * expert);
}

TEST(ParameterCount, FineGrainedMoePresetsMatchTheirModelCards) {
    // Qwen3-30B-A3B per layer: q 2048·4096, k and v 2048·512, o 4096·2048; 128 experts of
    // 3·2048·768 (8 active); router 2048·128; 2 norms. Untied 151,936 × 2048 embeddings.
    const std::int64_t q_attention = 2048LL * 4096 * 2 + 2 * 2048LL * 512;
    const std::int64_t q_expert = 3 * 2048LL * 768;
    const std::int64_t q_shared = q_attention + 2048 * 128 + 2 * 2048;
    const ParameterCounts q = count_parameters(preset("qwen3-30b-a3b"));
    EXPECT_EQ(q.total(), 48 * (q_shared + 128 * q_expert) + 2 * 151936LL * 2048 + 2048);
    EXPECT_NEAR(double(q.total()), 30.5e9, 0.1e9);  // "30.5B in total"
    EXPECT_NEAR(double(q.active()), 3.35e9, 0.1e9); // "3.3B activated"
    EXPECT_NEAR(double(count_parameters(preset("qwen3-235b-a22b")).total()), 235e9, 1e9);
    EXPECT_NEAR(double(count_parameters(preset("qwen3-235b-a22b")).active()), 22e9, 0.5e9);
    // gpt-oss-120b: "117B parameters with 5.1B active" (the card's active count leaves out
    // the 201,088 × 2,880 embedding table).
    const ParameterCounts g = count_parameters(preset("gpt-oss-120b"));
    EXPECT_NEAR(double(g.total()), 117e9, 0.5e9);
    EXPECT_NEAR(double(g.active()) - 201088.0 * 2880.0, 5.1e9, 0.1e9);
    // mixtral-8x22b: "141B parameters, 39B active" (Mistral AI's announcement).
    const ParameterCounts x = count_parameters(preset("mixtral-8x22b"));
    EXPECT_NEAR(double(x.total()), 141e9, 0.5e9);
    EXPECT_NEAR(double(x.active()), 39e9, 0.5e9);
}

TEST(ParameterCount, DeepSeekV3WithLatentAttention) {
    // MLA per layer: q_a 7168·1536 + norm 1536 + q_b 1536·128·192 + kv_a 7168·576 + norm 512
    // + kv_b 512·128·256 + o 128·128·7168. Three dense layers (SwiGLU 18432), 58 MoE layers of
    // 256 routed + 1 shared expert (SwiGLU 2048) and a 256-way router.
    const std::int64_t mla = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 +
                             512LL * 128 * 256 + 128LL * 128 * 7168;
    const std::int64_t expert = 3 * 7168LL * 2048;
    const std::int64_t dense_layer = mla + 2 * 7168 + 3 * 7168LL * 18432;
    const std::int64_t moe_layer = mla + 2 * 7168 + 257 * expert + 7168LL * 256;
    const std::int64_t expected = 3 * dense_layer + 58 * moe_layer + 2 * 129280LL * 7168 + 7168;
    const ParameterCounts c = count_parameters(preset("deepseek-v3"));
    EXPECT_EQ(c.total(), expected);
    EXPECT_EQ(c.total(), 671'026'404'352); // the report's 671B
    EXPECT_EQ(c.active(), expected - 58 * 248 * expert);
    EXPECT_NEAR(double(c.active()) / 1e9, 37.5, 0.1); // the report's 37B activated
}

TEST(ParameterCount, LayerBreakdownSumsToTotal) {
    const ModelSpec m = preset("deepseek-v3");
    const LayerParameters dense = layer_parameters(m, 0);
    const LayerParameters moe = layer_parameters(m, 3);
    EXPECT_GT(dense.dense_mlp, 0);
    EXPECT_EQ(dense.routed_experts, 0);
    EXPECT_EQ(moe.dense_mlp, 0);
    EXPECT_EQ(moe.routed_experts, 256 * moe.one_expert);
    EXPECT_EQ(moe.active(8), moe.total() - 248 * moe.one_expert);
    EXPECT_EQ(dense.attention_norms, 1536 + 512);
}
