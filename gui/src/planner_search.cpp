#include "planner_search.h"

#include "trident/core/spec_error.h"
#include "trident/core/units.h"

#include <algorithm>

namespace trident::gui {
namespace {

// The same diagnosis `trident plan` prints when the table would be empty.
QString nothing_found(const PlannerJob& job, const planner::PlanResult& r) {
    if (r.feasible == 0 && r.smallest_peak_bytes > 0)
        return QString::fromStdString(
            "memory budget: no layout fits in " + core::gib_text(job.memory_budget_bytes) +
            "; the smallest needs " + core::gib_text(r.smallest_peak_bytes) + " (" +
            r.smallest_layout + ")");
    std::vector<std::pair<std::int64_t, std::string>> counts;
    for (const auto& [reason, n] : r.rejection_counts) counts.emplace_back(n, reason);
    std::sort(counts.rbegin(), counts.rend());
    std::string reasons;
    for (std::size_t i = 0; i < counts.size() && i < 3; ++i)
        reasons += (i ? "; " : "") + counts[i].second + " ×" + std::to_string(counts[i].first);
    return QString::fromStdString("cluster: no valid layout of " +
                                  std::to_string(job.specs.cluster.devices()) + " devices for " +
                                  job.specs.model.name + ": " + reasons);
}

} // namespace

PlannerOutcome run_planner_search(const PlannerRequest& request, const std::atomic<bool>* cancel,
                                  std::function<void(const planner::Progress&)> on_progress) {
    PlannerOutcome out;
    try {
        out.job = load_planner_job(request);
        planner::PlanOptions options;
        options.memory_budget_bytes = out.job->memory_budget_bytes;
        options.top_k = kPlannerTableRows;
        options.cancel = cancel;
        options.on_progress = std::move(on_progress);
        out.result = planner::plan(out.job->specs, out.job->profile, {}, options);
        if (out.result.best.empty() && !out.result.cancelled)
            out.error = nothing_found(*out.job, out.result);
    } catch (const core::SpecError& e) {
        out.error = QString::fromStdString(e.field() + ": " + e.reason());
    } catch (const std::exception& e) {
        out.error = QString("internal error: ") + e.what();
    }
    return out;
}

} // namespace trident::gui
