#include "trident/core/job_loader.h"
#include "trident/core/parameter_count.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <gtest/gtest.h>

using namespace trident::core;

TEST(Presets, TheShippedSetIsComplete) {
    const auto models = preset_names(PresetKind::model);
    for (const char* name : {"gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b", "gpt3-175b",
                             "megatron-gpt-1.7b", "megatron-gpt-1t", "llama3-8b", "llama3-70b",
                             "llama3-405b", "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3", "qwen3-30b-a3b",
                             "qwen3-235b-a22b", "gpt-oss-120b"})
        EXPECT_NE(std::find(models.begin(), models.end(), name), models.end()) << name;
    const auto clusters = preset_names(PresetKind::cluster);
    for (const char* name : {"dgx-a100-80gb", "dgx-h100", "hgx-h200", "hgx-h800", "dgx-b200",
                             "gb200-nvl72", "gb300-nvl72", "localhost"})
        EXPECT_NE(std::find(clusters.begin(), clusters.end(), name), clusters.end()) << name;
    EXPECT_EQ(clusters.size(), 8u);
    // The NVL72 racks: 18 trays of 4 GPUs in one 72-GPU NVLink domain.
    const ClusterSpec nvl72 =
        cluster_from_json(resolve_reference("gb200-nvl72", PresetKind::cluster, "cluster"));
    EXPECT_EQ(nvl72.fabric_domain(), 72);
    EXPECT_EQ(nvl72.devices(), 72);
}

TEST(Presets, EveryModelAndClusterParsesAndCitesASource) {
    for (const auto& name : preset_names(PresetKind::model)) {
        const ModelSpec m = model_from_json(resolve_reference(name, PresetKind::model, "model"));
        EXPECT_EQ(m.name, name);
        EXPECT_FALSE(m.source.empty()) << name;
    }
    for (const auto& name : preset_names(PresetKind::cluster)) {
        const ClusterSpec c =
            cluster_from_json(resolve_reference(name, PresetKind::cluster, "cluster"));
        EXPECT_EQ(c.name, name);
        EXPECT_FALSE(c.source.empty()) << name;
        EXPECT_GE(c.devices_per_node, 1);
    }
}

TEST(Presets, MegatronFamilyMatchesTable1Sizes) {
    // Narayanan et al. 2021 Table 1 parameter counts, in billions (one decimal).
    const std::vector<std::pair<std::string, double>> table = {
        {"1.7b", 1.7}, {"3.6b", 3.6},   {"7.5b", 7.5},   {"18b", 18.4},   {"39b", 39.1},
        {"76b", 76.1}, {"145b", 145.6}, {"310b", 310.1}, {"530b", 529.6}, {"1t", 1008.0}};
    for (const auto& [suffix, billions] : table) {
        const auto m = model_from_json(
            resolve_reference("megatron-gpt-" + suffix, PresetKind::model, "model"));
        EXPECT_NEAR(double(count_parameters(m).total()) / 1e9, billions, 0.051) << suffix;
    }
}

TEST(Presets, EveryPlanValidates) {
    for (const auto& name : preset_names(PresetKind::plan)) {
        JobInputs in;
        in.plan = name;
        EXPECT_NO_THROW(load_job(in)) << name;
    }
}

TEST(Presets, ObjectReferenceOverridesAPreset) {
    const Json ref = Json::parse(R"({"preset": "llama3-8b", "num_layers": 16})");
    const ModelSpec m = model_from_json(resolve_reference(ref, PresetKind::model, "model"));
    EXPECT_EQ(m.num_layers, 16);
    EXPECT_EQ(m.hidden_size, 4096);
}

TEST(Presets, UnknownNameListsThePresets) {
    try {
        resolve_reference("llama3-8", PresetKind::model, "model");
        FAIL();
    } catch (const SpecError& e) {
        EXPECT_EQ(e.field(), "model");
        EXPECT_NE(e.reason().find("did you mean 'llama3-8b'"), std::string::npos) << e.reason();
    }
}
