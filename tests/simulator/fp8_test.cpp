// FP8 training in the cost and memory model, against hand-computed values: which GEMMs run in
// FP8, what the casts move, what FP8 saves in activations and adds in weight copies, the two
// MFU conventions, and that a device without FP8 is refused.
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

core::JobSpec gpt(const std::string& precision, bool param_gather = false,
                  const std::string& cluster = "dgx-h100") {
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
    in.precision = precision;
    if (param_gather) {
        in.fp8_param_gather = true;
        in.distributed_optimizer = true;
    }
    return core::load_job(in);
}

simulator::LayerView view(const core::JobSpec& job, std::int64_t layer) {
    simulator::LayerView v = simulator::LayerView::of(job.plan, job.training.seq_length);
    v.fp8 = job.layer_fp8(layer);
    return v;
}

} // namespace

TEST(Fp8, LinearGemmsRunInFp8AndTheRestDoesNot) {
    const core::JobSpec j = gpt("fp8-tensorwise");
    const auto ops = simulator::layer_ops(j.model, view(j, 0), 0);
    const auto bf16 = simulator::layer_ops(j.model, view(gpt("bf16"), 0), 0);
    double flops = 0, bf16_flops = 0;
    int fp8_gemms = 0, casts = 0;
    for (const auto& op : ops) {
        flops += op.flops * double(op.count);
        if (op.kind == simulator::OpKind::gemm) {
            EXPECT_TRUE(op.fp8) << op.name; // QKV, output projection, fc1, fc2: all three passes
            ++fp8_gemms;
        }
        if (op.kind == simulator::OpKind::attention) {
            EXPECT_FALSE(op.fp8);
        }
        if (op.name == std::string_view("fp8 cast")) ++casts;
    }
    for (const auto& op : bf16) bf16_flops += op.flops * double(op.count);
    EXPECT_EQ(fp8_gemms, 4 * 3);
    EXPECT_EQ(casts, 4 * 2);             // the input forward, the output gradient backward
    EXPECT_DOUBLE_EQ(flops, bf16_flops); // FP8 changes time, not FLOPs
    // The loss head stays BF16.
    for (const auto& op : simulator::head_ops(j.model, view(j, 0), j.model.padded_vocab_size(1)))
        EXPECT_FALSE(op.fp8) << op.name;
}

TEST(Fp8, CastBytesPerRecipe) {
    // Read 2 bytes, write the FP8 copy and its transpose: 4 bytes an element; current scaling
    // reads once more for its amax; block scales add fp32 per 128 (both directions) or E8M0
    // per 32.
    EXPECT_DOUBLE_EQ(simulator::fp8_cast_bytes(core::Fp8Recipe::delayed, 1000), 4000);
    EXPECT_DOUBLE_EQ(simulator::fp8_cast_bytes(core::Fp8Recipe::tensorwise, 1000), 6000);
    EXPECT_DOUBLE_EQ(simulator::fp8_cast_bytes(core::Fp8Recipe::blockwise, 1280), 5120 + 80);
    EXPECT_DOUBLE_EQ(simulator::fp8_cast_bytes(core::Fp8Recipe::mxfp8, 3200), 12800 + 200);
    // The QKV cast of one micro-batch: input T×h forward, output gradient T×3h backward.
    const core::JobSpec j = gpt("fp8-delayed");
    const double T = 2 * 2048, h = 2048;
    std::vector<double> cast_bytes;
    for (const auto& op : simulator::layer_ops(j.model, view(j, 0), 0))
        if (op.name == std::string_view("fp8 cast")) cast_bytes.push_back(op.bytes);
    ASSERT_GE(cast_bytes.size(), 2u);
    EXPECT_DOUBLE_EQ(cast_bytes[0], 4 * T * h);
    EXPECT_DOUBLE_EQ(cast_bytes[1], 4 * T * 3 * h);
}

TEST(Fp8, ActivationsKeepFp8LinearInputs) {
    // The four linear inputs — QKV (T·h), context (T·h), fc1 (T·h), fc2 (T·4h) — are saved at
    // one byte instead of two: T·(3h + 4h) bytes fewer per layer.
    const core::JobSpec fp8 = gpt("fp8-delayed"), bf16 = gpt("bf16");
    const double T = 2 * 2048, h = 2048;
    EXPECT_DOUBLE_EQ(simulator::activation_bytes(bf16.model, view(bf16, 3), 3) -
                         simulator::activation_bytes(fp8.model, view(fp8, 3), 3),
                     T * (3 * h + 4 * h));
}

TEST(Fp8, WeightCopiesAndTheParameterGather) {
    // FP8 copy + transpose of every linear weight: 12h² per layer, 2 bytes each.
    const core::JobSpec fp8 = gpt("fp8-delayed"), bf16 = gpt("bf16");
    const double h = 2048, layers = 24;
    const auto a =
        simulator::memory_per_stage(fp8, core::make_schedule(fp8.plan.schedule, 1, 1, 8));
    const auto b =
        simulator::memory_per_stage(bf16, core::make_schedule(bf16.plan.schedule, 1, 1, 8));
    EXPECT_DOUBLE_EQ(a[0].weights_bytes - b[0].weights_bytes, 2 * 12 * h * h * layers);
    EXPECT_DOUBLE_EQ(a[0].optimizer_bytes, b[0].optimizer_bytes); // FP32 master state unchanged
    EXPECT_DOUBLE_EQ(a[0].gradients_bytes, b[0].gradients_bytes);
    // With the FP8 parameter gather the FP8 weight is the parameter: no extra copy.
    const core::JobSpec gather = gpt("fp8-delayed", true);
    const auto c =
        simulator::memory_per_stage(gather, core::make_schedule(gather.plan.schedule, 1, 1, 1));
    const auto d = simulator::memory_per_stage(
        gpt("bf16", true), core::make_schedule(core::ScheduleKind::one_f_one_b, 1, 1, 1));
    EXPECT_DOUBLE_EQ(c[0].weights_bytes, d[0].weights_bytes);
}

TEST(Fp8, FirstAndLastLayersInBf16) {
    core::JobInputs in;
    in.model = "gpt3-1.3b";
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.tp = 1;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 8;
    in.fp8_format = "hybrid";
    in.first_last_layers_bf16 = true;
    in.bf16_layers_at_end = 2;
    const core::JobSpec j = core::load_job(in);
    EXPECT_EQ(j.plan.fp8.recipe, core::Fp8Recipe::delayed); // Megatron's default recipe
    EXPECT_EQ(j.layer_fp8(0), core::Fp8Recipe::none);
    EXPECT_EQ(j.layer_fp8(1), core::Fp8Recipe::delayed);
    EXPECT_EQ(j.layer_fp8(21), core::Fp8Recipe::delayed);
    EXPECT_EQ(j.layer_fp8(22), core::Fp8Recipe::none);
    const core::ChunkLayout layout(j, 0, 0, 0, 0, 1, core::LayoutDetail::counts);
    EXPECT_EQ(layout.fp8_parameters(), 21 * 12 * 2048 * 2048);
}

TEST(Fp8, FasterOnHopperWithBothMfuConventionsAndRefusedOnAmpere) {
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const core::Timing fp8 = h100.gemm(core::Dtype::fp8, 8192, 8192, 8192);
    const core::Timing bf16 = h100.gemm(core::Dtype::bf16, 8192, 8192, 8192);
    EXPECT_GT(bf16.seconds / fp8.seconds, 1.8);
    EXPECT_LT(bf16.seconds / fp8.seconds, 2.1);
    const auto r8 = simulator::simulate(gpt("fp8-tensorwise"), h100);
    const auto r16 = simulator::simulate(gpt("bf16"), h100);
    EXPECT_LT(r8.step_time_s, r16.step_time_s);
    EXPECT_NEAR(r8.mfu_fp8_peak, r8.mfu * 989.0 / 1979.0, 1e-12);
    for (const auto& s : r8.stages) {
        EXPECT_GT(s.fp8_gemm_s, 0.0);
        EXPECT_GT(s.fp8_cast_s, 0.0);
        EXPECT_LT(s.fp8_gemm_s, s.gemm_s); // the LM head stays BF16
    }
    EXPECT_THROW(simulator::simulate(gpt("fp8-delayed", false, "dgx-a100-80gb"),
                                     test::preset_profile("a100-sxm4-80gb")),
                 core::SpecError);
    EXPECT_THROW(simulator::simulate(gpt("mxfp8"), h100), core::SpecError); // Blackwell only
}
