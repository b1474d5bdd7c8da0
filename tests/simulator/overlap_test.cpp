// Communication that overlaps compute: the SMs an overlapped collective takes, and the last
// gradient bucket (the embedding's, on the first stage), which stays exposed. Tensor-parallel
// overlap: tp_overlap_test.cpp.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec gpt(bool tp_overlap, std::int64_t tp = 2, bool overlap_grad_reduce = false,
                  std::int64_t nodes = 2) {
    core::JobInputs in;
    in.model = "gpt3-1.3b";
    in.cluster = "dgx-h100";
    in.nodes = nodes;
    in.tp = tp;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = 4;
    in.global_batch_size = 16 * 16 / tp;
    in.seq_length = 2048;
    in.sequence_parallel = tp > 1;
    in.distributed_optimizer = true;
    in.tp_comm_overlap = tp_overlap;
    in.overlap_grad_reduce = overlap_grad_reduce;
    return core::load_job(in);
}

const core::Profile& h100() {
    return test::preset_profile("h100-sxm5-80gb");
}

} // namespace

TEST(TpCommOverlap, NeedsSequenceParallelism) {
    core::JobInputs in;
    in.model = "gpt3-1.3b";
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.tp = 2;
    in.micro_batch_size = 1;
    in.global_batch_size = 8;
    in.tp_comm_overlap = true;
    EXPECT_THROW(core::load_job(in), core::SpecError);
}

TEST(GradientOverlap, TheLastBucketIsExposed) {
    // Overlapped or not, the first stage's last bucket — the 50,304 × 2,048 embedding (fp32
    // gradients) — is reduce-scattered only once the backward has finished.
    const core::JobSpec job = gpt(false, 1, true);
    const simulator::CostModel cost(job, h100());
    const simulator::StepTail tail = simulator::step_tail(job, cost, 0);
    const double embedding_bytes = 50304.0 * 2048.0 * 4.0;
    EXPECT_GE(tail.gradient_reduce_s,
              cost.collective_s(core::GroupKind::data_context, 0, core::Collective::reduce_scatter,
                                embedding_bytes));
    // Not overlapped, all of it shows.
    const core::JobSpec blocking = gpt(false, 1, false);
    const simulator::CostModel blocking_cost(blocking, h100());
    EXPECT_GT(simulator::step_tail(blocking, blocking_cost, 0).gradient_reduce_s,
              tail.gradient_reduce_s);
    EXPECT_GT(tail.contention_s, 0.0); // the hidden buckets took SMs from the backward
}

TEST(Contention, EachFabricTakesItsOwnSms) {
    // NCCL runs two channels per NVLink up to 32 (H100: 32 of 132 SMs), 16 over the NICs, one
    // SM each; a fabric that does not say takes the device's figure.
    EXPECT_DOUBLE_EQ(h100().overlap_slowdown("nvlink"), 32.0 / 132.0);
    EXPECT_DOUBLE_EQ(h100().overlap_slowdown("infiniband"), 16.0 / 132.0);
    EXPECT_DOUBLE_EQ(test::preset_profile("h800-sxm5-80gb").overlap_slowdown("nvlink"),
                     16.0 / 132.0);
    EXPECT_DOUBLE_EQ(test::preset_profile("a100-sxm4-80gb").overlap_slowdown("nvlink"),
                     24.0 / 108.0);
    core::Json j = core::resolve_reference("h100-sxm5-80gb", core::PresetKind::profile, "p");
    j["fabrics"]["nvlink"].erase("communication_sms");
    EXPECT_DOUBLE_EQ(core::Profile::from_json(j).overlap_slowdown("nvlink"), 20.0 / 132.0);
    j["fabrics"]["nvlink"]["communication_sms"] = 200; // more than the device has
    EXPECT_THROW(core::Profile::from_json(j), core::SpecError);

    // The overlapped gradient reduction inside one node (dp 8 over NVLink) and across nodes
    // (dp 16 over InfiniBand) slow the backward by their own fabric's share.
    const core::JobSpec one_node = gpt(false, 1, true);
    const simulator::CostModel cost(one_node, h100());
    EXPECT_DOUBLE_EQ(cost.overlap_slowdown(core::GroupKind::data_context, 0), 16.0 / 132.0);
    const core::JobSpec inside = gpt(false, 1, true, 1);
    const simulator::CostModel inside_cost(inside, h100());
    EXPECT_DOUBLE_EQ(inside_cost.overlap_slowdown(core::GroupKind::data_context, 0), 32.0 / 132.0);
}
