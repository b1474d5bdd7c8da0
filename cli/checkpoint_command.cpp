// `trident checkpoint verify|list --dir D`. verify checks every checkpoint under D against its
// manifest (each shard's size and checksum): exit 0 when all are whole, 2 when any is damaged.
// list shows every iteration, whether it is whole, its data position and layout, which one
// latest_checkpointed_iteration.txt names and which one `--load D` would take: exit 0.
#include "command.h"
#include "trident/core/spec_error.h"
#include "trident/executor/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <memory>

namespace trident::cli {
namespace {

using State = executor::CheckpointCheck::State;

const char* state_name(State s) {
    return s == State::whole ? "whole" : s == State::damaged ? "DAMAGED" : "interrupted";
}

int verify(const std::string& dir) {
    int damaged = 0;
    for (const auto& check : executor::verify_checkpoints(dir)) {
        std::printf("%s: %s: %s\n", check.name.c_str(), state_name(check.state),
                    check.detail.c_str());
        damaged += check.state == State::damaged;
    }
    if (damaged)
        throw core::SpecError("--dir", std::to_string(damaged) + " damaged checkpoint" +
                                           (damaged > 1 ? "s" : "") + " in '" + dir + "'");
    return 0;
}

int list(const std::string& dir) {
    const auto checks = executor::verify_checkpoints(dir);
    const auto pointer = executor::latest_pointer(dir);
    std::int64_t newest = -1, newest_whole = -1;
    for (const auto& c : checks) {
        if (!c.iteration) continue;
        newest = std::max(newest, *c.iteration);
        if (c.state == State::whole) newest_whole = std::max(newest_whole, *c.iteration);
    }
    std::printf("%-10s %-11s %9s  %s\n", "iteration", "state", "samples", "layout / problem");
    for (const auto& c : checks) {
        const std::string it = c.iteration ? std::to_string(*c.iteration) : "-";
        const std::string samples =
            c.consumed_samples >= 0 ? std::to_string(c.consumed_samples) : "-";
        std::string marks;
        if (c.iteration && pointer == c.iteration) marks += "  [latest_checkpointed_iteration]";
        if (c.iteration && *c.iteration == newest) marks += "  [--load takes this]";
        std::printf("%-10s %-11s %9s  %s%s\n", it.c_str(), state_name(c.state), samples.c_str(),
                    (c.state == State::whole ? c.layout : c.name + ": " + c.detail).c_str(),
                    marks.c_str());
    }
    if (checks.empty()) std::printf("no checkpoints in '%s'\n", dir.c_str());
    if (newest >= 0 && newest_whole != newest)
        std::printf("the newest checkpoint is not whole: %s\n",
                    newest_whole >= 0 ? ("load the newest whole one with --load " + dir +
                                         " --ckpt-step " + std::to_string(newest_whole))
                                            .c_str()
                                      : "no checkpoint here is whole");
    return 0;
}

} // namespace

Command add_checkpoint_command(CLI::App& app) {
    auto dir = std::make_shared<std::string>();
    Command c;
    c.app = app.add_subcommand("checkpoint", "Inspect checkpoints written by `trident run --save`");
    CLI::App* verify_app = c.app->add_subcommand(
        "verify", "Check every checkpoint's shards against its manifest (sizes and checksums)");
    verify_app->add_option("--dir", *dir, "Checkpoint directory (what --save was given)")
        ->required();
    CLI::App* list_app = c.app->add_subcommand(
        "list", "Every iteration under --dir: whole or not, samples consumed, layout");
    list_app->add_option("--dir", *dir, "Checkpoint directory (what --save was given)")->required();
    c.app->require_subcommand(1);
    c.run = [dir, list_app] { return list_app->parsed() ? list(*dir) : verify(*dir); };
    return c;
}

} // namespace trident::cli
