#include "planner_request.h"

#include "trident/core/job_loader.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/planner/memory_budget.h"

namespace trident::gui {

PlannerJob load_planner_job(const PlannerRequest& request) {
    if (request.model.empty()) throw core::SpecError("model", "choose a preset or a file");
    if (request.cluster.empty()) throw core::SpecError("cluster", "choose a preset or a file");
    core::JobInputs inputs;
    inputs.model = request.model;
    inputs.cluster = request.cluster;
    inputs.nodes = request.nodes;
    inputs.devices_per_node = request.devices_per_node;
    inputs.global_batch_size = request.global_batch_size;
    inputs.seq_length = request.seq_length;
    PlannerJob job;
    job.specs = core::load_specs(inputs);
    const core::ProfileChoice choice = core::find_profile(request.profile, job.specs.cluster);
    job.profile = core::Profile::from_json(choice.json, "profile");
    job.specs.profile = choice.reference; // a saved plan records it
    job.memory_budget_bytes = planner::parse_memory_budget(
        request.memory_budget, job.profile.memory_bytes(), "memory budget");
    return job;
}

} // namespace trident::gui
