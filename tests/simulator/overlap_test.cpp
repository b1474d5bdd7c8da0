// Communication that overlaps compute: tensor-parallel overlap (--tp-comm-overlap) hides all
// but one tp-th piece of the collectives behind the GEMMs and charges the hidden part the SMs
// it takes; the last gradient bucket (the embedding's, on the first stage) stays exposed.
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

TEST(TpCommOverlap, HidesAllButOnePieceWhenTheGemmsAreLonger) {
    // tp 2 inside a node: each layer's GEMMs outlast its collectives, so the exposed part is
    // one of the tp pieces, C / tp (Wang et al. 2023's decomposition) — plus the embedding's
    // collective, which has no GEMM beside it (1 % of C here).
    const simulator::Report off = simulator::simulate(gpt(false), h100());
    const simulator::Report on = simulator::simulate(gpt(true), h100());
    const simulator::StageReport& s = on.stages[0];
    ASSERT_GT(s.tp_collective_s, 0.0);
    EXPECT_DOUBLE_EQ(s.tp_collective_s, off.stages[0].tp_collective_s);
    EXPECT_GE(s.tp_collective_s - s.tp_hidden_s, s.tp_collective_s / 2);
    EXPECT_LE(s.tp_collective_s - s.tp_hidden_s, 0.52 * s.tp_collective_s);
    EXPECT_NEAR(s.collective_s, off.stages[0].collective_s - s.tp_hidden_s,
                1e-12 * s.tp_collective_s);
    // The hidden half takes the 8.5 of 132 SMs Transformer Engine's userbuffers use on average
    // (1 for the ring-exchange all-gathers, 16 for the pipelined reduce-scatters).
    EXPECT_NEAR(s.contention_s, s.tp_hidden_s * 8.5 / 132.0, 1e-12 * s.tp_collective_s);
    EXPECT_LT(on.step_time_s, off.step_time_s);
    EXPECT_EQ(off.stages[0].tp_hidden_s, 0.0);
}

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

TEST(TpCommOverlap, ADeferredWeightGradientLeavesTheBackwardOnlyBsGemms) {
    // 1F1B runs each layer's W right after its B, so the backward's collectives overlap both
    // passes' GEMMs; zero-bubble-h1 moves W into the bubbles, leaving B's GEMMs alone.
    core::JobSpec one_f_one_b = gpt(true, 8);
    core::JobSpec zero_bubble = one_f_one_b;
    zero_bubble.plan.schedule = core::ScheduleKind::zero_bubble_h1;
    const auto dense_layer = [&](const core::JobSpec& job) {
        simulator::LayerCostCache cache;
        const simulator::CostModel cost(job, h100(), nullptr, &cache);
        for (const auto& [key, passes] : cache.entries)
            if (key[simulator::LayerCostCache::kKindIndex] == 0) return passes; // a dense layer
        ADD_FAILURE() << "no dense layer timed";
        return std::array<simulator::PassCost, 3>{};
    };
    const auto exposed = [](double comm, double gemm) {
        return std::max(0.0, comm - gemm) + std::min(comm, gemm) / 8.0;
    };
    const auto a = dense_layer(one_f_one_b), z = dense_layer(zero_bubble);
    const double comm = a[1].tp_collective_s;
    ASSERT_GT(comm, 0.0);
    EXPECT_DOUBLE_EQ(z[1].tp_collective_s, comm);
    EXPECT_NEAR(a[1].tp_hidden_s, comm - exposed(comm, a[1].gemm_s + a[2].gemm_s), 1e-15);
    EXPECT_NEAR(z[1].tp_hidden_s, comm - exposed(comm, z[1].gemm_s), 1e-15);
    EXPECT_LT(z[1].tp_hidden_s, a[1].tp_hidden_s);
    // The forward is the same under either schedule.
    EXPECT_DOUBLE_EQ(z[0].tp_hidden_s, a[0].tp_hidden_s);
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
