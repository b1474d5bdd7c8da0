#include "trident/core/model_spec.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>

using namespace trident::core;

namespace {

Json small_model() {
    return Json::parse(R"({
        "num_layers": 4, "hidden_size": 64, "num_attention_heads": 8, "ffn_hidden_size": 256,
        "vocab_size": 1000, "max_position_embeddings": 128, "activation": "gelu",
        "normalization": "layernorm", "position_embedding": "learned",
        "tied_embeddings": true, "linear_bias": true})");
}

std::string error_field(const Json& j) {
    try {
        model_from_json(j);
    } catch (const SpecError& e) {
        return e.field();
    }
    return "(no error)";
}

} // namespace

TEST(ModelSpec, DerivesHeadDimAndKvHeads) {
    const ModelSpec m = model_from_json(small_model());
    EXPECT_EQ(m.head_dim, 8);
    EXPECT_EQ(m.num_query_groups, 8);
    EXPECT_FALSE(m.moe);
}

TEST(ModelSpec, RoundTripsThroughJson) {
    for (const auto& name : preset_names(PresetKind::model)) {
        const ModelSpec a = model_from_json(resolve_reference(name, PresetKind::model, "model"));
        const ModelSpec b = model_from_json(to_json(a));
        EXPECT_EQ(to_json(a), to_json(b)) << name;
    }
}

TEST(ModelSpec, RejectsEachImpossibleField) {
    Json j = small_model();
    j["num_attention_heads"] = 7;
    EXPECT_EQ(error_field(j), "model.num_attention_heads"); // 7 does not divide 64
    j = small_model();
    j["num_query_groups"] = 3;
    EXPECT_EQ(error_field(j), "model.num_query_groups");
    j = small_model();
    j["activation"] = "relu";
    EXPECT_EQ(error_field(j), "model.activation");
    j = small_model();
    j.erase("vocab_size");
    EXPECT_EQ(error_field(j), "model.vocab_size");
    j = small_model();
    j["extra"] = 1;
    EXPECT_EQ(error_field(j), "model.extra");
    j = small_model();
    j["moe"] = {{"num_experts", 4}, {"top_k", 5}, {"expert_ffn_hidden_size", 64}};
    EXPECT_EQ(error_field(j), "model.moe.top_k");
    j = small_model();
    j["moe"] = {{"num_experts", 4},
                {"top_k", 2},
                {"expert_ffn_hidden_size", 64},
                {"first_dense_layers", 4}};
    EXPECT_EQ(error_field(j), "model.moe.first_dense_layers");
    j = small_model();
    j["precision"] = {{"params", "fp8"}};
    EXPECT_EQ(error_field(j), "model.precision");
    j = small_model();
    j["hidden_size"] = 1 << 20;
    j["num_layers"] = 100000;
    EXPECT_EQ(error_field(j), "model"); // too large to count exactly
}

TEST(ModelSpec, MoeLayerPattern) {
    Json j = small_model();
    j["num_layers"] = 8;
    j["moe"] = {{"num_experts", 4},
                {"top_k", 2},
                {"expert_ffn_hidden_size", 64},
                {"layer_frequency", 2},
                {"first_dense_layers", 1}};
    const ModelSpec m = model_from_json(j);
    // Layers 1, 3, 5, 7 are MoE.
    std::vector<bool> pattern;
    for (int l = 0; l < 8; ++l) pattern.push_back(m.is_moe_layer(l));
    EXPECT_EQ(pattern, (std::vector<bool>{false, true, false, true, false, true, false, true}));
    EXPECT_EQ(m.num_moe_layers(), 4);
}

TEST(ModelSpec, PaddedVocabulary) {
    const ModelSpec m = model_from_json(resolve_reference("gpt3-175b", PresetKind::model, "m"));
    EXPECT_EQ(m.padded_vocab_size(1), 50304); // 393 · 128
    EXPECT_EQ(m.padded_vocab_size(8), 51200); // 50 · 1024
}
