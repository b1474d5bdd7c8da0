#include "trident/simulator/moe_overlap.h"

#include <algorithm>
#include <numeric>

namespace trident::simulator {

using core::ActionKind;

double MoeOverlap::pass_s(const CostModel& cost, std::int32_t rank, std::size_t action,
                          const core::Action& a) const {
    const double total = cost.chunk(rank, a.chunk).of(a.kind).total_s();
    if (hidden_s.empty()) return total;
    const double hidden = hidden_s[std::size_t(rank)][action];
    return total - hidden + hidden * slowdown[std::size_t(rank)];
}

double MoeOverlap::hidden_total_s(std::int32_t rank) const {
    if (hidden_s.empty()) return 0.0;
    const auto& h = hidden_s[std::size_t(rank)];
    return std::accumulate(h.begin(), h.end(), 0.0);
}

core::GroupKind moe_exchange_group(const core::ParallelPlan& plan) {
    return plan.token_dispatcher == core::TokenDispatcher::alltoall
               ? core::GroupKind::expert
               : core::GroupKind::tensor_expert;
}

MoeOverlap moe_overlap(const core::JobSpec& job, const core::Schedule& schedule,
                       const CostModel& cost) {
    MoeOverlap o;
    if (!job.plan.overlap_moe_expert_parallel_comm) return o;
    const core::GroupKind group = moe_exchange_group(job.plan);
    for (std::int32_t r = 0; r < schedule.stages; ++r) {
        const auto& actions = schedule.ranks[std::size_t(r)];
        std::vector<double> hidden(actions.size(), 0.0);
        const auto pass = [&](std::size_t i) -> const PassCost& {
            return cost.chunk(r, actions[i].chunk).of(actions[i].kind);
        };
        const auto forward_or_backward = [&](std::size_t i) {
            return actions[i].kind == ActionKind::forward ||
                   actions[i].kind == ActionKind::backward_input;
        };
        std::size_t i = 0;
        while (i < actions.size()) {
            if (!forward_or_backward(i)) {
                ++i;
                continue;
            }
            std::size_t j = i + 1;
            while (j < actions.size() && !forward_or_backward(j)) ++j;
            if (j == actions.size()) break;
            // A micro-batch's own forward and backward cannot merge (one needs the other).
            if (actions[j].kind == actions[i].kind ||
                (actions[j].microbatch == actions[i].microbatch &&
                 actions[j].chunk == actions[i].chunk)) {
                i = j;
                continue;
            }
            const PassCost &a = pass(i), &b = pass(j);
            hidden[i] = std::min(a.moe_exchange_s, b.total_s() - b.moe_exchange_s);
            hidden[j] = std::min(b.moe_exchange_s, a.total_s() - a.moe_exchange_s);
            i = j + 1;
        }
        o.hidden_s.push_back(std::move(hidden));
        o.slowdown.push_back(cost.overlap_slowdown(group, r));
    }
    return o;
}

} // namespace trident::simulator
