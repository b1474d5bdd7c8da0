// trident: plan, simulate and run 3D-parallel transformer training.
// Exit codes: 0 success, 2 bad input or impossible request (one line on stderr naming the
// field), 3 a layout that does not fit in device memory (simulate, validate), 70 a bug in
// Trident, 1 any other failure.
#include "command.h"
#include "parse_error.h"
#include "trident/core/internal_error.h"
#include "trident/core/spec_error.h"

#include <iostream>
#include <vector>

int main(int argc, char** argv) {
    using namespace trident;
    CLI::App app{"Trident: plan, simulate and run 3D-parallel (tp x pp x dp x ep) training of "
                 "large transformers.",
                 "trident"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show the help of every subcommand");
    std::vector<cli::Command> commands = {
        cli::add_presets_command(app),    cli::add_validate_command(app),
        cli::add_simulate_command(app),   cli::add_plan_command(app),
        cli::add_run_command(app),        cli::add_profile_command(app),
        cli::add_preprocess_command(app), cli::add_checkpoint_command(app),
        cli::add_launch_command(app),     cli::add_tokenizer_command(app),
        cli::add_gui_command(app),        cli::add_version_command(app),
        cli::add_accuracy_command(app),
    };
    try {
        app.parse(argc, argv);
        for (auto& command : commands)
            if (command.app->parsed()) return command.run();
        return 1;
    } catch (const CLI::Success& e) {
        return app.exit(e); // --help
    } catch (const CLI::ParseError& e) {
        const auto [field, reason] = cli::describe_parse_error(e, app, argc, argv);
        std::cerr << "trident: error: " << field << ": " << reason << "\n";
        return 2;
    } catch (const core::OutOfMemoryError& e) {
        std::cerr << "trident: error: " << e.field() << ": " << e.reason() << "\n";
        return core::kOutOfMemoryExitCode;
    } catch (const core::SpecError& e) {
        std::cerr << "trident: error: " << e.field() << ": " << e.reason() << "\n";
        return 2;
    } catch (const core::InternalError& e) {
        std::cerr << "trident: internal error (a bug in Trident, not in the input; please report "
                     "it): "
                  << e.what() << "\n";
        return core::kInternalErrorExitCode;
    } catch (const std::exception& e) {
        std::cerr << "trident: internal error: " << e.what() << "\n";
        return 1;
    }
}
