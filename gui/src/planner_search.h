#pragma once
// One planner search as the panel's worker thread runs it: load the request, search, and
// turn every failure — bad input, nothing fits, no valid layout — into one line for people.
#include "planner_request.h"
#include "trident/planner/planner.h"

#include <QString>
#include <atomic>
#include <functional>
#include <optional>

namespace trident::gui {

struct PlannerOutcome {
    std::optional<PlannerJob> job; // set once the request loaded
    planner::PlanResult result;
    QString error; // empty when result.best has candidates (or the search was cancelled)
};

// How many candidates the table lists.
inline constexpr std::size_t kPlannerTableRows = 50;

// One line for people from a failed load or search: "field: reason", or "internal error: …".
QString one_line_error(const std::exception& e);

// Runs on any thread; `on_progress` is called on that thread.
PlannerOutcome run_planner_search(const PlannerRequest& request, const std::atomic<bool>* cancel,
                                  std::function<void(const planner::Progress&)> on_progress);

} // namespace trident::gui
