#pragma once
// One job simulated for display, with its event trace, on the profile core::find_profile
// chooses: `profile` (trident-gui --profile) when given, else the plan's recorded one, then
// ./DEVICE.json, the user's profile folder and the preset of the cluster's device.
#include "trident/core/job.h"
#include "trident/simulator/simulate.h"

namespace trident::gui {

// Throws SpecError when the cluster's device has no profile.
simulator::Report simulate_with_trace(const core::JobSpec& job, const std::string& profile = "");

} // namespace trident::gui
