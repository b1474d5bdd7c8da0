#pragma once
// Presets: model, cluster and plan JSON files shipped in profiles/ and compiled into the
// binary. A "reference" (a command-line value, or a string/object inside a plan file) names a
// preset, a JSON file path, or — as an object — an inline spec, optionally
// {"preset": NAME, ...overrides}.
#include "trident/core/json_io.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trident::core {

struct EmbeddedPreset {
    std::string_view kind; // "models", "clusters", "plans", "devices", "accuracy"
    std::string_view name; // file stem
    std::string_view text; // JSON
};

// Generated at build time from profiles/ (profiles/embed_presets.cmake).
std::span<const EmbeddedPreset> embedded_presets();

enum class PresetKind { model, cluster, plan, profile, published_runs };
std::string_view preset_folder(PresetKind kind);
std::string_view format_tag(PresetKind kind); // "trident.model/1", ...

std::vector<std::string> preset_names(PresetKind kind);
const EmbeddedPreset* find_preset(PresetKind kind, std::string_view name);

// Resolves a reference to a JSON object: an existing file path, else a preset name, else an
// error naming `field` and listing the presets. For objects with a "preset" key, the preset is
// loaded and the other keys replace its values (nested objects are merged key by key).
Json resolve_reference(const Json& reference, PresetKind kind, const std::string& field);
Json resolve_reference(const std::string& reference, PresetKind kind, const std::string& field);
inline Json resolve_reference(const char* reference, PresetKind kind, const std::string& field) {
    return resolve_reference(std::string(reference), kind, field);
}

} // namespace trident::core
