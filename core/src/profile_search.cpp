// Where a command finds its device profile (profile.h: find_profile), so the localhost flow —
// `trident profile`, then plan, simulate and run — works without naming the file each time.
#include "trident/core/presets.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"

#include <cstdlib>
#include <filesystem>

namespace trident::core {
namespace {

namespace fs = std::filesystem;

std::string environment(const char* name) {
    const char* value = std::getenv(name);
    return value ? std::string(value) : std::string();
}

// A file as the loaders read it, named by its absolute path (what a plan records).
ProfileChoice from_file(const fs::path& path, const std::string& field) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    const std::string name = ec ? path.string() : absolute.lexically_normal().string();
    return {name, "", resolve_reference(name, PresetKind::profile, field)};
}

bool is_file(const fs::path& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
}

} // namespace

std::string user_profile_dir() {
    if (std::string dir = environment("TRIDENT_PROFILE_DIR"); !dir.empty()) return dir;
    if (std::string data = environment("XDG_DATA_HOME"); !data.empty())
        return (fs::path(data) / "trident" / "profiles").string();
    if (std::string home = environment("HOME"); !home.empty())
        return (fs::path(home) / ".local" / "share" / "trident" / "profiles").string();
    return "";
}

ProfileChoice find_profile(const std::string& reference, const ClusterSpec& cluster,
                           const std::string& recorded) {
    if (!reference.empty()) {
        if (is_file(reference)) return from_file(reference, "--profile");
        return {reference, "", resolve_reference(reference, PresetKind::profile, "--profile")};
    }
    std::string note;
    if (!recorded.empty()) {
        if (is_file(recorded)) return from_file(recorded, "profile");
        if (find_preset(PresetKind::profile, recorded))
            return {recorded, "", resolve_reference(recorded, PresetKind::profile, "profile")};
        note = "the plan's profile '" + recorded + "' is not on this machine";
    }
    const std::string file = cluster.device + ".json";
    const std::string user_dir = user_profile_dir();
    std::vector<fs::path> places = {fs::path(file)};
    if (!user_dir.empty()) places.push_back(fs::path(user_dir) / file);
    for (const fs::path& place : places)
        if (is_file(place)) {
            ProfileChoice c = from_file(place, "cluster.device");
            if (!note.empty()) note += "; using " + c.reference;
            c.note = note;
            return c;
        }
    if (find_preset(PresetKind::profile, cluster.device)) {
        ProfileChoice c{cluster.device,
                        note.empty() ? "" : note + "; using preset " + cluster.device,
                        resolve_reference(cluster.device, PresetKind::profile, "cluster.device")};
        return c;
    }
    std::string looked = "./" + file;
    if (!user_dir.empty()) looked += ", " + (fs::path(user_dir) / file).string();
    std::string presets;
    for (const std::string& name : preset_names(PresetKind::profile))
        presets += (presets.empty() ? "" : ", ") + name;
    // The localhost cluster's device is this machine's CPU; any other is a GPU to measure.
    const std::string measure =
        cluster.host_cpu_device()
            ? "mpirun -np " + std::to_string(cluster.devices_per_node) +
                  " trident profile --backend cpu" +
                  (cluster.device == "cpu-host" ? "" : " --name " + cluster.device)
            : "trident profile --backend cuda --name " + cluster.device;
    throw SpecError("cluster.device",
                    "no profile for device '" + cluster.device + "' (looked for " + looked +
                        " and a preset of that name; presets: " + presets +
                        "): measure one with `" + measure + "`, or give --profile FILE" +
                        (note.empty() ? "" : "; " + note));
}

Profile load_profile(const std::string& reference, const ClusterSpec& cluster,
                     const std::string& recorded) {
    return Profile::from_json(find_profile(reference, cluster, recorded).json, "profile");
}

} // namespace trident::core
