#pragma once
// The device profile a command uses, in core::find_profile's search order (--profile, the
// plan's recorded profile, ./DEVICE.json, the user's profile folder, the preset), saying on
// stderr when the plan's recorded profile had to be passed over.
#include "trident/core/job.h"
#include "trident/core/profile.h"

#include <cstdio>

namespace trident::cli {

inline core::ProfileChoice choose_profile(const std::string& reference, const core::JobSpec& job,
                                          bool say = true) {
    core::ProfileChoice c = core::find_profile(reference, job.cluster, job.profile);
    if (say && !c.note.empty())
        std::fprintf(stderr, "trident: warning: profile: %s\n", c.note.c_str());
    return c;
}

} // namespace trident::cli
