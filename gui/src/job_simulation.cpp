#include "job_simulation.h"

#include "trident/core/profile.h"

namespace trident::gui {

simulator::Report simulate_with_trace(const core::JobSpec& job, const std::string& profile) {
    simulator::SimulateOptions options;
    options.trace = true;
    return simulator::simulate(job, core::load_profile(profile, job.cluster, job.profile), options);
}

} // namespace trident::gui
