// `trident checkpoint verify --dir D`: checks every checkpoint under D against its manifest
// (each shard's size and checksum). Exit 0 when all are whole, 2 when any is damaged.
#include "command.h"
#include "trident/core/spec_error.h"
#include "trident/executor/checkpoint.h"

#include <cstdio>
#include <memory>

namespace trident::cli {

Command add_checkpoint_command(CLI::App& app) {
    auto dir = std::make_shared<std::string>();
    Command c;
    c.app = app.add_subcommand("checkpoint", "Inspect checkpoints written by `trident run --save`");
    CLI::App* verify = c.app->add_subcommand("verify", "Check every checkpoint's shards against "
                                                       "its manifest (sizes and checksums)");
    verify->add_option("--dir", *dir, "Checkpoint directory (what --save was given)")->required();
    c.app->require_subcommand(1);
    c.run = [dir] {
        int damaged = 0;
        using State = executor::CheckpointCheck::State;
        for (const auto& check : executor::verify_checkpoints(*dir)) {
            const char* state = check.state == State::whole     ? "whole"
                                : check.state == State::damaged ? "DAMAGED"
                                                                : "interrupted";
            std::printf("%s: %s: %s\n", check.name.c_str(), state, check.detail.c_str());
            damaged += check.state == State::damaged;
        }
        if (damaged)
            throw core::SpecError("--dir", std::to_string(damaged) + " damaged checkpoint" +
                                               (damaged > 1 ? "s" : "") + " in '" + *dir + "'");
        return 0;
    };
    return c;
}

} // namespace trident::cli
