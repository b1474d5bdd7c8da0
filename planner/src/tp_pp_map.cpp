#include "trident/planner/tp_pp_map.h"

namespace trident::planner {

std::vector<TpPpCell> best_per_tp_pp(const core::JobSpec& specs, const core::Profile& profile,
                                     const SearchSpace& space, const PlanOptions& options) {
    std::vector<TpPpCell> cells;
    PlanOptions one = options;
    one.top_k = 1;
    for (const std::int64_t tp : tensor_parallel_degrees(specs, space))
        for (const std::int64_t pp : pipeline_parallel_degrees(specs, space)) {
            if (options.cancel && options.cancel->load()) return cells;
            SearchSpace pinned = space;
            pinned.tp = {tp};
            pinned.pp = {pp};
            TpPpCell cell{.tp = tp, .pp = pp, .best = std::nullopt, .none_reason = {}};
            const PlanResult r = plan(specs, profile, pinned, one);
            if (!r.best.empty())
                cell.best = r.best.front();
            else
                cell.none_reason =
                    why_no_candidate(specs, r, options.memory_budget_bytes, "memory budget").what();
            cells.push_back(std::move(cell));
        }
    return cells;
}

} // namespace trident::planner
