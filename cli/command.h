#pragma once
// One subcommand of `trident`: its CLI11 app and the function that runs it after parsing.
// Commands throw SpecError for bad input; only main turns errors into exit codes.
#include <CLI/CLI.hpp>
#include <functional>

namespace trident::cli {

struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

Command add_accuracy_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_checkpoint_command(CLI::App& app);
Command add_gui_command(CLI::App& app);
Command add_launch_command(CLI::App& app);
Command add_preprocess_command(CLI::App& app);
Command add_presets_command(CLI::App& app);
Command add_profile_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_simulate_command(CLI::App& app);
Command add_tokenizer_command(CLI::App& app);
Command add_validate_command(CLI::App& app);
Command add_version_command(CLI::App& app);

} // namespace trident::cli
