// The per-operation breakdown behind `simulate --layer-ops`: one table per kind of layer, the
// same operations and seconds the cost model adds up.
#include "../support/moe_jobs.h"
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/simulator/cost_model.h"
#include "trident/simulator/layer_breakdown.h"

#include <gtest/gtest.h>
#include <sstream>

using namespace trident;

namespace {

core::JobSpec deepseek_job() {
    return core::load_job(test::deepseek_v3_on_512_h800());
}

} // namespace

TEST(LayerBreakdown, OneTablePerLayerKindThatAddsUpToTheCostModel) {
    const core::JobSpec job = deepseek_job();
    const core::Profile& profile = test::preset_profile("h800-sxm5-80gb");
    const auto tables = simulator::layer_breakdowns(job, profile);
    ASSERT_EQ(tables.size(), 5u); // dense layer 0, MoE layer 3, embedding, loss head, MTP
    EXPECT_EQ(tables[0].title, "layer 0 (dense)");
    EXPECT_EQ(tables[1].title, "layer 3 (MoE)");
    EXPECT_EQ(tables[2].title, "embedding");
    EXPECT_EQ(tables[3].title, "loss head");
    EXPECT_EQ(tables[4].title, "MTP module 1");
    // The cost model's per-layer F + B + W on rank 0 (large kernels: no host wait, no overlap).
    const simulator::PipelineLoads loads = simulator::pipeline_loads(job, profile);
    EXPECT_NEAR(tables[0].total_s(), loads.layer_s[0], 1e-12);
    EXPECT_NEAR(tables[1].total_s(), loads.layer_s[3], 1e-12);
    EXPECT_NEAR(tables[3].total_s() + tables[4].total_s(), loads.head_s, 1e-12);
    EXPECT_NEAR(tables[1].phase_s(simulator::Phase::forward) +
                    tables[1].phase_s(simulator::Phase::backward_input) +
                    tables[1].phase_s(simulator::Phase::backward_weight),
                tables[1].total_s(), 1e-12);
    bool dispatch = false;
    for (const auto& t : tables[1].ops) dispatch = dispatch || t.op.name == "dispatch";
    EXPECT_TRUE(dispatch);
    std::ostringstream out;
    simulator::print_layer_breakdowns(tables, out);
    EXPECT_NE(out.str().find("expert fc1"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("TFLOP/s"), std::string::npos);
    EXPECT_NE(out.str().find("all_to_all over tensor_expert"), std::string::npos);
}

// The activations' backward has a profile table of its own where one was measured (its work
// per byte is not the forward's: more exps and products, two outputs); without one it is timed
// at the forward kernel's rate per byte.
TEST(LayerBreakdown, ActivationBackwardTakesItsOwnTableWhereTheProfileHasOne) {
    core::JobInputs in;
    in.model = "llama3-8b"; // SwiGLU
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.tp = 8;
    in.micro_batch_size = 1;
    in.global_batch_size = 8;
    const core::JobSpec job = core::load_job(in);
    core::Json j = core::resolve_reference("h100-sxm5-80gb", core::PresetKind::profile, "p");
    const auto activation = [&](const core::Profile& profile, simulator::Phase phase) {
        const auto tables = simulator::layer_breakdowns(job, profile);
        for (const auto& t : tables.front().ops)
            if (t.op.name == "activation" && t.op.phase == phase) return t;
        ADD_FAILURE() << "no activation op";
        return simulator::OpTime{};
    };
    const core::Profile without = core::Profile::from_json(j);
    core::Json& tables = j["kernels"]["memory_bound"];
    ASSERT_FALSE(tables.contains("swiglu_backward"));
    core::Json slower = tables["swiglu"];
    for (auto& row : slower) row[1] = 2.0 * row[1].get<double>();
    tables["swiglu_backward"] = slower;
    const core::Profile with = core::Profile::from_json(j);
    const auto b_without = activation(without, simulator::Phase::backward_input),
               b_with = activation(with, simulator::Phase::backward_input);
    EXPECT_EQ(b_with.op.kernel, core::MemoryKernel::swiglu_backward);
    EXPECT_NEAR(b_with.seconds, 2.0 * b_without.seconds, 1e-9 * b_without.seconds);
    EXPECT_NEAR(b_without.seconds,
                without.memory_bound(core::MemoryKernel::swiglu, b_without.op.bytes).seconds,
                1e-15);
    EXPECT_EQ(activation(with, simulator::Phase::forward).seconds,
              activation(without, simulator::Phase::forward).seconds);
}
