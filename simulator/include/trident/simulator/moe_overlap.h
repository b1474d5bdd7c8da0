#pragma once
// Megatron-Core's EP communication overlap (--overlap-moe-expert-parallel-comm): a rank runs
// the forward of one micro-batch merged with the backward of another, layer by layer, so each
// one's MoE dispatch and combine run beside the other's compute — the pairing DeepSeek-V3's
// DualPipe makes (report §3.2.1) and Megatron-Core's combined 1F1B schedule brings to 1F1B.
// Only the steady state pairs: warm-up forwards and cool-down backwards keep their exchange.
#include "trident/core/schedule.h"
#include "trident/simulator/cost_model.h"

#include <vector>

namespace trident::simulator {

struct MoeOverlap {
    // Per pipeline rank, per action of the schedule: the seconds of its token exchange hidden
    // behind its partner's compute (0: unpaired, or no MoE layer).
    std::vector<std::vector<double>> hidden_s;
    std::vector<double> slowdown; // per rank: compute lost per hidden second (the SMs it takes)

    // The action's pass time, its hidden exchange taken out and the SMs it took added.
    double pass_s(const CostModel& cost, std::int32_t rank, std::size_t action,
                  const core::Action& a) const;
    double hidden_total_s(std::int32_t rank) const;
};

// The group a layout's MoE token exchange runs over (whose fabric an overlapped exchange takes
// SMs from): alltoall's expert group, flex's and allgather's tensor × expert group.
core::GroupKind moe_exchange_group(const core::ParallelPlan& plan);

// Pairs each rank's consecutive forward and backward of different micro-batches (weight-
// gradient passes between them skipped): what is hidden is min(the pass's exchange, the
// partner's other work). Empty unless the plan overlaps.
MoeOverlap moe_overlap(const core::JobSpec& job, const core::Schedule& schedule,
                       const CostModel& cost);

} // namespace trident::simulator
