// Which checkpoint `--load` means, and the listing of a checkpoint directory: the choices a
// user makes after a crash (resume, go back to an older whole iteration, start over).
#include "checkpoint_files.h"
#include "trident/core/spec_error.h"
#include "trident/executor/checkpoint.h"

#include <algorithm>
#include <fstream>

namespace trident::executor {
namespace fs = std::filesystem;
using namespace checkpoint_files;

namespace {

bool same_directory(const std::string& a, const std::string& b) {
    std::error_code ec;
    const fs::path x = fs::weakly_canonical(a, ec), y = fs::weakly_canonical(b, ec);
    return x.lexically_normal() == y.lexically_normal();
}

// The iterations of `root` that have a manifest (a save that finished), oldest first.
std::vector<std::int64_t> saved_iterations(const fs::path& root) {
    std::vector<std::int64_t> found;
    if (!fs::is_directory(root)) return found;
    for (const auto& entry : fs::directory_iterator(root))
        if (const auto it = iteration_of(entry.path().filename().string());
            it && fs::exists(entry.path() / kManifest))
            found.push_back(*it);
    std::sort(found.begin(), found.end());
    return found;
}

std::string listed(const std::vector<std::int64_t>& iterations) {
    std::string text;
    for (const std::int64_t it : iterations)
        text += (text.empty() ? "" : ", ") + std::to_string(it);
    return text;
}

} // namespace

LoadRequest load_request(const std::string& load, std::optional<std::int64_t> ckpt_step,
                         const std::string& save) {
    LoadRequest request{load, ckpt_step, false};
    fs::path path(load);
    if (!path.has_filename()) path = path.parent_path(); // "DIR/iter_0000004/"
    if (const auto it = iteration_of(path.filename().string())) {
        if (ckpt_step && *ckpt_step != *it)
            throw core::SpecError("--ckpt-step", "is " + std::to_string(*ckpt_step) +
                                                     ", but --load names " +
                                                     path.filename().string());
        request.dir = path.has_parent_path() ? path.parent_path().string() : ".";
        request.iteration = *it;
    }
    if (request.iteration && *request.iteration < 0)
        throw core::SpecError("--ckpt-step",
                              "must be 0 or more, not " + std::to_string(*request.iteration));
    request.first_launch_allowed =
        !request.iteration && !save.empty() && same_directory(request.dir, save);
    return request;
}

std::optional<std::int64_t> latest_pointer(const std::string& dir) {
    std::ifstream latest(fs::path(dir) / kLatest);
    std::int64_t named = -1;
    if (latest && (latest >> named) && named >= 0) return named;
    return std::nullopt;
}

namespace checkpoint_files {

std::int64_t choose_iteration(const LoadRequest& request) {
    const fs::path root(request.dir);
    const std::string where = "'" + request.dir + "'";
    const std::string first_launch =
        "; a first launch that saves there gives the same directory to --save";
    if (fs::exists(root) && !fs::is_directory(root))
        throw core::SpecError("--load", where + " is not a directory");
    if (!fs::exists(root)) {
        if (request.first_launch_allowed) return -1;
        throw core::SpecError("--load", where + " does not exist" + first_launch);
    }
    const std::vector<std::int64_t> saved = saved_iterations(root);
    if (request.iteration) {
        if (std::find(saved.begin(), saved.end(), *request.iteration) != saved.end())
            return *request.iteration;
        throw core::SpecError("--load",
                              where + " has no whole " + checkpoint_name(*request.iteration) +
                                  (saved.empty() ? std::string(" (it holds no checkpoint)")
                                                 : " (it holds iterations " + listed(saved) + ")"));
    }
    // The newest saved directory, whatever latest_checkpointed_iteration.txt says: a run killed
    // between renaming a checkpoint into place and updating the pointer has a newer one.
    // --ckpt-step picks an older one.
    std::ifstream latest(root / kLatest);
    std::int64_t named = -1;
    if (latest && !(latest >> named))
        throw core::SpecError("--load", "'" + (root / kLatest).string() +
                                            "' does not hold an iteration number");
    const std::int64_t newest = saved.empty() ? -1 : saved.back();
    if (named > newest)
        throw core::SpecError("--load", "'" + (root / kLatest).string() + "' names " +
                                            checkpoint_name(named) + ", which does not exist");
    if (newest < 0 && !request.first_launch_allowed)
        throw core::SpecError("--load", where + " holds no checkpoint" + first_launch);
    return newest;
}

std::string newest_whole_hint(const fs::path& root, std::int64_t damaged) {
    const std::vector<std::int64_t> saved = saved_iterations(root);
    for (auto it = saved.rbegin(); it != saved.rend(); ++it)
        if (*it < damaged && integrity_problem(root / checkpoint_name(*it)).empty())
            return "; the newest whole checkpoint before it is " + checkpoint_name(*it) +
                   ": load it with --ckpt-step " + std::to_string(*it) +
                   " (`trident checkpoint list --dir " + root.string() + "` shows them all)";
    return "; no older checkpoint in '" + root.string() +
           "' is whole (start over without --load, or with another --save directory)";
}

} // namespace checkpoint_files

std::vector<CheckpointCheck> verify_checkpoints(const std::string& dir) {
    using State = CheckpointCheck::State;
    if (!fs::is_directory(dir)) throw core::SpecError("--dir", "'" + dir + "' is not a directory");
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_directory()) dirs.push_back(entry.path());
    std::sort(dirs.begin(), dirs.end());
    std::vector<CheckpointCheck> checks;
    for (const fs::path& d : dirs) {
        CheckpointCheck c{d.filename().string(),      State::whole, {},
                          iteration_of(d.filename()), -1,           {}};
        if (!c.iteration) {
            c.state = State::interrupted;
            c.detail = "an interrupted save: ignored by --load, removed by the next --save";
        } else if (c.detail = integrity_problem(d); !c.detail.empty()) {
            c.state = State::damaged;
        } else {
            const core::Json manifest = read_manifest(d);
            c.detail =
                std::to_string(manifest.at("shards").size()) + " shards, sizes and checksums match";
            c.consumed_samples = manifest.value("consumed_samples", std::int64_t(-1));
            if (manifest.contains("layout")) c.layout = describe_layout(manifest.at("layout"));
        }
        checks.push_back(std::move(c));
    }
    return checks;
}

} // namespace trident::executor
