#pragma once
// The device profile a cluster names (its `device` preset or file): what the GUI simulates
// and plans with, as `trident simulate` and `trident plan` do without --profile.
#include "trident/core/cluster_spec.h"
#include "trident/core/profile.h"

namespace trident::gui {

// Throws SpecError("cluster.device", ...) when the device names no profile.
core::Profile cluster_profile(const core::ClusterSpec& cluster);

} // namespace trident::gui
