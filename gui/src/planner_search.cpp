#include "planner_search.h"

#include "trident/core/spec_error.h"

namespace trident::gui {

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
        if (out.result.best.empty() && !out.result.cancelled) {
            const core::SpecError why = planner::why_no_candidate(
                out.job->specs, out.result, out.job->memory_budget_bytes, "memory budget");
            out.error = QString::fromStdString(why.field() + ": " + why.reason());
        }
    } catch (const core::SpecError& e) {
        out.error = QString::fromStdString(e.field() + ": " + e.reason());
    } catch (const std::exception& e) {
        out.error = QString("internal error: ") + e.what();
    }
    return out;
}

} // namespace trident::gui
