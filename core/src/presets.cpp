#include "trident/core/presets.h"

#include "trident/core/spec_error.h"

#include <filesystem>

namespace trident::core {

std::string_view preset_folder(PresetKind kind) {
    switch (kind) {
    case PresetKind::model:
        return "models";
    case PresetKind::cluster:
        return "clusters";
    case PresetKind::plan:
        return "plans";
    case PresetKind::profile:
        return "devices";
    case PresetKind::published_runs:
        return "accuracy";
    }
    return "";
}

std::string_view format_tag(PresetKind kind) {
    switch (kind) {
    case PresetKind::model:
        return "trident.model/1";
    case PresetKind::cluster:
        return "trident.cluster/1";
    case PresetKind::plan:
        return "trident.plan/1";
    case PresetKind::profile:
        return "trident.profile/1";
    case PresetKind::published_runs:
        return "trident.published-runs/1";
    }
    return "";
}

std::vector<std::string> preset_names(PresetKind kind) {
    std::vector<std::string> names;
    for (const auto& p : embedded_presets())
        if (p.kind == preset_folder(kind)) names.emplace_back(p.name);
    return names;
}

const EmbeddedPreset* find_preset(PresetKind kind, std::string_view name) {
    for (const auto& p : embedded_presets())
        if (p.kind == preset_folder(kind) && p.name == name) return &p;
    return nullptr;
}

namespace {

// A file or preset must say what it is, so a cluster file passed as --model is caught early.
void check_format(const Json& j, PresetKind kind, const std::string& field) {
    if (!j.is_object()) throw SpecError(field, "must be a JSON object");
    auto it = j.find("format");
    if (it == j.end())
        throw SpecError(field + ".format",
                        "missing (expected \"" + std::string(format_tag(kind)) + "\")");
    if (!it->is_string() || it->get<std::string>() != format_tag(kind))
        throw SpecError(field + ".format",
                        "expected \"" + std::string(format_tag(kind)) + "\", got " + it->dump());
}

} // namespace

Json resolve_reference(const std::string& reference, PresetKind kind, const std::string& field) {
    if (reference.empty()) throw SpecError(field, "empty name");
    std::error_code ec;
    if (std::filesystem::is_regular_file(reference, ec)) {
        Json j = read_json_file(reference, field);
        check_format(j, kind, field);
        return j;
    }
    if (const EmbeddedPreset* p = find_preset(kind, reference)) {
        Json j = parse_json_text(p->text, "preset " + reference);
        check_format(j, kind, field);
        return j;
    }
    if (reference.find('/') != std::string::npos || reference.ends_with(".json"))
        throw SpecError(field, "cannot open file '" + reference + "'");
    std::string list;
    for (const auto& name : preset_names(kind)) list += (list.empty() ? "" : ", ") + name;
    std::vector<std::string> names = preset_names(kind);
    std::vector<std::string_view> views(names.begin(), names.end());
    std::string reason = "no preset or file named '" + reference + "'";
    if (auto hint = closest_word(reference, views); !hint.empty())
        reason += " (did you mean '" + hint + "'?)";
    throw SpecError(field, reason + "; presets: " + list);
}

Json resolve_reference(const Json& reference, PresetKind kind, const std::string& field) {
    if (reference.is_string()) return resolve_reference(reference.get<std::string>(), kind, field);
    if (!reference.is_object())
        throw SpecError(field, "must be a preset name, a file path or an object");
    auto base = reference.find("preset");
    if (base == reference.end()) return reference; // inline spec
    if (!base->is_string()) throw SpecError(field + ".preset", "must be a string");
    Json merged = resolve_reference(base->get<std::string>(), kind, field + ".preset");
    Json overrides = reference;
    overrides.erase("preset");
    merged.merge_patch(overrides); // RFC 7386: objects merge key by key
    return merged;
}

} // namespace trident::core
