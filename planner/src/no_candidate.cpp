// Why a search found nothing — one explanation for `trident plan` and the GUI's planner.
#include "trident/core/units.h"
#include "trident/planner/planner.h"

#include <algorithm>

namespace trident::planner {

core::SpecError why_no_candidate(const core::JobSpec& specs, const PlanResult& result,
                                 double memory_budget_bytes, const std::string& budget_field) {
    if (result.feasible == 0 && result.smallest_peak_bytes > 0)
        return core::SpecError(
            budget_field, "no layout fits in " + core::gib_text(memory_budget_bytes) +
                              "; the smallest needs " + core::gib_text(result.smallest_peak_bytes) +
                              " (" + result.smallest_layout + ")");
    std::vector<std::pair<std::int64_t, std::string>> counts;
    for (const auto& [reason, n] : result.rejection_counts) counts.emplace_back(n, reason);
    std::sort(counts.rbegin(), counts.rend());
    std::string reasons;
    for (std::size_t i = 0; i < counts.size() && i < 3; ++i)
        reasons += (i ? "; " : "") + counts[i].second + " ×" + std::to_string(counts[i].first);
    return core::SpecError("cluster", "no valid layout of " +
                                          std::to_string(specs.cluster.devices()) +
                                          " devices for " + specs.model.name + ": " + reasons);
}

} // namespace trident::planner
