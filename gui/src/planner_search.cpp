#include "planner_search.h"

#include "trident/core/spec_error.h"

namespace trident::gui {

QString one_line_error(const std::exception& e) {
    if (const auto* spec = dynamic_cast<const core::SpecError*>(&e))
        return QString::fromStdString(spec->field() + ": " + spec->reason());
    return QString("internal error: ") + e.what();
}

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
            out.error = one_line_error(why);
        }
    } catch (const std::exception& e) {
        out.error = one_line_error(e);
    }
    return out;
}

} // namespace trident::gui
