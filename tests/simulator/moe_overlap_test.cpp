// Megatron-Core's EP communication overlap (--overlap-moe-expert-parallel-comm): the steady
// state's forward-backward pairs hide each one's token exchange behind the other's compute;
// warm-up forwards, cool-down backwards and a micro-batch's own pass pair stay exposed.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/moe_overlap.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobInputs mixtral(std::int64_t pp, std::int64_t gbs) {
    core::JobInputs in;
    in.model = "mixtral-8x7b";
    in.cluster = "dgx-h100";
    in.nodes = pp;
    in.tp = 1;
    in.pp = pp;
    in.ep = 8;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = gbs;
    in.seq_length = 4096;
    in.distributed_optimizer = true;
    in.overlap_moe_expert_parallel_comm = true;
    return in;
}

// Forwards and backwards of `rank` that found a partner.
std::pair<int, int> paired(const simulator::MoeOverlap& o, const core::Schedule& s,
                           std::int32_t rank) {
    int forwards = 0, backwards = 0;
    const auto& actions = s.ranks[std::size_t(rank)];
    for (std::size_t i = 0; i < actions.size(); ++i)
        if (o.hidden_s[std::size_t(rank)][i] > 0)
            (actions[i].kind == core::ActionKind::forward ? forwards : backwards) += 1;
    return {forwards, backwards};
}

} // namespace

TEST(MoeOverlap, OnlyTheSteadyStatesForwardBackwardPairsHide) {
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    // pp 4, 16 micro-batches (gbs 64 over dp 4): rank r warms up with 3 − r forwards, then
    // pairs 16 − (3 − r) forwards with backwards, then cools down with 3 − r backwards. The
    // last rank runs F0 B0 F1 B1 …: its B_i merges with F_{i+1}, 15 pairs.
    const core::JobSpec job = core::load_job(mixtral(4, 64));
    const core::Schedule s = core::make_schedule(job.plan.schedule, 4, 1, 16);
    const simulator::CostModel cost(job, h100);
    const simulator::MoeOverlap o = simulator::moe_overlap(job, s, cost);
    for (std::int32_t r = 0; r < 4; ++r) {
        const auto [f, b] = paired(o, s, r);
        EXPECT_EQ(f, r == 3 ? 15 : 16 - (3 - r)) << r;
        EXPECT_EQ(b, f) << r;
        // The exchange is small next to the experts' compute: each pair hides all of it.
        const double exchange = cost.chunk(r, 0).forward.moe_exchange_s +
                                cost.chunk(r, 0).backward_input.moe_exchange_s;
        EXPECT_NEAR(o.hidden_total_s(r), f * exchange, 1e-9 * exchange) << r;
    }
    // pp 1: F0 B0 F1 B1 … merges B_i with F_{i+1}; F0 and the last backward stay alone.
    const core::JobSpec flat = core::load_job(mixtral(1, 64));
    const core::Schedule s1 = core::make_schedule(flat.plan.schedule, 1, 1, 8);
    const simulator::MoeOverlap o1 =
        simulator::moe_overlap(flat, s1, simulator::CostModel(flat, h100));
    EXPECT_EQ(paired(o1, s1, 0), (std::pair<int, int>{7, 7}));
}

TEST(MoeOverlap, HidingTheExchangeShortensTheStepAndTheReportSaysHowMuch) {
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    core::JobInputs in = mixtral(2, 64);
    const simulator::Report on = simulator::simulate(core::load_job(in), h100);
    in.overlap_moe_expert_parallel_comm = false;
    const simulator::Report off = simulator::simulate(core::load_job(in), h100);
    const auto& s = on.stages.front();
    EXPECT_GT(s.moe_hidden_s, 0.5 * s.moe_exchange_s);
    EXPECT_LE(s.moe_hidden_s, s.moe_exchange_s);
    EXPECT_EQ(off.stages.front().moe_hidden_s, 0.0);
    // Faster, by at most the hidden exchange (the SMs it takes cost a little back).
    EXPECT_LT(on.step_time_s, off.step_time_s);
    EXPECT_GT(on.step_time_s, off.step_time_s - s.moe_hidden_s);
    EXPECT_NEAR(off.stages.front().collective_s - s.collective_s, s.moe_hidden_s, 1e-9);
}

TEST(MoeOverlap, NeedsExpertParallelismAndAnExchangingDispatcher) {
    core::JobInputs in = mixtral(1, 64);
    in.moe_token_dispatcher = "allgather";
    EXPECT_THROW(core::load_job(in), core::SpecError);
    in = mixtral(1, 64);
    in.ep = 1;
    try {
        core::load_job(in);
        FAIL();
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "parallel.overlap_moe_expert_parallel_comm");
    }
}
