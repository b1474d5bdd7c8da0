// The host issues every kernel: a pass runs no faster than its kernels × the profile's
// device.host_op_issue_s, and a pass of large kernels hides the host entirely.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/cost_model.h"
#include "trident/simulator/layer_ops.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec job_of(const std::string& model, std::int64_t mbs, std::int64_t seq) {
    core::JobInputs in;
    in.model = model;
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.tp = 1;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = mbs;
    in.global_batch_size = 8 * mbs * 2;
    in.seq_length = seq;
    return core::load_job(in);
}

// The H100 profile with another host issue time.
core::Profile h100_with_host(double host_op_issue_s) {
    core::Json j = core::resolve_reference("h100-sxm5-80gb", core::PresetKind::profile, "p");
    j["device"]["host_op_issue_s"] = host_op_issue_s;
    return core::Profile::from_json(j);
}

} // namespace

TEST(HostOverhead, ThePassTakesTheHostsIssueTimeWhenItsKernelsAreSmaller) {
    const core::JobSpec job = job_of("gpt3-1.3b", 1, 256);
    const core::Profile fast = h100_with_host(0.0), slow = h100_with_host(1e-3);
    const simulator::CostModel without(job, fast), with(job, slow);
    // One layer's forward: every operation of the list that does work is one launch.
    const simulator::LayerView v = simulator::LayerView::of(job.plan, job.training.seq_length);
    double forward_kernels = 0;
    for (const simulator::Op& op : simulator::layer_ops(job.model, v, 0))
        forward_kernels +=
            op.phase == simulator::Phase::forward && op.kind != simulator::OpKind::collective;
    const simulator::PassCost& f0 = without.chunk(0, 0).forward;
    const simulator::PassCost& f1 = with.chunk(0, 0).forward;
    EXPECT_EQ(f0.host_s, 0.0);
    EXPECT_EQ(f1.kernels, f0.kernels);
    // Embedding + layers + head: at least the layers' forward launches.
    EXPECT_GE(f1.kernels, forward_kernels * double(job.model.num_layers));
    // Tiny kernels at 1 ms of host time each: the pass is the host's issue time exactly.
    EXPECT_NEAR(f1.total_s(), f1.kernels * 1e-3, 1e-12);
    EXPECT_NEAR(f1.host_s, f1.kernels * 1e-3 - f0.total_s(), 1e-12);

    const simulator::Report fast_step = simulator::simulate(job, fast);
    const simulator::Report slow_step = simulator::simulate(job, slow);
    const simulator::StageReport& s = slow_step.stages[0];
    EXPECT_GT(s.host_s, 0.0);
    EXPECT_EQ(fast_step.stages[0].host_s, 0.0);
    EXPECT_DOUBLE_EQ(s.kernels, fast_step.stages[0].kernels);
    // The waits are the GPU's idle time inside the passes, not a pipeline bubble.
    EXPECT_NEAR(slow_step.step_time_s - fast_step.step_time_s, s.host_s,
                1e-9 * slow_step.step_time_s);
    EXPECT_NEAR(s.bubble_s, fast_step.stages[0].bubble_s, 1e-9 * slow_step.step_time_s);
}

TEST(HostOverhead, LargeKernelsHideTheHost) {
    // Llama 3 8B, 4 × 4096 tokens a micro-batch on one H100: every pass's kernels outlast the
    // 13.48 µs the x86 DGX host takes to issue each one.
    const core::JobSpec job = job_of("llama3-8b", 4, 4096);
    const core::Profile& h100 = test::preset_profile("h100-sxm5-80gb");
    EXPECT_DOUBLE_EQ(h100.host_op_issue_s(), 13.48e-6);
    const simulator::Report r = simulator::simulate(job, h100);
    EXPECT_GT(r.stages[0].kernels, 0.0);
    EXPECT_EQ(r.stages[0].host_s, 0.0);
}

TEST(HostOverhead, GraceHostsIssueSlower) {
    // TE issue #2053: the same Linear forward costs 37.08 µs of Grace CPU against 13.48 µs on an
    // x86 DGX: GB200 and GB300 profiles carry the Grace figure.
    EXPECT_DOUBLE_EQ(test::preset_profile("gb200-186gb").host_op_issue_s(), 37.08e-6);
    EXPECT_DOUBLE_EQ(test::preset_profile("gb300-288gb").host_op_issue_s(), 37.08e-6);
    EXPECT_DOUBLE_EQ(test::preset_profile("b200-sxm-180gb").host_op_issue_s(), 13.48e-6);
}

TEST(HostOverhead, ANegativeIssueTimeIsRefused) {
    core::Json j = core::resolve_reference("h100-sxm5-80gb", core::PresetKind::profile, "p");
    j["device"]["host_op_issue_s"] = -1.0;
    try {
        (void)core::Profile::from_json(j);
        FAIL() << "accepted a negative host_op_issue_s";
    } catch (const core::SpecError& e) {
        EXPECT_NE(std::string(e.what()).find("device.host_op_issue_s"), std::string::npos)
            << e.what();
    }
}
