#include "job_simulation.h"

#include "device_profile.h"

namespace trident::gui {

simulator::Report simulate_with_trace(const core::JobSpec& job) {
    simulator::SimulateOptions options;
    options.trace = true;
    return simulator::simulate(job, cluster_profile(job.cluster), options);
}

} // namespace trident::gui
