#pragma once
// What the planner panel asks for, as the user gave it (preset names or file paths, sizes and
// a budget in words), and loading it into what planner::plan() takes.
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/planner/memory_budget.h"

#include <cstdint>
#include <string>

namespace trident::gui {

struct PlannerRequest {
    std::string model;   // preset name or trident.model/1 file
    std::string cluster; // preset name or trident.cluster/1 file
    std::int64_t nodes = 1;
    std::int64_t devices_per_node = 8;
    std::int64_t global_batch_size = 64;
    std::int64_t seq_length = 1024;
    std::string memory_budget = planner::kDefaultMemoryBudget; // "70GiB", "80GB", "0.9", "90%"
    std::string profile; // preset or trident.profile/1 file; empty: core::find_profile's order
};

// Everything a planner run needs, loaded and checked.
struct PlannerJob {
    core::JobSpec specs; // model, cluster and training; the plan is what the planner searches
    core::Profile profile;
    double memory_budget_bytes = 0.0;
};

// Throws SpecError naming the field the user got wrong.
PlannerJob load_planner_job(const PlannerRequest& request);

} // namespace trident::gui
