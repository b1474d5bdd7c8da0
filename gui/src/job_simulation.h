#pragma once
// One job simulated for display: with its event trace, on the profile its cluster names.
#include "trident/core/job.h"
#include "trident/simulator/simulate.h"

namespace trident::gui {

// Throws SpecError when the cluster's device has no profile.
simulator::Report simulate_with_trace(const core::JobSpec& job);

} // namespace trident::gui
