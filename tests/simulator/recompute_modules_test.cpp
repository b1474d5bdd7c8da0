// Selective recomputation by module (Megatron-Core's --recompute-modules): what each module
// stops keeping, counted by hand, what the backward does again, and the refusals.
#include "../support/moe_jobs.h"
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/layer_ops.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>
#include <set>
#include <string>

using namespace trident;
using core::RecomputeModule;
using simulator::Phase;

namespace {

core::ModelSpec preset(const std::string& name) {
    return core::model_from_json(core::resolve_reference(name, core::PresetKind::model, "m"));
}

// One rank's view of a layer: 4,096 tokens, tp 1, ep 8, no FP8, the given modules.
simulator::LayerView view(std::uint32_t modules) {
    simulator::LayerView v;
    v.ep = 8;
    v.micro_batch = 1;
    v.seq = 4096;
    v.recompute = core::RecomputeGranularity::selective;
    v.recompute_modules = modules;
    return v;
}

constexpr std::uint32_t kCoreAttn = core::module_bit(RecomputeModule::core_attn);

// Bytes a layer stops keeping when `module` joins core_attn.
double saved_bytes(const core::ModelSpec& m, std::int64_t layer, RecomputeModule module) {
    return simulator::activation_bytes(m, view(kCoreAttn), layer) -
           simulator::activation_bytes(m, view(kCoreAttn | core::module_bit(module)), layer);
}

// Names of the forward work a layer's backward repeats.
std::multiset<std::string> recomputed(const core::ModelSpec& m, std::int64_t layer,
                                      std::uint32_t modules) {
    std::multiset<std::string> names;
    for (const simulator::Op& op : simulator::layer_ops(m, view(modules), layer))
        if (op.recompute) {
            EXPECT_EQ(op.phase, Phase::backward_input) << op.name;
            names.insert(std::string(op.name));
        }
    return names;
}

core::JobInputs deepseek_inputs() {
    return test::deepseek_v3_on_512_h800();
}

} // namespace

TEST(RecomputeModules, MlaUpProjectionDropsTheHeadsQueriesKeysAndValues) {
    // DeepSeek-V3, 128 heads: Q and K of 128 + 64 rotary dims each, V of 128, 2 bytes each,
    // 4,096 tokens: 2 · 4096 · 128 · (192 + 192 + 128) bytes.
    const core::ModelSpec m = preset("deepseek-v3");
    EXPECT_DOUBLE_EQ(saved_bytes(m, 3, RecomputeModule::mla_up_proj), 2.0 * 4096 * 128 * 512);
    // The backward runs both up-projections' forward GEMMs again, and nothing else.
    EXPECT_EQ(recomputed(m, 3, core::module_bit(RecomputeModule::mla_up_proj)),
              (std::multiset<std::string>{"q up", "kv up"}));
}

TEST(RecomputeModules, MoeActivationDropsTheExpertActivationOutput) {
    // Qwen3-30B-A3B: 4,096 tokens × top-8 = 32,768 routed copies, expert FFN 768, 2 bytes.
    const core::ModelSpec m = preset("qwen3-30b-a3b");
    EXPECT_DOUBLE_EQ(saved_bytes(m, 0, RecomputeModule::moe_act), 2.0 * 32768 * 768);
    EXPECT_EQ(recomputed(m, 0, core::module_bit(RecomputeModule::moe_act)),
              (std::multiset<std::string>{"expert activation"}));
}

TEST(RecomputeModules, LayernormDropsTheOutputsOfUnfusedNorms) {
    // Qwen3-30B-A3B: the attention norm is fused into the QKV GEMM (nothing to drop); the MoE
    // block's norm feeds the router and the experts: its 4,096 × 2,048 output goes.
    EXPECT_DOUBLE_EQ(saved_bytes(preset("qwen3-30b-a3b"), 0, RecomputeModule::layernorm),
                     2.0 * 4096 * 2048);
    EXPECT_EQ(recomputed(preset("qwen3-30b-a3b"), 0, core::module_bit(RecomputeModule::layernorm)),
              (std::multiset<std::string>{"mlp norm"}));
    // DeepSeek-V3 (MLA): both norms are separate modules, 4,096 × 7,168 each, and so are the
    // q and kv latents' norms, 4,096 × 1,536 and 4,096 × 512; all four run again in B.
    EXPECT_DOUBLE_EQ(saved_bytes(preset("deepseek-v3"), 3, RecomputeModule::layernorm),
                     2.0 * 4096 * (2.0 * 7168 + 1536 + 512));
    const auto rebuilt =
        recomputed(preset("deepseek-v3"), 3, core::module_bit(RecomputeModule::layernorm));
    EXPECT_EQ(rebuilt.count("q norm"), 1u);
    EXPECT_EQ(rebuilt.count("kv norm"), 1u);
    // A dense GQA layer has no unfused norm: nothing is saved, nothing recomputed.
    EXPECT_DOUBLE_EQ(saved_bytes(preset("llama3-8b"), 0, RecomputeModule::layernorm), 0.0);
}

TEST(RecomputeModules, WholeMoeBlockKeepsOnlyItsInputAndRepeatsItsExchange) {
    const core::ModelSpec m = preset("qwen3-30b-a3b");
    const std::uint32_t moe = core::module_bit(RecomputeModule::moe);
    // Kept in the MoE half of the layer: the norm's input and output (the block's input).
    simulator::LayerView all = view(kCoreAttn), block = view(moe);
    const double h_bytes = 2.0 * 4096 * 2048;
    const double moe_internals =
        simulator::activation_bytes(m, all, 0) - simulator::activation_bytes(m, block, 0);
    // Router probabilities (fp32, 128 experts), each copy's probability (fp32), permuted
    // copies, fc1 output (2 × 768 wide), activation output: 32,768 copies.
    const double copies = 32768;
    EXPECT_DOUBLE_EQ(moe_internals, 4.0 * 4096 * 128 + 4.0 * copies + 2.0 * copies * 2048 +
                                        2.0 * copies * 1536 + 2.0 * copies * 768);
    EXPECT_GT(simulator::activation_bytes(m, block, 0), 2 * h_bytes);
    const auto names = recomputed(m, 0, moe);
    EXPECT_EQ(names.count("dispatch"), 1u); // the exchange runs again (one all-to-all each way)
    EXPECT_EQ(names.count("combine"), 1u);
    EXPECT_EQ(names.count("expert fc1"), 1u);
    EXPECT_EQ(names.count("router"), 1u);
    EXPECT_EQ(names.count("attention core"), 0u); // core_attn is not selected here
}

TEST(RecomputeModules, DenseMlpAndSharedExpertsAreRecomputedWhole) {
    const core::ModelSpec m = preset("deepseek-v3");
    // Dense layer 0: fc1 input, fc1 output (2 × 18,432), activation output.
    EXPECT_DOUBLE_EQ(saved_bytes(m, 0, RecomputeModule::mlp),
                     2.0 * 4096 * (7168 + 2 * 18432 + 18432));
    EXPECT_DOUBLE_EQ(saved_bytes(m, 3, RecomputeModule::mlp), 0.0); // an MoE layer
    // The shared expert (2,048 wide): fc1 output and activation output.
    EXPECT_DOUBLE_EQ(saved_bytes(m, 3, RecomputeModule::shared_experts),
                     2.0 * 4096 * (2 * 2048 + 2048));
    EXPECT_EQ(recomputed(m, 3, core::module_bit(RecomputeModule::shared_experts)),
              (std::multiset<std::string>{"shared fc1", "shared activation", "shared fc2"}));
}

TEST(RecomputeModules, DefaultIsCoreAttentionAsBefore) {
    // "selective" alone is Megatron's default, core_attn: the attention core runs again.
    const core::ModelSpec m = preset("llama3-8b");
    EXPECT_EQ(recomputed(m, 0, kCoreAttn), (std::multiset<std::string>{"attention core"}));
    core::JobInputs in = deepseek_inputs();
    in.recompute = "selective";
    const core::JobSpec job = core::load_job(in);
    EXPECT_EQ(job.plan.recompute.modules, kCoreAttn);
}

TEST(RecomputeModules, ModulesCostTimeAndSaveMemoryInAWholeStep) {
    // DeepSeek-V3 on 512 H800 at pp 8: DeepSeek's own choice (norms and MLA up-projections)
    // lowers every stage's activations and adds recomputation time.
    const core::Profile& profile = test::preset_profile("h800-sxm5-80gb");
    core::JobInputs in = deepseek_inputs();
    const simulator::Report kept = simulator::simulate(core::load_job(in), profile, {});
    in.recompute_modules = std::vector<std::string>{"layernorm", "mla_up_proj"};
    const core::JobSpec job = core::load_job(in);
    EXPECT_EQ(job.plan.recompute.granularity, core::RecomputeGranularity::selective);
    const simulator::Report rebuilt = simulator::simulate(job, profile, {});
    ASSERT_EQ(kept.stages.size(), rebuilt.stages.size());
    for (std::size_t s = 0; s < kept.stages.size(); ++s) {
        EXPECT_LT(rebuilt.stages[s].memory.activations_bytes,
                  kept.stages[s].memory.activations_bytes);
        EXPECT_GT(rebuilt.stages[s].recompute_s, 0.0);
        EXPECT_EQ(kept.stages[s].recompute_s, 0.0);
    }
    EXPECT_GT(rebuilt.step_time_s, kept.step_time_s);
    EXPECT_GT(rebuilt.hfu, rebuilt.mfu);
}

TEST(RecomputeModules, RefusalsNameTheFieldAndTheModel) {
    const auto refused = test::expect_refused;
    core::JobInputs in = deepseek_inputs();
    in.recompute_modules = std::vector<std::string>{"mla_upproj"};
    refused(in, "parallel.recompute.modules[0]", "mla_up_proj");
    in.recompute_modules = std::vector<std::string>{"moe_act", "moe_act"};
    refused(in, "parallel.recompute.modules[1]", "twice");
    in.recompute_modules = std::vector<std::string>{"moe_act"};
    in.recompute = "full";
    refused(in, "parallel.recompute.modules", "selective");
    in = deepseek_inputs();
    in.model = "qwen3-30b-a3b";
    in.first_stage_layers.reset(); // 48 and 32 layers split evenly over 8 stages
    in.last_stage_layers.reset();
    in.recompute_modules = std::vector<std::string>{"mla_up_proj"};
    refused(in, "parallel.recompute.modules", "qwen3-30b-a3b");
    in.recompute_modules = std::vector<std::string>{"shared_experts"};
    refused(in, "parallel.recompute.modules", "shared experts");
    in.model = "llama3-8b";
    in.ep = 1;
    in.moe_token_dispatcher.reset();
    in.recompute_modules = std::vector<std::string>{"moe"};
    refused(in, "parallel.recompute.modules", "mixture-of-experts");
}
