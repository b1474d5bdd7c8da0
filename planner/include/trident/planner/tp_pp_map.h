#pragma once
// The best layout of each (tensor-parallel, pipeline-parallel) pair — the heat map people read
// off Calculon's and the Megatron papers' sweeps: which corner of the grid is fast, and how
// fast the neighbours are.
#include "trident/planner/planner.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trident::planner {

struct TpPpCell {
    std::int64_t tp = 0, pp = 0;
    std::optional<Candidate> best; // the fastest layout with these degrees
    std::string none_reason;       // why none fits, in the planner's words
};

// One search per pair of the degrees the planner would try (tp rows, pp columns, in order),
// each with every other dimension free as `space` leaves it. Stops early when cancelled.
std::vector<TpPpCell> best_per_tp_pp(const core::JobSpec& specs, const core::Profile& profile,
                                     const SearchSpace& space, const PlanOptions& options);

} // namespace trident::planner
