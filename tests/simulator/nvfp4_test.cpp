// NVFP4 (Megatron-Core --fp4-format e2m1 --fp4-recipe nvfp4) in the plan, the cost and memory
// model and the export, against hand-computed bytes: E2M1 two to a byte with an E4M3 scale per
// 16 is 0.5625 bytes an element.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/model_layout.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/layer_ops.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobInputs inputs(const std::string& cluster = "dgx-b200") {
    core::JobInputs in;
    in.model = "gpt3-1.3b"; // h 2048, 24 layers, GELU, ffn 4h
    in.cluster = cluster;
    in.nodes = 1;
    in.tp = 1;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = 2;
    in.global_batch_size = 16;
    in.seq_length = 2048;
    return in;
}

core::JobSpec gpt(const std::string& precision, bool param_gather = false) {
    core::JobInputs in = inputs();
    in.precision = precision;
    if (param_gather) {
        in.distributed_optimizer = true;
        (precision == "nvfp4" ? in.fp4_param_gather : in.fp8_param_gather) = true;
    }
    return core::load_job(in);
}

simulator::LayerView view(const core::JobSpec& job, std::int64_t layer) {
    simulator::LayerView v = simulator::LayerView::of(job.plan, job.training.seq_length);
    v.fp8 = job.layer_fp8(layer);
    return v;
}

constexpr double kNvfp4 = 0.5 + 1.0 / 16.0;

} // namespace

TEST(Nvfp4Plan, FlagsAndPlanFilesSayItAsMegatronDoes) {
    const core::JobSpec j = gpt("nvfp4");
    EXPECT_EQ(j.plan.fp8.recipe, core::Fp8Recipe::nvfp4);
    EXPECT_EQ(core::precision_name(j.plan.fp8.recipe), "nvfp4");
    const core::Json written = core::to_json(j.plan);
    ASSERT_TRUE(written.contains("fp4")) << written.dump();
    EXPECT_FALSE(written.contains("fp8"));
    EXPECT_EQ(written["fp4"]["format"], "e2m1");
    EXPECT_EQ(core::plan_from_json(written).fp8.recipe, core::Fp8Recipe::nvfp4);
    core::JobInputs flags = inputs();
    flags.fp4_format = "e2m1";
    flags.fp4_recipe = "nvfp4";
    EXPECT_EQ(core::load_job(flags).plan.fp8.recipe, core::Fp8Recipe::nvfp4);
    flags.fp8_format = "hybrid"; // Megatron refuses both
    EXPECT_THROW(core::load_job(flags), core::SpecError);
    core::JobInputs wrong = inputs();
    wrong.fp4_format = "e4m3";
    try {
        core::load_job(wrong);
        FAIL() << "accepted --fp4-format e4m3";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "parallel.fp4.format");
    }
}

TEST(Nvfp4Plan, CastsSavedInputsAndWeightCopiesByHand) {
    // The tensor's amax (2 bytes read), then the two copies from the 16-bit values (2 read,
    // 2 × 0.5625 written): 5.125 bytes an element.
    EXPECT_DOUBLE_EQ(simulator::fp8_cast_bytes(core::Fp8Recipe::nvfp4, 1600), 1600 * 5.125);
    const core::JobSpec fp4 = gpt("nvfp4"), bf16 = gpt("bf16");
    const double T = 2 * 2048, h = 2048, layers = 24;
    // The four linear inputs (QKV T·h, context T·h, fc1 T·h, fc2 T·4h) saved at 0.5625 bytes.
    EXPECT_DOUBLE_EQ(simulator::activation_bytes(bf16.model, view(bf16, 3), 3) -
                         simulator::activation_bytes(fp4.model, view(fp4, 3), 3),
                     T * (3 * h + 4 * h) * (2.0 - kNvfp4));
    // The NVFP4 weight and its transpose beside the 16-bit weight: 1.125 bytes a parameter of
    // the 12h² per layer.
    const auto a =
        simulator::memory_per_stage(fp4, core::make_schedule(fp4.plan.schedule, 1, 1, 8));
    const auto b =
        simulator::memory_per_stage(bf16, core::make_schedule(bf16.plan.schedule, 1, 1, 8));
    EXPECT_NEAR(a[0].weights_bytes - b[0].weights_bytes, 2 * kNvfp4 * 12 * h * h * layers, 1.0);
    // The FP4 parameter gather keeps them in place of the 16-bit weight: 2 − 1.125 fewer.
    const core::JobSpec gather = gpt("nvfp4", true), plain = gpt("bf16", true);
    const auto c =
        simulator::memory_per_stage(gather, core::make_schedule(gather.plan.schedule, 1, 1, 1));
    const auto d =
        simulator::memory_per_stage(plain, core::make_schedule(plain.plan.schedule, 1, 1, 1));
    EXPECT_NEAR(d[0].weights_bytes - c[0].weights_bytes, (2.0 - 2 * kNvfp4) * 12 * h * h * layers,
                1.0);
}

TEST(Nvfp4Plan, GemmsRunOnTheFp4TableWithTheSameFlops) {
    const core::JobSpec j = gpt("nvfp4");
    const core::Profile& b200 = test::preset_profile("b200-sxm-180gb");
    const simulator::CostModel cost(j, b200);
    double flops = 0.0, bf16_flops = 0.0;
    for (const simulator::Op& op : simulator::layer_ops(j.model, view(j, 0), 0)) {
        flops += op.flops * double(op.count);
        if (op.kind == simulator::OpKind::gemm && op.name == std::string_view("qkv") &&
            op.phase == simulator::Phase::forward) {
            EXPECT_DOUBLE_EQ(cost.operation_s(op, 0),
                             b200.gemm(core::Dtype::fp4, op.m, op.n, op.k).seconds);
        }
    }
    const core::JobSpec b = gpt("bf16");
    for (const simulator::Op& op : simulator::layer_ops(b.model, view(b, 0), 0))
        bf16_flops += op.flops * double(op.count);
    EXPECT_DOUBLE_EQ(flops, bf16_flops);
    // Faster than MXFP8, and its second MFU is of the FP4 peak (9 PFLOP/s on B200).
    const simulator::Report fp4 = simulator::simulate(j, b200);
    const simulator::Report mx = simulator::simulate(gpt("mxfp8"), b200);
    EXPECT_LT(fp4.step_time_s, mx.step_time_s);
    EXPECT_NEAR(fp4.mfu_fp8_peak, fp4.mfu * 2250.0 / 9000.0, 1e-12);
}

TEST(Nvfp4Plan, RefusedWithoutAnFp4Table) {
    core::JobInputs in = inputs("dgx-h100");
    in.precision = "nvfp4";
    const core::JobSpec hopper = core::load_job(in);
    try {
        simulator::simulate(hopper, test::preset_profile("h100-sxm5-80gb"));
        FAIL() << "simulated NVFP4 on an H100";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "parallel.fp4");
        EXPECT_NE(std::string(e.what()).find("Blackwell"), std::string::npos) << e.what();
    }
}
