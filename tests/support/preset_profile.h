#pragma once
// A shipped device profile by name, parsed once per test binary (the tests ask for the same few
// many times).
#include "trident/core/presets.h"
#include "trident/core/profile.h"

#include <map>
#include <string>

namespace trident::test {

inline const core::Profile& preset_profile(const std::string& name) {
    static std::map<std::string, core::Profile> cache;
    auto it = cache.find(name);
    if (it == cache.end())
        it = cache
                 .emplace(name, core::Profile::from_json(
                                    core::resolve_reference(name, core::PresetKind::profile, "p")))
                 .first;
    return it->second;
}

} // namespace trident::test
