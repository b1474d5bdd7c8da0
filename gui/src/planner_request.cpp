#include "planner_request.h"

#include "device_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"

#include <cmath>
#include <cstdio>
#include <map>

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
    job.profile = cluster_profile(job.specs.cluster);
    job.memory_budget_bytes =
        parse_memory_budget(request.memory_budget, job.profile.memory_bytes());
    return job;
}

double parse_memory_budget(const std::string& text, double capacity_bytes) {
    static const std::map<std::string, double> kUnitBytes = {{"B", 1.0},
                                                             {"KB", 1e3},
                                                             {"MB", 1e6},
                                                             {"GB", 1e9},
                                                             {"TB", 1e12},
                                                             {"KiB", 1024.0},
                                                             {"MiB", 1024.0 * 1024.0},
                                                             {"GiB", core::kGiB},
                                                             {"TiB", core::kGiB * 1024.0}};
    double value = 0.0;
    char unit[8] = {0};
    char tail = 0;
    const int n = std::sscanf(text.c_str(), " %lf %7[A-Za-z%] %c", &value, unit, &tail);
    double bytes = -1.0;
    if ((n == 1 || n == 2) && std::isfinite(value) && value > 0) {
        const std::string u = n == 2 ? unit : "";
        if (u.empty())
            bytes = value <= 1.0 ? value * capacity_bytes : value;
        else if (u == "%")
            bytes = value / 100.0 * capacity_bytes;
        else if (const auto it = kUnitBytes.find(u); it != kUnitBytes.end())
            bytes = value * it->second;
    }
    if (bytes <= 0)
        throw core::SpecError("memory budget",
                              "cannot read \"" + text + "\" (use e.g. 70GiB, 80GB, 0.9 or 90%)");
    return bytes;
}

} // namespace trident::gui
