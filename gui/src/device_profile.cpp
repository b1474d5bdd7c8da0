#include "device_profile.h"

#include "trident/core/presets.h"

namespace trident::gui {

core::Profile cluster_profile(const core::ClusterSpec& cluster) {
    return core::Profile::from_json(
        core::resolve_reference(cluster.device, core::PresetKind::profile, "cluster.device"),
        "profile");
}

} // namespace trident::gui
